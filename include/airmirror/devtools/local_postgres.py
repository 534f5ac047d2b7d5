"""A real, throw-away PostgreSQL server for tests and the soak.

:func:`postgres_server` runs ``initdb`` in a fresh temporary directory, starts the server with
``pg_ctl`` on a free 127.0.0.1 port (its unix socket also lives in that directory), creates a
password-protected superuser and a database, yields a :class:`PostgresServer`, and finally stops
the server and deletes the directory.  When run as root the PostgreSQL binaries, which refuse
root, run as the ``postgres`` user.

Missing binaries are an error, never a skip: CI installs them (``apt-get install postgresql``).
They are found with ``pg_config --bindir`` or under ``/usr/lib/postgresql/<version>/bin``.
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from sqlalchemy import URL

from airmirror.devtools.local_kafka import free_port

SERVER_USER = "postgres"
"""The OS user that runs the server when the tests run as root."""
START_TIMEOUT_SECONDS = 60


def find_bindir() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl``; raises ``RuntimeError`` if there is none."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        bindir = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False).stdout
        candidates.append(Path(bindir.strip()))
    candidates.extend(
        sorted(
            Path("/usr/lib/postgresql").glob("*/bin"),
            key=lambda path: [int(part) for part in re.findall(r"\d+", path.parent.name)],
            reverse=True,
        )
    )
    for candidate in candidates:
        if (candidate / "initdb").is_file() and (candidate / "pg_ctl").is_file():
            return candidate
    raise RuntimeError(
        "PostgreSQL server binaries (initdb, pg_ctl) not found via `pg_config --bindir` or in "
        "/usr/lib/postgresql/*/bin; the integration tests need a real server: "
        "install it, e.g. `apt-get install postgresql`"
    )


class PostgresServer:
    """A server in its own directory ``root``: data in ``root/data``, socket and log in ``root``."""

    host = "127.0.0.1"
    user = "airmirror"
    database = "airmirror_test"

    def __init__(self, bindir: Path, root: Path) -> None:
        self.bindir = bindir
        self.root = root
        self.port = free_port()
        self.password = secrets.token_urlsafe(12)
        self.running = False
        self._as_server_user = os.geteuid() == 0

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log_file(self) -> Path:
        return self.root / "server.log"

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the default test database."""
        return self.database_url(self.database)

    def database_url(self, database: str) -> str:
        return URL.create(
            "postgresql+psycopg",
            username=self.user,
            password=self.password,
            host=self.host,
            port=self.port,
            database=database,
        ).render_as_string(hide_password=False)

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bindir / tool), *args]
        if self._as_server_user:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        done = subprocess.run(command, cwd=self.root, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            log = self.log_file.read_text(errors="replace")[-4000:] if self.log_file.exists() else ""
            raise RuntimeError(
                f"{' '.join(command)} failed with exit code {done.returncode}:\n"
                f"{done.stdout}{done.stderr}\nserver log:\n{log}"
            )

    def _own(self, path: Path) -> None:
        if self._as_server_user:
            account = pwd.getpwnam(SERVER_USER)
            os.chown(path, account.pw_uid, account.pw_gid)

    def init(self) -> None:
        """Create the cluster: superuser ``user`` with ``password``, password auth over TCP."""
        self._own(self.root)
        password_file = self.root / "password"
        password_file.write_text(self.password)
        self._own(password_file)
        self._run(
            "initdb",
            "--pgdata",
            str(self.data_dir),
            "--username",
            self.user,
            "--pwfile",
            str(password_file),
            "--auth-local",
            "trust",
            "--auth-host",
            "scram-sha-256",
            "--encoding",
            "UTF8",
            "--locale",
            "C",
            "--no-sync",
        )
        password_file.unlink()
        with (self.data_dir / "postgresql.conf").open("a") as conf:
            conf.write(
                f"\nlisten_addresses = '{self.host}'\n"
                f"port = {self.port}\n"
                f"unix_socket_directories = '{self.root}'\n"
                "fsync = off\n"
            )

    def start(self) -> None:
        self._run(
            "pg_ctl",
            "start",
            "--pgdata",
            str(self.data_dir),
            "--log",
            str(self.log_file),
            "--wait",
            "--timeout",
            str(START_TIMEOUT_SECONDS),
        )
        self.running = True

    def stop(self) -> None:
        """Stop the server, disconnecting every client."""
        self._run("pg_ctl", "stop", "--pgdata", str(self.data_dir), "--mode", "fast", "--wait")
        self.running = False

    def create_database(self, name: str) -> str:
        """Create database ``name`` and return its SQLAlchemy URL."""
        with psycopg.connect(
            host=self.host, port=self.port, user=self.user, password=self.password, dbname="postgres", autocommit=True
        ) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.database_url(name)


@contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """Run a throw-away server with database ``PostgresServer.database``; remove it all afterwards."""
    bindir = find_bindir()
    server = PostgresServer(bindir, Path(tempfile.mkdtemp(prefix="airmirror-pg-")))
    try:
        server.init()
        server.start()
        server.create_database(server.database)
        yield server
    finally:
        if server.running:
            server.stop()
        shutil.rmtree(server.root, ignore_errors=True)
