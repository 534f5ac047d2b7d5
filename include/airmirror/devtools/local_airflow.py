"""A local ``airflow standalone`` (LocalExecutor) running airmirror's DAGs, and a REST client for it.

Used by ``make demo`` (metadata in SQLite under the home) and the end-to-end tests (metadata in a PostgreSQL
database: under SQLite's one write lock, Airflow 3.3's API at times answers a backfill 503 after the scheduler
has already seen some of its runs, and the scheduler then dies on the vanished rows).

The process runs in its own process group (``setsid``) so that stopping it stops the scheduler, DAG processor,
API server and triggerer it spawned.  Its state (AIRFLOW_HOME, log, pid file) lives under ``{home}/airflow``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from airmirror.errors import ReplicationFailure

REPO_ROOT = Path(__file__).resolve().parents[3]
ADMIN_USER = "admin"
SQLITE_CONNECT_ARGS: dict[str, Any] = {"timeout": 30}
"""Connect arguments of the local Airflow's SQLite metadata DB (sync and async engines, by import path): a
connection waits up to 30 s for the write lock instead of sqlite3's 5 s, which the scheduler's transactions
outlast at times on a loaded 2-core machine (the API then answered 500 "database is locked")."""


def scheduler_is_healthy(health: dict[str, Any]) -> bool:
    """Whether Airflow's ``/api/v2/monitor/health`` answer ``health`` says its scheduler is healthy."""
    return bool(health.get("scheduler", {}).get("status") == "healthy")


@dataclass(frozen=True)
class LocalAirflow:
    """Where a local standalone Airflow lives and listens."""

    home: Path
    port: int
    metadata_db: str | None = field(default=None, repr=False)
    """SQLAlchemy URL (``postgresql+psycopg://...``) of Airflow's metadata DB; None: SQLite in ``airflow_home``.
    Kept out of the repr: it carries a password."""

    @property
    def airflow_home(self) -> Path:
        return self.home / "airflow"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid_file(self) -> Path:
        return self.airflow_home / "standalone.pid"

    @property
    def log_file(self) -> Path:
        return self.airflow_home / "standalone.log"

    def environment(self, config: Path, spark_master: str = "local[2]") -> dict[str, str]:
        """The environment every Airflow component and task runs with."""
        return {
            **os.environ,
            "AIRFLOW_HOME": str(self.airflow_home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_ROOT / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__PARALLELISM": "4",
            **self._database_environment(),
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__SCHEDULER__MIN_FILE_PROCESS_INTERVAL": "5",
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": spark_master}),
            "AIRMIRROR_CONFIG": str(config),
            "AIRMIRROR_HOME": str(self.home),
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }

    def _database_environment(self) -> dict[str, str]:
        if self.metadata_db is None:
            return {
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS": f"{__name__}.SQLITE_CONNECT_ARGS",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS_ASYNC": f"{__name__}.SQLITE_CONNECT_ARGS",
            }
        # psycopg 3 serves SQLAlchemy's sync and async engines alike (Airflow would derive asyncpg otherwise).
        return {
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.metadata_db,
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": self.metadata_db,
        }

    def start(self, config: Path, timeout: float = 180) -> None:
        """Start ``airflow standalone`` (if not running) and wait until its API answers."""
        self.airflow_home.mkdir(parents=True, exist_ok=True)
        if self.running_pid() is None:
            log = self.log_file.open("ab")
            process = subprocess.Popen(
                [str(Path(sys.executable).parent / "airflow"), "standalone"],
                env=self.environment(config),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            self.pid_file.write_text(str(process.pid))
        self.wait_healthy(timeout)

    def running_pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text())
            os.kill(pid, 0)
        except (FileNotFoundError, ValueError, ProcessLookupError):
            return None
        return pid

    def wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.running_pid() is None:
                raise ReplicationFailure(f"airflow standalone exited; see {self.log_file}")
            try:
                health = httpx.get(f"{self.url}/api/v2/monitor/health", timeout=5).json()
                if scheduler_is_healthy(health) and self.password_file().exists():
                    return
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(1)
        raise ReplicationFailure(f"airflow standalone not healthy after {timeout:.0f}s; see {self.log_file}")

    def stop(self, timeout: float = 60) -> bool:
        """Stop the whole process group; False if it was not running."""
        pid = self.running_pid()
        if pid is None:
            return False
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10)):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and self.running_pid() is not None:
                time.sleep(0.5)
            if self.running_pid() is None:
                break
        self.pid_file.unlink(missing_ok=True)
        return True

    def password_file(self) -> Path:
        return self.airflow_home / "simple_auth_manager_passwords.json.generated"

    def admin_password(self) -> str:
        passwords: dict[str, str] = json.loads(self.password_file().read_text())  # user name -> password
        return passwords[ADMIN_USER]

    def client(self) -> AirflowApi:
        token = httpx.post(
            f"{self.url}/auth/token", json={"username": ADMIN_USER, "password": self.admin_password()}, timeout=30
        ).json()["access_token"]
        return AirflowApi(
            httpx.Client(base_url=f"{self.url}/api/v2", headers={"Authorization": f"Bearer {token}"}, timeout=30)
        )


BUSY_RETRY_S = 60.0
SCHEDULER_GONE_S = 120.0
"""How long the scheduler may miss its health check before a wait gives up: a loaded 2-core machine delays its
heartbeats by tens of seconds at times; a dead scheduler never comes back."""


@dataclass
class AirflowApi:
    """The few REST calls airmirror's demo and tests make."""

    http: httpx.Client

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """One REST call; its JSON answer.  The local Airflow keeps its metadata in SQLite, whose write lock the
        scheduler holds at times: Airflow then answers 503 (e.g. "Database is locked" for a backfill), or, on a
        busy machine, not within the client's timeout; the call is retried for up to :data:`BUSY_RETRY_S` (after a
        timeout only when it is idempotent: never a POST).  Any other error status raises at once."""
        deadline = time.monotonic() + BUSY_RETRY_S
        response = self._request(method, path, deadline, **kwargs)
        while response.status_code == 503 and time.monotonic() < deadline:
            time.sleep(1)
            response = self._request(method, path, deadline, **kwargs)
        if response.status_code >= 400:
            raise ReplicationFailure(f"Airflow API {method} {path}: {response.status_code} {response.text}")
        return response.json() if response.content else None

    def _request(self, method: str, path: str, deadline: float, **kwargs: Any) -> httpx.Response:
        while True:
            try:
                return self.http.request(method, path, **kwargs)
            except httpx.TimeoutException:
                if method.upper() == "POST" or time.monotonic() >= deadline:
                    raise

    def wait_for_dag(self, dag_id: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.http.get(f"/dags/{dag_id}").status_code == 200:
                return
            time.sleep(1)
        raise ReplicationFailure(f"DAG {dag_id} did not appear in Airflow within {timeout:.0f}s")

    def unpause(self, dag_id: str) -> None:
        self.call("PATCH", f"/dags/{dag_id}", json={"is_paused": False})

    def dag_runs(self, dag_id: str) -> list[dict[str, Any]]:
        answer = self.call("GET", f"/dags/{dag_id}/dagRuns", params={"order_by": "logical_date", "limit": 100})
        runs: list[dict[str, Any]] = answer["dag_runs"]
        return runs

    def wait_for_runs(
        self, dag_id: str, count: int, timeout: float = 300, run_type: str | None = None
    ) -> list[dict[str, Any]]:
        """Wait until ``count`` runs (of ``run_type`` if given) have finished; fail on a failed run, and as soon
        as the scheduler has been unhealthy for :data:`SCHEDULER_GONE_S` (``airflow standalone`` does not restart
        a scheduler that died, so no run would ever finish)."""
        deadline = time.monotonic() + timeout
        healthy_at = time.monotonic()
        while time.monotonic() < deadline:
            if self.scheduler_healthy():
                healthy_at = time.monotonic()
            elif time.monotonic() - healthy_at > SCHEDULER_GONE_S:
                raise ReplicationFailure(
                    f"{dag_id}: Airflow's scheduler unhealthy for {SCHEDULER_GONE_S:.0f}s; see the standalone log"
                )
            runs = [r for r in self.dag_runs(dag_id) if run_type is None or r["run_type"] == run_type]
            failed = [r["dag_run_id"] for r in runs if r["state"] == "failed"]
            if failed:
                raise ReplicationFailure(f"{dag_id} runs failed: {failed}")
            done = [r for r in runs if r["state"] == "success"]
            if len(done) >= count:
                return done
            time.sleep(2)
        raise ReplicationFailure(f"{dag_id}: fewer than {count} successful runs within {timeout:.0f}s")

    def scheduler_healthy(self) -> bool:
        return scheduler_is_healthy(self.call("GET", "/monitor/health"))

    def xcom(self, dag_id: str, run_id: str, task_id: str) -> Any:
        entry = self.call("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value")
        value = entry["value"]
        return json.loads(value) if isinstance(value, str) else value
