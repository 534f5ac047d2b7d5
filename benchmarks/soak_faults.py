"""The soak's faults (:data:`soak.FAULTS` schedules them): what each injects into the clusters or the window's run,
and what it checks once the window it struck has ended.

Each injector takes the clusters and the window's driver pid (0 between windows) and returns once the fault is in
place; :class:`SickTopic`'s outage goes on in a thread of its own and ends by itself.  Like :mod:`soak_io`, nothing
here imports the product's replication code.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka_io import create_topics, load_topic
from shared import Clusters
from soak_io import SOURCE, TARGET, HeaderChain, digests, error_line, parse_report, stable_ends, status_json

from airmirror import names
from airmirror.devtools.commit_cutter import WRITES, CommitCutter, updates
from airmirror.devtools.local_kafka import LocalBroker
from airmirror.devtools.processes import freeze_outside_sqlite_writes
from airmirror.store.schema import batch_ranges

BURST_RECORDS = 1_000_000
"""Records a burst writes into a fault's topic just before the window that injects the fault: enough that the
window's read of them is likely still behind when the fault strikes at its first copied record (a copy of this many
takes several seconds)."""
BURST_RECORD_SIZE = 100
LEASE_TTL_S = 60.0
"""The flow lease's time to live (``airmirror.store.flow_lease``): a driver frozen longer than this has lost it."""
FREEZE_MARGIN_S = 5.0
"""How long after its lease expired the frozen driver's rival starts."""
RIVAL_WINDOW_S = 40
"""The rival live run's ``--for``."""
SOURCE_NODES = 3
"""Nodes of the source cluster: a controller quorum that outlives one node down."""
HEALTHY_NODE, SICK_NODE = 1, 3
"""Every source topic's partitions live on node :data:`HEALTHY_NODE` alone, except :class:`SickTopic`'s, on
:data:`SICK_NODE` alone."""
OUTAGE_S = 300.0
"""How long :data:`SICK_NODE` is down."""
OUTAGE_LOOKS_S = (120.0, 270.0)
"""When, into the outage, ``airmirror status`` is read."""
MAX_LAG_S = 60.0
"""The written topic's lag, in seconds of its producer's rate, that ``status`` may show during the outage."""
COPY_WAIT_S = 120.0
"""How long :meth:`RebornTopic.recreate` waits for the copy into the remote topic to be under way."""
CUT_WAIT_S = 60.0
"""How long :meth:`LostCommits.cut` waits for each kind of commit to come."""


def restart_target(clusters: Clusters, driver: int) -> None:
    """Stop the target cluster's node and start it again with its data (it serves requests when this returns)."""
    clusters.target.restart(timeout=300)


def delete_topic(bootstrap: str, topic: str) -> None:
    """Delete ``topic`` and wait until the cluster no longer lists it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=30)[topic].result()
    deadline = time.monotonic() + 60
    while topic in admin.list_topics(timeout=10).topics:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic} still listed 60 s after its deletion")
        time.sleep(0.5)


@dataclass
class BurstTopic:
    """A source topic of ``partitions`` that the soak writes only in bursts of :data:`BURST_RECORDS` (random values,
    stamped now), each just before a window that injects a fault into it."""

    topic: str
    partitions: int

    def burst(self, clusters: Clusters) -> None:
        """Write a burst into the topic."""
        load_topic(
            clusters.source.bootstrap, self.topic, self.partitions, BURST_RECORDS, BURST_RECORD_SIZE, stamp_now=True
        )


@dataclass
class DoomedTopic(BurstTopic):
    """A source topic deleted while the flow reads it.  :meth:`prepare` writes a burst and keeps the topic's records
    (``held``, per partition); :meth:`delete` deletes it.  Its remote topic must then hold, per partition, a prefix
    of what it held, each record once (:meth:`compare`)."""

    held: dict[int, list[int]] = field(default_factory=dict)
    chain: HeaderChain | None = None
    """The flow's transforms, when the soak runs them (:func:`contents`)."""

    def prepare(self, clusters: Clusters) -> None:
        self.burst(clusters)
        self.held = {p: digests(clusters.source.bootstrap, self.topic, p, self.chain) for p in range(self.partitions)}

    def delete(self, clusters: Clusters, driver: int) -> None:
        delete_topic(clusters.source.bootstrap, self.topic)

    def compare(self, target: str) -> dict[str, Any]:
        """Per partition, whether the remote partition is a prefix of what the source held; the records copied."""
        copied, unequal = 0, []
        for partition, held in self.held.items():
            copy = digests(target, f"{SOURCE}.{self.topic}", partition)
            copied += len(copy)
            if copy != held[: len(copy)]:
                unequal.append(f"{self.topic}-{partition}")
        held_records = sum(len(held) for held in self.held.values())
        return {
            "held": held_records,
            "copied": copied,
            "read_behind_when_deleted": copied < held_records,
            "unequal_partitions": unequal,
            "prefix": not unequal,
        }


@dataclass
class TrimmedTopic(BurstTopic):
    """A source topic whose log start a ``DeleteRecords`` moves past what the flow has read of a burst, as retention
    would: :meth:`prepare` writes the burst, :meth:`trim` deletes every partition's records below the middle of it."""

    middles: dict[int, int] = field(default_factory=dict)

    def prepare(self, clusters: Clusters) -> None:
        admin = AdminClient({"bootstrap.servers": clusters.source.bootstrap})
        before = self.ends(admin)
        self.burst(clusters)
        after = self.ends(admin)
        self.middles = {p: (before[p] + after[p]) // 2 for p in range(self.partitions)}

    def ends(self, admin: AdminClient) -> dict[int, int]:
        request = {TopicPartition(self.topic, p): OffsetSpec.latest() for p in range(self.partitions)}
        return {tp.partition: f.result().offset for tp, f in admin.list_offsets(request, request_timeout=30).items()}

    def trim(self, clusters: Clusters, driver: int) -> None:
        admin = AdminClient({"bootstrap.servers": clusters.source.bootstrap})
        request = [TopicPartition(self.topic, p, offset) for p, offset in self.middles.items()]
        for future in admin.delete_records(request, request_timeout=30).values():
            future.result()


def delete_remote_topic(topic: str) -> Callable[[Clusters, int], None]:
    """A fault that deletes the remote topic of source ``topic`` on the target: airmirror stops the topic (never
    recreating it) and names it in ``status`` and in every run's error until ``airmirror reset``."""

    def inject(clusters: Clusters, driver: int) -> None:
        delete_topic(clusters.target.bootstrap, f"{SOURCE}.{topic}")

    return inject


def delete_anchor_group(clusters: Clusters, driver: int) -> None:
    """Delete the flow's anchor group on the target (``names.anchor_group``): the next run's copy tasks must find
    each partition's progress by scanning the batch log.  Raises ``KafkaException`` if the broker refuses."""
    group = names.anchor_group(SOURCE, TARGET)
    admin = AdminClient({"bootstrap.servers": clusters.target.bootstrap})
    admin.delete_consumer_groups([group], request_timeout=30)[group].result()


@dataclass
class FrozenDriver:
    """The window's driver frozen at the worst moment for its lease: SIGSTOP as soon as its copy tasks wrote their
    first record (they stream on: only the driver stops), for longer than its lease lives; then a rival live run with
    more Spark slots (``rival``, set by the soak) takes the flow over, closing the frozen run's stream and copying
    with more copy tasks than it had; once the rival exited the driver is thawed (SIGCONT).  It must find its lease
    lost, end its tasks and exit 1 saying so, having written nothing after the takeover; :meth:`check` gives the
    rival's exit and error."""

    rival: list[str] = field(default_factory=list)
    sqlite_db: Path | None = None
    """The flow's SQLite metadata DB, when it is one (set by the soak): the driver is then frozen between its writes
    (:func:`~airmirror.devtools.processes.freeze_outside_sqlite_writes`: SQLite cannot break a frozen writer's lock),
    whereas PostgreSQL ends a frozen transaction by itself and the driver is frozen wherever it is."""
    outcome: dict[str, Any] = field(default_factory=dict)

    def freeze(self, clusters: Clusters, driver: int) -> None:
        if self.sqlite_db is None:
            os.kill(driver, signal.SIGSTOP)
        else:
            freeze_outside_sqlite_writes(driver, self.sqlite_db)
        try:
            time.sleep(LEASE_TTL_S + FREEZE_MARGIN_S)
            rival = subprocess.run(self.rival, capture_output=True, text=True)
            report = parse_report(rival.stdout)
            self.outcome = {
                "rival_exit_code": rival.returncode,
                "rival_error": error_line(rival.stderr) if rival.returncode else "",
                "rival_records": report.get("records") if isinstance(report, dict) else None,
            }
        finally:
            os.kill(driver, signal.SIGCONT)

    def check(self, clusters: Clusters) -> dict[str, Any]:
        return self.outcome


@dataclass
class SickTopic:
    """A source topic whose partitions' only replica is on node :data:`SICK_NODE`, down for :data:`OUTAGE_S` (a
    broker down for maintenance).  :meth:`fill` writes ``records`` at the start; :meth:`outage` kills the node and
    returns; a thread of its own reads ``status --json`` at :data:`OUTAGE_LOOKS_S` (``config``, set by the soak),
    starts the node again and writes ``records`` more, which later windows must copy by themselves.  :meth:`result`
    waits for the thread: whether ``status`` named every partition of the topic waiting for a leader each time,
    and the lag of topic ``watched`` (written at ``rate`` records a second) it showed, which must stay under
    :data:`MAX_LAG_S` of records."""

    topic: str
    partitions: int
    watched: str
    records: int = 2_000
    config: Path | None = None
    rate: int = 1
    looks: list[dict[str, Any]] = field(default_factory=list)
    outcome: dict[str, Any] = field(default_factory=dict)
    thread: threading.Thread | None = None

    def fill(self, bootstrap: str, first: int = 0) -> None:
        load_topic(bootstrap, self.topic, self.partitions, self.records, 100, first=first, stamp_now=True)

    def outage(self, clusters: Clusters, driver: int) -> None:
        clusters.source.kill_node(SICK_NODE)
        self.thread = threading.Thread(target=self._outage, args=(clusters.source,), daemon=True)
        self.thread.start()

    def _outage(self, source: LocalBroker) -> None:
        started = time.monotonic()
        try:
            for at in OUTAGE_LOOKS_S:
                time.sleep(max(0.0, started + at - time.monotonic()))
                self.looks.append(self._look())
            time.sleep(max(0.0, started + OUTAGE_S - time.monotonic()))
        finally:
            source.start_node(SICK_NODE, timeout=300)
        self.outcome["down_s"] = round(time.monotonic() - started, 1)
        self.fill(source.bootstrap, first=self.records)

    def _look(self) -> dict[str, Any]:
        """What ``status`` says, now: the topic's partitions waiting for a leader, the watched topic's lag."""
        assert self.config is not None, "the soak sets SickTopic.config"
        status = status_json(self.config)
        waiting = sorted(w["partition"] for w in status.get("waiting_for_leader", []) if w["topic"] == self.topic)
        lag = sum(p["lag"] for p in status.get("partitions", []) if p["topic"] == self.watched)
        return {
            "waiting_partitions": waiting,
            "watched_lag_s": round(lag / self.rate, 1),
            **({"status_error": status["error"]} if "error" in status else {}),
        }

    def result(self) -> dict[str, Any]:
        """The outage's outcome (see the class docstring), once the node is back and the records after it written."""
        if self.thread is None:
            return {"injected": False, "passed": False}
        self.thread.join(OUTAGE_S + 600)
        every = list(range(self.partitions))
        named = bool(self.looks) and all(look["waiting_partitions"] == every for look in self.looks)
        lag_s = max((look["watched_lag_s"] for look in self.looks), default=None)
        lag_ok = lag_s is not None and lag_s < MAX_LAG_S
        back = "down_s" in self.outcome and not self.thread.is_alive()
        return {
            **self.outcome,
            "looks": self.looks,
            "named_waiting": named,
            "max_watched_lag_s": lag_s,
            "passed": named and lag_ok and back,
        }


@dataclass
class RebornTopic(BurstTopic):
    """A source topic whose remote topic is deleted and created again under its name while the flow copies a burst
    into it.  :meth:`prepare` writes the burst; :meth:`recreate` waits until every remote partition's last stable
    offset is above 0 (the copy is under way), then deletes the remote topic and creates it again at once.  airmirror
    must stop the topic and never write the new incarnation: :meth:`check` counts the records a read_committed
    consumer sees there after the window (none)."""

    def prepare(self, clusters: Clusters) -> None:
        self.burst(clusters)

    @property
    def remote(self) -> str:
        return f"{SOURCE}.{self.topic}"

    def recreate(self, clusters: Clusters, driver: int) -> None:
        target = clusters.target.bootstrap
        deadline = time.monotonic() + COPY_WAIT_S
        admin = AdminClient({"bootstrap.servers": target})
        while min(stable_ends(admin, self.remote, self.partitions)) == 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.remote}: no committed record in every partition within {COPY_WAIT_S} s")
            time.sleep(0.2)
        delete_topic(target, self.remote)
        create_topics(target, {self.remote: self.partitions}, {}, node=HEALTHY_NODE)

    def check(self, clusters: Clusters) -> dict[str, Any]:
        written = sum(len(digests(clusters.target.bootstrap, self.remote, p)) for p in range(self.partitions))
        return {"records_in_new_incarnation": written, "never_written": written == 0}


@dataclass
class LostCommits:
    """The metadata DB's connection cut right after commits (PostgreSQL only; ``cutter``, set by the soak, is the
    :class:`~airmirror.devtools.commit_cutter.CommitCutter` the flow reaches it through): :meth:`cut` has the commits
    of the next two stream recordings, then of the next two transactions that write anything, lose their reply, and
    returns once they did or :data:`CUT_WAIT_S` passed for each.  The window must go on and exit 0 (a recording
    reconciles with what the DB holds); :meth:`check` gives what was cut."""

    cutter: CommitCutter | None = None
    patterns: tuple[str, ...] = (updates(batch_ranges.name), WRITES)
    """A stream recording's transaction, then any that writes."""
    per_kind: int = 2
    outcome: dict[str, Any] = field(default_factory=dict)

    def cut(self, clusters: Clusters, driver: int) -> None:
        assert self.cutter is not None, "the soak sets LostCommits.cutter"
        for pattern in self.patterns:
            before = len(self.cutter.cuts)
            self.cutter.arm(pattern, cuts=self.per_kind)
            self.cutter.wait(before + self.per_kind, CUT_WAIT_S)
        self.cutter.arm(cuts=0)
        self.outcome = {
            "cuts": len(self.cutter.cuts),
            "wanted": self.per_kind * len(self.patterns),
            "writes_of_each_cut": [writes(cut.statements) for cut in self.cutter.cuts],
        }

    def check(self, clusters: Clusters) -> dict[str, Any]:
        return {**self.outcome, "passed": self.outcome.get("cuts") == self.outcome.get("wanted")}


def writes(statements: tuple[str, ...]) -> dict[str, int]:
    """How many statements of each kind and table (``INSERT INTO airmirror_offset_syncs``) wrote in a transaction."""
    return dict(Counter(" ".join(s.split()[:3]) for s in statements if re.match(WRITES, s, re.IGNORECASE)))
