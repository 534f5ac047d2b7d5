"""Run named local Apache Kafka (KRaft) clusters on this machine: start, stop, kill, status.

Cluster ``NAME`` has ``N`` nodes (one unless asked otherwise).  Node ``i`` (``1 <= i <= N``) is a combined
broker and controller with node id ``i``, client port ``PORT + i - 1`` and a controller port of its own; all
nodes are controller quorum voters, so a cluster of three keeps working when any one node is down.
Everything about the cluster lives in ``{home}/kafka/NAME/``:

* ``meta.json``          name, first client port, controller ports, cluster id and security settings with
                         their generated passwords (all fixed at first start) and the extra broker settings
                         of the last start
* ``log4j2.properties``  WARN-level logging to stdout
* ``tls/``               the cluster's CA and broker certificate, with SSL or SASL_SSL (see ``tls.py``)
* per node, in ``node-i/`` (a single node uses ``NAME/`` itself):

  * ``server.properties``  the node's config, rewritten from ``meta.json`` whenever the node starts
  * ``server.log``         the JVM's stdout and stderr (appended to, one marker line per start)
  * ``broker.pid``         pid of the running JVM, which leads its own process group
  * ``data/``              the KRaft metadata log and topic data, formatted once and kept across restarts

A node counts as running when its ``broker.pid`` names a live JVM of that node (checked through its
command line, so stale pid files and reused pids are harmless).  Starting, stopping and killing a cluster
or one of its nodes are serialised across processes by a lock file.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import uuid
from base64 import urlsafe_b64encode
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from airmirror.devtools.local_kafka.jars import exclusive_lock, kafka_classpath
from airmirror.devtools.local_kafka.nodes import (
    HOST,
    NodeDir,
    format_storage,
    free_port,
    halt,
    launch,
    port_is_free,
    running_pid,
    wait_ready,
)
from airmirror.devtools.local_kafka.security import (
    MANAGED_KEYS as SECURITY_KEYS,
)
from airmirror.devtools.local_kafka.security import (
    MANAGED_PREFIX as SECURITY_PREFIX,
)
from airmirror.devtools.local_kafka.security import (
    PLAINTEXT,
    BrokerSecurity,
    SecurityRecord,
    User,
    checked_security,
)
from airmirror.errors import InputError, ReplicationFailure

# Internal topics (consumer offsets, transaction state) get this many replicas, or one per node if fewer.
_MAX_INTERNAL_REPLICAS = 3
PORT_RELEASE_WAIT_S = 15.0
"""How long a node's start waits for a port that something other than an airmirror broker holds (see
:func:`_require_free`)."""
_NAME = re.compile(r"[A-Za-z0-9_-]+")
_CONFIG_KEY = re.compile(r"[A-Za-z0-9._-]+")
# Settings derived from meta.json for each node, which --broker-config may not override.
_MANAGED_KEYS = frozenset(
    {
        "process.roles",
        "node.id",
        "broker.id",
        "controller.quorum.bootstrap.servers",
        "controller.quorum.voters",
        "listeners",
        "advertised.listeners",
        "controller.listener.names",
        "inter.broker.listener.name",
        "listener.security.protocol.map",
        "log.dirs",
        "log.dir",
        "metadata.log.dir",
    }
)
_PROPERTIES_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r"})
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


def airmirror_home() -> Path:
    """airmirror's state directory: ``$AIRMIRROR_HOME`` or ``./.airmirror``, absolute, created if missing."""
    home = Path(os.environ.get("AIRMIRROR_HOME") or ".airmirror").expanduser().absolute()
    home.mkdir(parents=True, exist_ok=True)
    return home


@dataclass(frozen=True)
class NodeStatus:
    """One node of a local cluster; ``pid`` is ``None`` when it is not running."""

    node_id: int
    port: int
    controller_port: int
    pid: int | None

    @property
    def running(self) -> bool:
        return self.pid is not None

    @property
    def bootstrap(self) -> str:
        return _address(self.port)


@dataclass(frozen=True)
class BrokerStatus:
    """One local cluster found under a home, with its nodes in node id order and its client protocol."""

    name: str
    nodes: tuple[NodeStatus, ...]
    protocol: str = PLAINTEXT

    @property
    def port(self) -> int:
        """The client port of node 1 (node ``i`` listens on ``port + i - 1``)."""
        return self.nodes[0].port

    @property
    def running(self) -> bool:
        """True when every node runs."""
        return all(node.running for node in self.nodes)

    @property
    def bootstrap(self) -> str:
        """Every node's client address, comma-separated."""
        return ",".join(node.bootstrap for node in self.nodes)


@dataclass(frozen=True)
class LocalBroker:
    """Handle on local cluster ``name``: node ids ``1..brokers`` on client ports ``port..port+brokers-1``.

    ``broker_config`` holds the extra broker settings it was started with; :meth:`restart` uses them again.
    ``security`` is how clients connect (protocol, SASL users, TLS files and passwords; see :meth:`client_config`).
    """

    name: str
    port: int
    home: Path
    brokers: int = 1
    broker_config: Mapping[str, str] = field(default_factory=dict)
    security: BrokerSecurity = field(default_factory=BrokerSecurity)

    @property
    def node_ids(self) -> range:
        return range(1, self.brokers + 1)

    @property
    def bootstrap(self) -> str:
        """Every node's client address, comma-separated (the only one for a single node)."""
        return _addresses(range(self.port, self.port + self.brokers))

    def client_config(self, user: str | User | None = None) -> dict[str, str]:
        """confluent-kafka settings reaching this cluster as SASL ``user`` (name or :class:`User`; the first of
        ``security.users`` if ``None``): ``bootstrap.servers`` plus :meth:`BrokerSecurity.librdkafka_config`."""
        return {"bootstrap.servers": self.bootstrap, **self.security.librdkafka_config(user)}

    def status(self) -> BrokerStatus:
        """The cluster's current state, node by node.  ``ReplicationFailure`` if its ``meta.json`` is gone."""
        cluster = _ClusterDir.of(self.home, self.name)
        return _status(cluster, _require_meta(cluster))

    def restart(self, timeout: float = 60) -> LocalBroker:
        """Stop every node (if running) and start the cluster again with this handle's settings, keeping its data."""
        stop_broker(self.name, home=self.home)
        start_broker(
            self.name,
            self.port,
            brokers=self.brokers,
            broker_config=self.broker_config,
            security=self.security.protocol,
            sasl_mechanism=self.security.sasl_mechanism,
            users=self.security.users,
            authorizer=self.security.authorizer,
            super_users=self.security.super_users,
            home=self.home,
            timeout=timeout,
        )
        return self

    def stop(self, timeout: float = 30) -> bool:
        """Same as :func:`stop_broker` for this cluster."""
        return stop_broker(self.name, home=self.home, timeout=timeout)

    def kill(self) -> None:
        """Same as :func:`kill_broker` for this cluster."""
        kill_broker(self.name, home=self.home)

    def kill_node(self, node_id: int) -> None:
        """SIGKILL node ``node_id`` alone (a crash, for fault injection) and wait for it to die.

        Does nothing if it is not running.  ``InputError`` if the cluster has no such node.
        """
        cluster = self._cluster_of_node(node_id)
        with exclusive_lock(cluster.lock_file):
            _halt_nodes(cluster, _require_meta(cluster), [node_id], None)

    def start_node(self, node_id: int, timeout: float = 60) -> None:
        """Start node ``node_id`` again, keeping its data, with the settings recorded in ``meta.json``.

        Returns once it is an active broker of the cluster again (at once if it is running).  Errors as
        for :func:`start_broker`; ``InputError`` also if the cluster has no such node.
        """
        cluster = self._cluster_of_node(node_id)
        with exclusive_lock(cluster.lock_file):
            _start_nodes(cluster, _require_meta(cluster), [node_id], timeout)

    def freeze_node(self, node_id: int) -> None:
        """SIGSTOP node ``node_id`` (a frozen VM: its sockets stay open and it answers nothing, until the
        controllers fence it); :meth:`thaw_node` resumes it.  ``InputError`` if the cluster has no such node or it
        is not running."""
        os.kill(self._node_pid(node_id), signal.SIGSTOP)

    def thaw_node(self, node_id: int) -> None:
        """SIGCONT node ``node_id``: it goes on where it stopped and registers with the controllers again.  Errors as
        for :meth:`freeze_node`."""
        os.kill(self._node_pid(node_id), signal.SIGCONT)

    def _node_pid(self, node_id: int) -> int:
        cluster = self._cluster_of_node(node_id)
        pid = running_pid(cluster.node(node_id, _require_meta(cluster).brokers))
        if pid is None:
            raise InputError(f"node {node_id} of broker '{self.name}' is not running")
        return pid

    def _cluster_of_node(self, node_id: int) -> _ClusterDir:
        if node_id not in self.node_ids:
            raise InputError(f"broker '{self.name}' has no node {node_id!r}; its node ids are 1 to {self.brokers}")
        return _ClusterDir.of(self.home, self.name)


def start_broker(
    name: str,
    port: int,
    *,
    brokers: int = 1,
    broker_config: Mapping[str, str] | None = None,
    security: str = PLAINTEXT,
    sasl_mechanism: str | None = None,
    users: Sequence[str | tuple[str, str] | User] | None = None,
    authorizer: bool = False,
    super_users: Sequence[str] | None = None,
    home: Path | None = None,
    timeout: float = 60,
) -> LocalBroker:
    """Start cluster ``name`` of ``brokers`` nodes on client ports ``port..port+brokers-1`` of 127.0.0.1.

    Returns once every node serves requests as an active broker.  ``broker_config`` settings go into every
    node's ``server.properties`` after (so over) airmirror's defaults.  Idempotent: nodes already running
    are kept, stopped ones are started.  The first start picks free controller ports, generates the security
    passwords and TLS files, formats the storage (with the SCRAM users) and records all of it in ``meta.json``;
    later starts reuse them and keep all data.  ``timeout`` bounds the wait for the nodes (downloading the
    Kafka jars on the very first use is not counted).

    ``security`` is the client listener's protocol (PLAINTEXT, SASL_PLAINTEXT, SSL or SASL_SSL); with SASL,
    ``sasl_mechanism`` (PLAIN or SCRAM-SHA-512, the default) and ``users`` (``NAME:PASSWORD`` strings,
    ``(name, password)`` pairs or :class:`User`; one default user if none): see
    :mod:`~airmirror.devtools.local_kafka.security`.  ``authorizer`` turns on ACLs (SASL only), with the
    brokers' user and ``super_users`` (names among ``users``) as super users.  The handle's ``security`` holds
    what clients need.

    Raises ``InputError`` for a bad name, port, node count, setting or security setting (naming its flag), a
    port used by another process, a cluster created with another number of nodes or other security settings,
    or one running on another port or with other settings; ``ReplicationFailure`` (with the tail of
    ``server.log``) when a node exits or does not become ready in time, in which case the nodes started by
    this call are killed.
    """
    _check_name(name)
    _check_ports(port, brokers)
    settings = _checked_broker_config(broker_config or {})
    wanted = checked_security(security, sasl_mechanism, users, authorizer, super_users)
    cluster = _ClusterDir.of(_resolve_home(home), name)
    cluster.root.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(cluster.lock_file):
        meta = _meta_for_start(cluster, port, brokers, settings, wanted)
        _start_nodes(cluster, meta, meta.node_ids, timeout)
    return LocalBroker(name, port, cluster.home, brokers, settings, meta.security.security(cluster.root))


def stop_broker(name: str, *, home: Path | None = None, timeout: float = 30) -> bool:
    """Stop every node of cluster ``name`` at once: SIGTERM, then SIGKILL to those alive after ``timeout``.

    Returns ``False`` if no node was running (including unknown names).  Removes the ``broker.pid`` files.
    Raises ``InputError`` for a bad name, ``ReplicationFailure`` if a process survives SIGKILL.
    """
    return _halt_cluster(name, home, timeout)


def kill_broker(name: str, *, home: Path | None = None) -> None:
    """SIGKILL every node of cluster ``name`` at once (a crash, for fault injection) and wait for them to die.

    Does nothing if none is running.  Removes the ``broker.pid`` files.  Raises ``InputError`` for a bad name.
    """
    _halt_cluster(name, home, None)


def broker_status(home: Path | None = None) -> list[BrokerStatus]:
    """Status of every cluster ever started under ``home``, sorted by name."""
    home = _resolve_home(home)
    statuses = []
    for meta_file in sorted((home / "kafka").glob("*/meta.json")):
        cluster = _ClusterDir.of(home, meta_file.parent.name)
        meta = _load_meta(cluster)
        if meta is not None:
            statuses.append(_status(cluster, meta))
    return statuses


@dataclass(frozen=True)
class _ClusterDir:
    """The files of one cluster (see the module docstring)."""

    home: Path
    root: Path

    @classmethod
    def of(cls, home: Path, name: str) -> _ClusterDir:
        return cls(home, home / "kafka" / name)

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def meta_file(self) -> Path:
        return self.root / "meta.json"

    @property
    def lock_file(self) -> Path:
        return self.root / ".lock"

    @property
    def log4j_file(self) -> Path:
        return self.root / "log4j2.properties"

    def node(self, node_id: int, brokers: int) -> NodeDir:
        """The files of node ``node_id`` of this cluster of ``brokers`` nodes."""
        if brokers == 1:
            return NodeDir(self.root, node_id, f"broker '{self.name}'", self.log4j_file)
        label = f"node {node_id} of broker '{self.name}'"
        return NodeDir(self.root / f"node-{node_id}", node_id, label, self.log4j_file)


@dataclass(frozen=True)
class _Meta:
    """Contents of ``meta.json``; node ``i`` has client port ``port + i - 1`` and ``controller_ports[i - 1]``."""

    name: str
    port: int
    controller_ports: tuple[int, ...]
    cluster_id: str
    broker_config: dict[str, str] = field(default_factory=dict)
    security: SecurityRecord = field(default_factory=SecurityRecord)

    @property
    def brokers(self) -> int:
        return len(self.controller_ports)

    @property
    def node_ids(self) -> range:
        return range(1, self.brokers + 1)

    @property
    def client_ports(self) -> range:
        return range(self.port, self.port + self.brokers)

    def client_port(self, node_id: int) -> int:
        return self.port + node_id - 1

    def controller_port(self, node_id: int) -> int:
        return self.controller_ports[node_id - 1]


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InputError(f"invalid broker name {name!r}: use only letters, digits, '_' and '-'")


def _check_ports(port: int, brokers: int) -> None:
    if isinstance(brokers, bool) or not isinstance(brokers, int) or brokers < 1:
        raise InputError(f"invalid --brokers {brokers!r}: expected a positive integer")
    last = 65536 - brokers
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port <= last:
        nodes = f" (its {brokers} nodes use ports PORT to PORT+{brokers - 1})" if brokers > 1 else ""
        raise InputError(f"invalid broker port {port!r}: expected an integer between 1 and {last}{nodes}")


def _checked_broker_config(config: Mapping[str, str]) -> dict[str, str]:
    """``config`` as plain strings; ``InputError`` naming ``--broker-config`` for a bad or managed key."""
    settings = {}
    for key, value in config.items():
        if not isinstance(key, str) or not _CONFIG_KEY.fullmatch(key):
            raise InputError(f"invalid --broker-config key {key!r}: use only letters, digits, '.', '_' and '-'")
        if key in _MANAGED_KEYS:
            raise InputError(f"--broker-config {key} is not allowed: airmirror sets it for each node")
        if key in SECURITY_KEYS or key.startswith(SECURITY_PREFIX):
            raise InputError(
                f"--broker-config {key} is not allowed: airmirror sets the listener's security "
                "(see --security, --sasl-mechanism, --user and --authorizer)"
            )
        settings[key] = str(value)
    return settings


def _resolve_home(home: Path | None) -> Path:
    return Path(home).absolute() if home is not None else airmirror_home()


def _meta_for_start(
    cluster: _ClusterDir, port: int, brokers: int, settings: dict[str, str], security: BrokerSecurity
) -> _Meta:
    """The ``meta.json`` to start the cluster with: new, or the recorded one moved to ``port`` with ``settings``.

    ``InputError`` if the recorded cluster has another number of nodes or other security settings, runs with
    another port or other settings, or if ``port`` would put a node's client port on one of its controller ports.
    """
    recorded = _load_meta(cluster)
    if recorded is None:
        controller_ports = _free_ports(brokers, avoid=range(port, port + brokers))
        return _Meta(cluster.name, port, controller_ports, _new_cluster_id(), settings, SecurityRecord.new(security))
    if recorded.brokers != brokers:
        raise InputError(
            f"broker '{cluster.name}' was created with --brokers {recorded.brokers}, not {brokers}; "
            f"delete {cluster.root} to create it again"
        )
    _require_same_security(cluster, recorded.security.settings, security.settings())
    if any(node.running for node in _status(cluster, recorded).nodes):
        if port != recorded.port:
            raise InputError(
                f"broker '{cluster.name}' is already running on port {recorded.port}, not {port}; stop it first"
            )
        if settings != recorded.broker_config:
            raise InputError(f"broker '{cluster.name}' is running with other --broker-config settings; stop it first")
    meta = replace(recorded, port=port, broker_config=settings)
    clash = sorted(set(meta.client_ports) & set(meta.controller_ports))
    if clash:
        raise InputError(f"port {clash[0]} is a controller port of broker '{cluster.name}'; choose another port")
    return meta


def _require_same_security(cluster: _ClusterDir, recorded: BrokerSecurity, wanted: BrokerSecurity) -> None:
    """``InputError`` unless ``wanted`` equals the security settings the cluster was created with."""
    if wanted == recorded:
        return
    created, asked = recorded.describe(), wanted.describe()
    if created == asked:
        created, asked = f"other --user passwords ({created})", "these"
    raise InputError(
        f"broker '{cluster.name}' was created with {created}, not {asked}; delete {cluster.root} to create it again"
    )


def _start_nodes(cluster: _ClusterDir, meta: _Meta, node_ids: Iterable[int], timeout: float) -> None:
    """Save ``meta``, start those of ``node_ids`` not running and wait until all of them are active brokers.

    ``InputError`` (before anything changes) if a port of a node to start is taken; on ``ReplicationFailure``
    the nodes started here are killed again.
    """
    nodes = [cluster.node(node_id, meta.brokers) for node_id in node_ids]
    running = {node.node_id: running_pid(node) for node in nodes}
    pids = {node_id: pid for node_id, pid in running.items() if pid is not None}
    stopped = [node for node in nodes if node.node_id not in pids]
    for node in stopped:
        _require_free(meta.client_port(node.node_id), "port", cluster.home)
        _require_free(meta.controller_port(node.node_id), f"controller port of broker '{meta.name}'", cluster.home)
    _save_meta(cluster, meta)
    if stopped:
        pids.update(_launch_nodes(cluster, meta, stopped))
    deadline = time.monotonic() + timeout
    probe = meta.security.probe_config(cluster.root)
    try:
        for node in nodes:
            address = _address(meta.client_port(node.node_id))
            wait_ready(node, pids[node.node_id], address, deadline, timeout, client_config=probe)
    except ReplicationFailure:
        _halt_nodes(cluster, meta, [node.node_id for node in stopped], None)
        raise


def _launch_nodes(cluster: _ClusterDir, meta: _Meta, nodes: list[NodeDir]) -> dict[int, int]:
    """Write the config of ``nodes``, format those never formatted, then launch them all; node id -> pid."""
    cluster.log4j_file.write_text(_LOG4J2_PROPERTIES)
    tls = meta.security.tls_material(cluster.root)
    if tls is not None:
        tls.ensure(meta.name)
    classpath = kafka_classpath()
    for node in nodes:
        node.root.mkdir(exist_ok=True)
        node.config_file.write_text(_server_properties(meta, node, cluster.root))
        if not (node.data_dir / "meta.properties").exists():
            format_storage(
                node,
                classpath,
                meta.cluster_id,
                _initial_controllers(meta),
                scram_credentials=meta.security.scram_credentials(),
            )
    return {node.node_id: launch(node, classpath, _address(meta.client_port(node.node_id))) for node in nodes}


def _halt_cluster(name: str, home: Path | None, graceful_timeout: float | None) -> bool:
    """End every node of cluster ``name`` (see :func:`halt`); False if none was running or the name is unknown."""
    _check_name(name)
    cluster = _ClusterDir.of(_resolve_home(home), name)
    if not cluster.root.is_dir():
        return False
    with exclusive_lock(cluster.lock_file):
        meta = _load_meta(cluster)
        return meta is not None and _halt_nodes(cluster, meta, meta.node_ids, graceful_timeout)


def _halt_nodes(cluster: _ClusterDir, meta: _Meta, node_ids: Iterable[int], graceful_timeout: float | None) -> bool:
    """End the running ones of ``node_ids`` (see :func:`halt`), remove their pid files; True if one was running."""
    nodes = [cluster.node(node_id, meta.brokers) for node_id in node_ids]
    running = [(node, pid) for node in nodes if (pid := running_pid(node)) is not None]
    halt(running, graceful_timeout)
    for node in nodes:
        node.pid_file.unlink(missing_ok=True)
    return bool(running)


def _status(cluster: _ClusterDir, meta: _Meta) -> BrokerStatus:
    nodes = tuple(
        NodeStatus(
            node_id,
            meta.client_port(node_id),
            meta.controller_port(node_id),
            running_pid(cluster.node(node_id, meta.brokers)),
        )
        for node_id in meta.node_ids
    )
    return BrokerStatus(meta.name, nodes, meta.security.settings.protocol)


def _load_meta(cluster: _ClusterDir) -> _Meta | None:
    try:
        raw = json.loads(cluster.meta_file.read_text())
        if "controller_port" in raw:  # written for a single node, before clusters of several nodes
            raw["controller_ports"] = [raw.pop("controller_port")]
        security = SecurityRecord.from_json(raw.pop("security", None))  # absent: written before security
        return _Meta(**{**raw, "controller_ports": tuple(raw["controller_ports"]), "security": security})
    except FileNotFoundError:
        return None
    except (ValueError, TypeError, KeyError) as exc:
        raise ReplicationFailure(f"unreadable broker metadata {cluster.meta_file}: {exc}") from exc


def _require_meta(cluster: _ClusterDir) -> _Meta:
    meta = _load_meta(cluster)
    if meta is None:
        raise ReplicationFailure(f"broker '{cluster.name}' has no {cluster.meta_file}; start it first")
    return meta


def _save_meta(cluster: _ClusterDir, meta: _Meta) -> None:
    staging = cluster.meta_file.with_suffix(".json.tmp")
    staging.write_text(json.dumps({**asdict(meta), "security": meta.security.to_json()}, indent=2) + "\n")
    staging.replace(cluster.meta_file)


def _uuid_text(value: uuid.UUID) -> str:
    """Kafka's text form of a UUID (22-char base64url)."""
    return urlsafe_b64encode(value.bytes).decode().rstrip("=")


def _new_cluster_id() -> str:
    """A random Kafka cluster id, never starting with '-' (as Kafka's own ids, so it can follow a flag)."""
    while True:
        cluster_id = _uuid_text(uuid.uuid4())
        if not cluster_id.startswith("-"):
            return cluster_id


def _initial_controllers(meta: _Meta) -> str:
    """Kafka's ``--initial-controllers`` for every node; directory ids derive from the cluster id and node id."""
    return ",".join(
        f"{node_id}@{_address(meta.controller_port(node_id))}:"
        f"{_uuid_text(uuid.uuid5(uuid.NAMESPACE_URL, f'airmirror:{meta.cluster_id}:{node_id}'))}"
        for node_id in meta.node_ids
    )


def _address(port: int) -> str:
    return f"{HOST}:{port}"


def _addresses(ports: Iterable[int]) -> str:
    return ",".join(_address(port) for port in ports)


def _free_ports(count: int, avoid: Collection[int]) -> tuple[int, ...]:
    """``count`` distinct free ports, none in ``avoid``."""
    picked: list[int] = []
    for _ in range(count):
        picked.append(free_port(avoid={*avoid, *picked}))
    return tuple(picked)


def _require_free(port: int, what: str, home: Path) -> None:
    """Return once ``port`` is free; ``InputError`` at once if a running airmirror broker holds it, and after
    :data:`PORT_RELEASE_WAIT_S` if something else still does (the sockets of a node killed a moment ago linger in
    the kernel for a few seconds: its restart waits them out)."""
    deadline = time.monotonic() + PORT_RELEASE_WAIT_S
    while not port_is_free(port):
        owners = [
            status.name
            for status in broker_status(home)
            for node in status.nodes
            if node.running and port in (node.port, node.controller_port)
        ]
        if owners or time.monotonic() >= deadline:
            by = f"airmirror broker '{owners[0]}'" if owners else "another process"
            raise InputError(f"{what} {port} is already in use by {by}")
        time.sleep(0.2)


def _server_properties(meta: _Meta, node: NodeDir, cluster_root: Path) -> str:
    """The node's ``server.properties``: airmirror's settings (listeners and their security from
    ``meta.security``, TLS files under ``cluster_root``), then ``meta.broker_config`` over them."""
    client = _address(meta.client_port(node.node_id))
    controller = _address(meta.controller_port(node.node_id))
    replicas = min(meta.brokers, _MAX_INTERNAL_REPLICAS)
    settings = {
        "process.roles": "broker,controller",
        "node.id": node.node_id,
        "controller.quorum.bootstrap.servers": _addresses(meta.controller_ports),
        **meta.security.listener_properties(client, controller, cluster_root),
        "log.dirs": node.data_dir,
        "auto.create.topics.enable": "false",
        "num.partitions": 1,
        "default.replication.factor": 1,
        "min.insync.replicas": 1,
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": max(1, replicas - 1),
        "group.initial.rebalance.delay.ms": 0,
        "log.cleaner.backoff.ms": 1000,
        # A node restarted after a crash may only re-register once its old session expired (default 9 s).
        "broker.session.timeout.ms": 4000,
        "broker.heartbeat.interval.ms": 1000,
        # The controller appends a no-op record to the metadata log this often when idle (default 500 ms). With
        # the heartbeats above, an idle node takes 3.4% of a core instead of 4.9% (measured on the 2-core VM):
        # a machine that runs several local clusters for weeks or for a test suite keeps the difference.
        "metadata.max.idle.interval.ms": 10000,
        **meta.broker_config,
    }
    return "".join(f"{key}={str(value).translate(_PROPERTIES_ESCAPES)}\n" for key, value in settings.items())
