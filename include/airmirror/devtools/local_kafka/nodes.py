"""One node of a local Kafka cluster as a process: format its storage, launch, recognise, end and await its JVM.

Every JVM is started in a session of its own, so its pid is its process group id and a signal to that group
reaches everything it spawned.  JVMs started by this process are kept in ``_CHILDREN`` until they exit, so
that they are reaped (no zombies).
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Collection, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from airmirror.devtools.local_kafka.class_archive import java_options
from airmirror.errors import ReplicationFailure

HOST = "127.0.0.1"
BROKER_HEAP = "-Xmx768m"
_FORMAT_HEAP = "-Xmx256m"
_LOG_TAIL_LINES = 40
_FORMAT_TIMEOUT_S = 120
_KILL_WAIT_S = 15
_QUIET_CLIENT_LOG = logging.getLogger("airmirror.devtools.local_kafka.probe")
_QUIET_CLIENT_LOG.addHandler(logging.NullHandler())
_QUIET_CLIENT_LOG.propagate = False
_FIRST_PICKED_PORT = 10000
_DEFAULT_EPHEMERAL_START = 32768
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class NodeDir:
    """The files of one node (listed in :mod:`airmirror.devtools.local_kafka.broker`); ``label`` names it in
    messages."""

    root: Path
    node_id: int
    label: str
    log4j_file: Path

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


def free_port(avoid: Collection[int] = ()) -> int:
    """A port on 127.0.0.1 that nothing listens on now (and not one of ``avoid``), below the ephemeral range.

    The kernel gives outgoing connections a source port from the ephemeral range
    (``/proc/sys/net/ipv4/ip_local_port_range``); a listening port picked from that range can be taken by any
    client connection between the pick and the JVM's bind.  Ports below it are never handed out that way, so
    only another listener can race for the port picked here.
    """
    low = _ephemeral_range_start()
    while True:
        port = random.randrange(_FIRST_PICKED_PORT, low)
        if port not in avoid and port_is_free(port):
            return port


def consecutive_free_ports(count: int) -> int:
    """The first of ``count`` consecutive free ports (:func:`free_port`'s range), for a cluster of ``count`` nodes:
    node ``i`` listens on ``port + i - 1``."""
    while True:
        first = free_port()
        if first + count <= 65536 and all(port_is_free(port) for port in range(first + 1, first + count)):
            return first


def _ephemeral_range_start() -> int:
    """The first port of the kernel's ephemeral range (Linux's default 32768 where the file is unreadable)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _DEFAULT_EPHEMERAL_START
    return low if low > _FIRST_PICKED_PORT + 1000 else _DEFAULT_EPHEMERAL_START


def port_is_free(port: int) -> bool:
    """True if a server could listen on ``127.0.0.1:port`` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # Like the JVM, allow binding over TIME_WAIT leftovers of a broker that just stopped.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def format_storage(
    node: NodeDir, classpath: str, cluster_id: str, initial_controllers: str, *, scram_credentials: Sequence[str] = ()
) -> None:
    """Format the node's ``data/`` for cluster ``cluster_id`` with the KRaft voters ``initial_controllers``.

    ``initial_controllers`` is Kafka's ``id@host:port:directory-id,...`` and must be the same for every node
    of a cluster.  ``scram_credentials`` (Kafka's ``MECHANISM=[name=N,password=P]``, the same for every node)
    are written into the metadata log (``--add-scram``), so those SCRAM users exist from the broker's first
    start.  ``ReplicationFailure`` (with the tool's output) if formatting fails.
    """
    scram = [argument for credential in scram_credentials for argument in ("--add-scram", credential)]
    command = _jvm_command(
        node,
        _FORMAT_HEAP,
        classpath,
        "kafka.tools.StorageTool",
        "format",
        "-t",
        cluster_id,
        "-c",
        str(node.config_file),
        "--initial-controllers",
        initial_controllers,
        *scram,
    )
    done = subprocess.run(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=_FORMAT_TIMEOUT_S
    )
    if done.returncode != 0:
        tail = "\n".join(done.stdout.splitlines()[-_LOG_TAIL_LINES:])
        raise ReplicationFailure(f"formatting the storage of {node.label} failed:\n{tail}")


def launch(node: NodeDir, classpath: str, address: str) -> int:
    """Start the node's JVM (serving clients on ``address``) in its own session; record and return its pid."""
    command = _jvm_command(node, BROKER_HEAP, classpath, "kafka.Kafka", str(node.config_file))
    with open(node.log_file, "ab") as log:
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        log.write(f"===== airmirror: starting {node.label} on {address} at {stamp} =====\n".encode())
        log.flush()
        child = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=node.root,
            start_new_session=True,
        )
    _CHILDREN[child.pid] = child
    node.pid_file.write_text(f"{child.pid}\n")
    return child.pid


def running_pid(node: NodeDir) -> int | None:
    """The pid of the node's live JVM, or ``None`` when it is not running."""
    try:
        pid = int(node.pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if _is_node_process(node, pid) else None


def halt(processes: Sequence[tuple[NodeDir, int]], graceful_timeout: float | None) -> None:
    """End the JVMs ``processes`` (node, pid) and wait until they are gone.

    With ``graceful_timeout`` every JVM gets SIGTERM at once and those still alive after it SIGKILL; with
    ``None`` every JVM gets SIGKILL at once (a crash).  ``ReplicationFailure`` if one survives SIGKILL.
    """
    survivors = processes
    if graceful_timeout is not None:
        survivors = _signal_and_wait(processes, signal.SIGTERM, graceful_timeout)
    stuck = _signal_and_wait(survivors, signal.SIGKILL, _KILL_WAIT_S)
    if stuck:
        node, pid = stuck[0]
        raise ReplicationFailure(f"{node.label} (process {pid}) did not exit after SIGKILL")


def wait_ready(
    node: NodeDir,
    pid: int,
    bootstrap: str,
    deadline: float,
    timeout: float,
    client_config: Mapping[str, str] | None = None,
) -> None:
    """Return once the node answers a metadata request at ``bootstrap`` that lists it as an active broker.

    ``client_config`` adds the settings a client needs to connect (security protocol, SASL login, CA).
    ``ReplicationFailure`` with the tail of ``server.log`` if the JVM ``pid`` exits first or the
    monotonic clock passes ``deadline`` (``timeout`` seconds after the start, for the message).
    """
    admin = AdminClient(
        {
            **(client_config or {}),
            "bootstrap.servers": bootstrap,
            # confluent-kafka's AdminClient annotates its config values as str | int | float | bool, but its
            # "logger" (like "error_cb") takes a Python object
            "logger": _QUIET_CLIENT_LOG,  # type: ignore[dict-item]
            "reconnect.backoff.ms": 100,
            "reconnect.backoff.max.ms": 500,
        }
    )
    child = _CHILDREN.get(pid)
    while True:
        if not _is_node_process(node, pid):
            code = f" (exit code {child.returncode})" if child is not None else ""
            raise ReplicationFailure(
                f"{node.label} exited while starting{code}; tail of {node.log_file}:\n{_log_tail(node)}"
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ReplicationFailure(
                f"{node.label} did not serve {bootstrap} within {timeout:g}s; "
                f"tail of {node.log_file}:\n{_log_tail(node)}"
            )
        with suppress(KafkaException):
            if node.node_id in admin.list_topics(timeout=min(2.0, remaining)).brokers:
                return
        time.sleep(0.2)


def java_executable() -> str:
    """The ``java`` local nodes run: ``$JAVA_HOME/bin/java``, else the first on ``PATH``."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise ReplicationFailure("Java ('java') is not on PATH and JAVA_HOME is not set; Kafka needs Java 17+")
    return java


def _jvm_command(node: NodeDir, heap: str, classpath: str, main_class: str, *args: str) -> list[str]:
    java = java_executable()
    return [
        java,
        heap,
        *java_options(java, classpath),
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={node.log4j_file}",
        "-cp",
        classpath,
        main_class,
        *args,
    ]


def _signal_and_wait(
    processes: Sequence[tuple[NodeDir, int]], sig: signal.Signals, timeout: float
) -> list[tuple[NodeDir, int]]:
    """Send ``sig`` to every process group of ``processes``; return those that did not exit within ``timeout``."""
    for _, pid in processes:
        with suppress(ProcessLookupError):
            os.killpg(pid, sig)
    deadline = time.monotonic() + timeout
    return [(node, pid) for node, pid in processes if not _exits_by(pid, deadline)]


def _exits_by(pid: int, deadline: float) -> bool:
    while not _has_exited(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


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


def _is_node_process(node: NodeDir, pid: int) -> bool:
    """True if ``pid`` is this node's live JVM.

    A JVM started by this process is recognised by its handle until it exits.  Any other pid must have
    a command line naming this node's ``server.properties`` (which guards against reused pids); that
    command line reads empty for an instant while a JVM starts and while it dies.
    """
    if pid in _CHILDREN:
        return not _has_exited(pid)
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return str(node.config_file).encode() in cmdline.split(b"\0")


def _log_tail(node: NodeDir) -> str:
    try:
        with open(node.log_file, "rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - 64 * 1024))
            lines = log.read().decode(errors="replace").splitlines()
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(lines[-_LOG_TAIL_LINES:])
