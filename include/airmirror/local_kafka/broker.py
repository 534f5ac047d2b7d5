"""Run named single-node Apache Kafka (KRaft) brokers on this machine: start, stop, kill, status.

Everything about broker ``NAME`` lives in ``{home}/kafka/NAME/``:

* ``meta.json``          name, client port, controller port and cluster id (fixed at first start)
* ``server.properties``  broker config, rewritten from ``meta.json`` on every start
* ``log4j2.properties``  WARN-level logging to stdout
* ``server.log``         the JVM's stdout and stderr (appended to, one marker line per start)
* ``broker.pid``         pid of the running JVM, which leads its own process group
* ``data/``              the KRaft metadata log and topic data, formatted once and kept across restarts

A broker counts as running when ``broker.pid`` names a live JVM of this broker (checked through its
command line, so stale pid files and reused pids are harmless).  Start, stop and kill of one broker
are serialised across processes by a lock file.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
from base64 import urlsafe_b64encode
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from airmirror.errors import InputError, ReplicationFailure
from airmirror.local_kafka.jars import exclusive_lock, kafka_classpath

HOST = "127.0.0.1"
BROKER_HEAP = "-Xmx768m"
_NODE_ID = 1
_NAME = re.compile(r"[A-Za-z0-9_-]+")
_LOG_TAIL_LINES = 40
_FORMAT_TIMEOUT_S = 120
_KILL_WAIT_S = 15
_LOG4J2_PROPERTIES = """\
status = warn
shutdownHook = disable
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.target = SYSTEM_OUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
"""
_QUIET_CLIENT_LOG = logging.getLogger("airmirror.local_kafka.probe")
_QUIET_CLIENT_LOG.addHandler(logging.NullHandler())
_QUIET_CLIENT_LOG.propagate = False
# Brokers started by this process, kept so that they are reaped (no zombies) once they exit.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def airmirror_home() -> Path:
    """airmirror's state directory: ``$AIRMIRROR_HOME`` or ``./.airmirror``, absolute, created if missing."""
    home = Path(os.environ.get("AIRMIRROR_HOME") or ".airmirror").expanduser().absolute()
    home.mkdir(parents=True, exist_ok=True)
    return home


@dataclass(frozen=True)
class BrokerStatus:
    """One broker found under a home; ``pid`` is ``None`` when it is not running."""

    name: str
    port: int
    pid: int | None
    running: bool
    bootstrap: str


@dataclass
class LocalBroker:
    """Handle on a running local broker.  ``pid`` is updated by :meth:`restart`."""

    name: str
    port: int
    pid: int
    home: Path

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def data_dir(self) -> Path:
        return _BrokerDir.of(self.home, self.name).data_dir

    @property
    def log_file(self) -> Path:
        return _BrokerDir.of(self.home, self.name).log_file

    def restart(self, timeout: float = 60) -> LocalBroker:
        """Stop the broker (if running) and start it again on the same port, keeping its data."""
        stop_broker(self.name, home=self.home)
        self.pid = start_broker(self.name, self.port, home=self.home, timeout=timeout).pid
        return self

    def stop(self, timeout: float = 30) -> bool:
        """Same as :func:`stop_broker` for this broker."""
        return stop_broker(self.name, home=self.home, timeout=timeout)

    def kill(self) -> None:
        """Same as :func:`kill_broker` for this broker."""
        kill_broker(self.name, home=self.home)


def start_broker(name: str, port: int, *, home: Path | None = None, timeout: float = 60) -> LocalBroker:
    """Start broker ``name`` listening on ``127.0.0.1:port`` and return once it serves requests.

    Idempotent: a broker of that name already running on ``port`` is returned as is.  The first start
    picks a free controller port, formats the storage and records both in ``meta.json``; later starts
    reuse them and keep all data.  ``timeout`` bounds the wait for the broker to answer a metadata
    request (downloading the Kafka jars on the very first use is not counted).

    Raises ``InputError`` for a bad name or port, a port used by another process, or a broker of that
    name running on another port; ``ReplicationFailure`` (with the tail of ``server.log``) when the
    broker exits or does not become ready in time, in which case it is killed.
    """
    _check_name(name)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise InputError(f"invalid broker port {port!r}: expected an integer between 1 and 65535")
    paths = _BrokerDir.of(_resolve_home(home), name)
    paths.root.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(paths.lock_file):
        meta = _load_meta(paths)
        pid = _running_pid(paths)
        if pid is not None and meta is not None:
            if meta.port != port:
                raise InputError(f"broker '{name}' is already running on port {meta.port}, not {port}; stop it first")
            _wait_ready(paths, pid, f"{HOST}:{port}", timeout)
            return LocalBroker(name, port, pid, paths.home)
        if meta is None:
            meta = _Meta(name=name, port=port, controller_port=free_port(avoid=port), cluster_id=_new_cluster_id())
        elif port == meta.controller_port:
            raise InputError(f"port {port} is the controller port of broker '{name}'; choose another port")
        else:
            _require_free(meta.controller_port, f"controller port of broker '{name}'", paths.home)
            meta = replace(meta, port=port)
        _require_free(port, "port", paths.home)
        _save_meta(paths, meta)
        paths.config_file.write_text(_server_properties(paths, meta))
        paths.log4j_file.write_text(_LOG4J2_PROPERTIES)
        classpath = kafka_classpath()
        if not (paths.data_dir / "meta.properties").exists():
            _format_storage(paths, meta, classpath)
        pid = _launch(paths, meta, classpath)
        try:
            _wait_ready(paths, pid, f"{HOST}:{port}", timeout)
        except ReplicationFailure:
            _signal_and_wait(paths, pid, signal.SIGKILL, _KILL_WAIT_S)
            raise
        return LocalBroker(name, port, pid, paths.home)


def stop_broker(name: str, *, home: Path | None = None, timeout: float = 30) -> bool:
    """Stop broker ``name`` gracefully: SIGTERM its process group, SIGKILL if still alive after ``timeout``.

    Returns ``False`` if it was not running (including unknown names).  Removes ``broker.pid``.
    Raises ``InputError`` for a bad name, ``ReplicationFailure`` if the process survives SIGKILL.
    """
    _check_name(name)
    paths = _BrokerDir.of(_resolve_home(home), name)
    if not paths.root.is_dir():
        return False
    with exclusive_lock(paths.lock_file):
        pid = _running_pid(paths)
        if pid is None:
            paths.pid_file.unlink(missing_ok=True)
            return False
        if not _signal_and_wait(paths, pid, signal.SIGTERM, timeout):
            _signal_and_wait(paths, pid, signal.SIGKILL, _KILL_WAIT_S)
        return True


def kill_broker(name: str, *, home: Path | None = None) -> None:
    """SIGKILL broker ``name``'s process group at once (a crash, for fault injection) and wait for it to die.

    Does nothing if it is not running.  Removes ``broker.pid``.  Raises ``InputError`` for a bad name.
    """
    _check_name(name)
    paths = _BrokerDir.of(_resolve_home(home), name)
    if not paths.root.is_dir():
        return
    with exclusive_lock(paths.lock_file):
        pid = _running_pid(paths)
        if pid is not None:
            _signal_and_wait(paths, pid, signal.SIGKILL, _KILL_WAIT_S)
        paths.pid_file.unlink(missing_ok=True)


def broker_status(home: Path | None = None) -> list[BrokerStatus]:
    """Status of every broker ever started under ``home``, sorted by name."""
    home = _resolve_home(home)
    statuses = []
    for meta_file in sorted((home / "kafka").glob("*/meta.json")):
        paths = _BrokerDir.of(home, meta_file.parent.name)
        meta = _load_meta(paths)
        if meta is None:
            continue
        pid = _running_pid(paths)
        statuses.append(BrokerStatus(meta.name, meta.port, pid, pid is not None, f"{HOST}:{meta.port}"))
    return statuses


@dataclass(frozen=True)
class _BrokerDir:
    """The files of one broker (see the module docstring)."""

    home: Path
    root: Path

    @classmethod
    def of(cls, home: Path, name: str) -> _BrokerDir:
        return cls(home, home / "kafka" / name)

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log_file(self) -> Path:
        return self.root / "server.log"

    @property
    def pid_file(self) -> Path:
        return self.root / "broker.pid"

    @property
    def config_file(self) -> Path:
        return self.root / "server.properties"

    @property
    def log4j_file(self) -> Path:
        return self.root / "log4j2.properties"

    @property
    def meta_file(self) -> Path:
        return self.root / "meta.json"

    @property
    def lock_file(self) -> Path:
        return self.root / ".lock"


@dataclass(frozen=True)
class _Meta:
    """Contents of ``meta.json``."""

    name: str
    port: int
    controller_port: int
    cluster_id: str


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InputError(f"invalid broker name {name!r}: use only letters, digits, '_' and '-'")


def _resolve_home(home: Path | None) -> Path:
    return Path(home).absolute() if home is not None else airmirror_home()


def _load_meta(paths: _BrokerDir) -> _Meta | None:
    try:
        return _Meta(**json.loads(paths.meta_file.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as exc:
        raise ReplicationFailure(f"unreadable broker metadata {paths.meta_file}: {exc}") from exc


def _save_meta(paths: _BrokerDir, meta: _Meta) -> None:
    staging = paths.meta_file.with_suffix(".json.tmp")
    staging.write_text(json.dumps(asdict(meta), indent=2) + "\n")
    staging.replace(paths.meta_file)


def _new_cluster_id() -> str:
    """A random Kafka cluster id (22-char base64url UUID), never starting with '-' as Kafka's own ids."""
    while True:
        cluster_id = urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # Like the JVM, allow binding over TIME_WAIT leftovers of a broker that just stopped.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port(avoid: int | None = None) -> int:
    """A port on 127.0.0.1 that nothing listens on now (other than ``avoid``), picked by the kernel."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((HOST, 0))
            port = probe.getsockname()[1]
        if port != avoid:
            return port


def _require_free(port: int, what: str, home: Path) -> None:
    if _port_is_free(port):
        return
    owners = [status.name for status in broker_status(home) if status.running and status.port == port]
    by = f"airmirror broker '{owners[0]}'" if owners else "another process"
    raise InputError(f"{what} {port} is already in use by {by}")


def _server_properties(paths: _BrokerDir, meta: _Meta) -> str:
    settings = {
        "process.roles": "broker,controller",
        "node.id": _NODE_ID,
        "controller.quorum.bootstrap.servers": f"{HOST}:{meta.controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{meta.port},CONTROLLER://{HOST}:{meta.controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{meta.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": paths.data_dir,
        "auto.create.topics.enable": "false",
        "num.partitions": 1,
        "default.replication.factor": 1,
        "min.insync.replicas": 1,
        "offsets.topic.replication.factor": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
        "log.cleaner.backoff.ms": 1000,
        # A broker restarted after a crash may only re-register once its old session expired (default 9 s).
        "broker.session.timeout.ms": 4000,
        "broker.heartbeat.interval.ms": 500,
    }
    return "".join(f"{key}={str(value).replace(chr(92), chr(92) * 2)}\n" for key, value in settings.items())


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise ReplicationFailure("Java ('java') is not on PATH and JAVA_HOME is not set; Kafka needs Java 17+")
    return java


def _jvm_command(paths: _BrokerDir, heap: str, classpath: str, main_class: str, *args: str) -> list[str]:
    return [
        _java(), heap, "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={paths.log4j_file}", "-cp", classpath, main_class, *args,
    ]


def _format_storage(paths: _BrokerDir, meta: _Meta, classpath: str) -> None:
    command = _jvm_command(
        paths, "-Xmx256m", classpath, "kafka.tools.StorageTool",
        "format", "-t", meta.cluster_id, "-c", str(paths.config_file), "--standalone",
    )
    done = subprocess.run(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=_FORMAT_TIMEOUT_S
    )
    if done.returncode != 0:
        tail = "\n".join(done.stdout.splitlines()[-_LOG_TAIL_LINES:])
        raise ReplicationFailure(f"formatting the storage of broker '{meta.name}' failed:\n{tail}")


def _launch(paths: _BrokerDir, meta: _Meta, classpath: str) -> int:
    """Start the JVM in its own session (so its pid is its process group id) and record its pid."""
    command = _jvm_command(paths, BROKER_HEAP, classpath, "kafka.Kafka", str(paths.config_file))
    with open(paths.log_file, "ab") as log:
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        log.write(f"===== airmirror: starting broker '{meta.name}' on {HOST}:{meta.port} at {stamp} =====\n".encode())
        log.flush()
        child = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            cwd=paths.root, start_new_session=True,
        )
    _CHILDREN[child.pid] = child
    paths.pid_file.write_text(f"{child.pid}\n")
    return child.pid


def _has_exited(pid: int) -> bool:
    """True once every thread of ``pid`` is gone, so its sockets are closed (a zombie counts as exited).

    A dying JVM's main thread turns zombie (and its ``cmdline`` empty) while other threads still hold
    its listening sockets, so this waits for the thread group to be empty, not just for the leader.
    """
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is None:
            return False
        del _CHILDREN[pid]
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        threads = os.listdir(f"/proc/{pid}/task")
    except (OSError, IndexError):
        return True
    return state in ("Z", "X") and len(threads) <= 1


def _is_broker_process(paths: _BrokerDir, pid: int) -> bool:
    """True if ``pid`` is this broker's live JVM.

    A JVM started by this process is recognised by its handle until it exits.  Any other pid must have
    a command line naming this broker's ``server.properties`` (which guards against reused pids); that
    command line reads empty for an instant while a JVM starts and while it dies.
    """
    if pid in _CHILDREN:
        return not _has_exited(pid)
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return str(paths.config_file).encode() in cmdline.split(b"\0")


def _running_pid(paths: _BrokerDir) -> int | None:
    try:
        pid = int(paths.pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if _is_broker_process(paths, pid) else None


def _signal_and_wait(paths: _BrokerDir, pid: int, sig: signal.Signals, timeout: float) -> bool:
    """Send ``sig`` to the broker's process group; True once it exited within ``timeout``.

    On exit the pid file is removed.  After SIGKILL, not exiting in time is a ``ReplicationFailure``.
    """
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + timeout
    while not _has_exited(pid):
        if time.monotonic() >= deadline:
            if sig == signal.SIGKILL:
                raise ReplicationFailure(f"broker process {pid} did not exit after SIGKILL")
            return False
        time.sleep(0.1)
    paths.pid_file.unlink(missing_ok=True)
    return True


def _wait_ready(paths: _BrokerDir, pid: int, bootstrap: str, timeout: float) -> None:
    """Return once the broker answers a metadata request; ReplicationFailure if it dies or times out."""
    admin = AdminClient({
        "bootstrap.servers": bootstrap,
        "logger": _QUIET_CLIENT_LOG,
        "reconnect.backoff.ms": 100,
        "reconnect.backoff.max.ms": 500,
    })
    child = _CHILDREN.get(pid)
    deadline = time.monotonic() + timeout
    while True:
        if not _is_broker_process(paths, pid):
            code = f" (exit code {child.returncode})" if child is not None else ""
            raise ReplicationFailure(
                f"broker '{paths.root.name}' exited while starting{code}; "
                f"tail of {paths.log_file}:\n{_log_tail(paths)}"
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ReplicationFailure(
                f"broker '{paths.root.name}' did not serve {bootstrap} within {timeout:g}s; "
                f"tail of {paths.log_file}:\n{_log_tail(paths)}"
            )
        try:
            if admin.list_topics(timeout=min(2.0, remaining)).brokers:
                return
        except KafkaException:
            time.sleep(0.2)


def _log_tail(paths: _BrokerDir) -> str:
    try:
        with open(paths.log_file, "rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - 64 * 1024))
            lines = log.read().decode(errors="replace").splitlines()
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(lines[-_LOG_TAIL_LINES:])
