"""Soak: do live runs, back to back, stay flat?  ``make soak`` (not part of ``make test``; ``SOAK_ARGS`` passes flags).

A live DAG run is one process that streams for its window and exits; the next run is a new process that continues
where it stopped.  The soak runs such windows back to back, each
``airmirror replicate CONFIG --flow src->tgt --continuous --for WINDOW --json`` as a process of its own, and checks
that nothing a window leaves behind (in the metadata DB, in the batch log, on the clusters) makes later windows
slower or bigger.  On one machine, in a fresh temporary home:

1. **Clusters and topics.**  Two local Kafka clusters (the tests' brokers, checking retention every 30 s): the
   source of three nodes (:data:`~soak_faults.SOURCE_NODES`, so that its controller quorum outlives one node down),
   the target of one.  Every source topic's partitions live on node 1 alone, but ``soak-sick``'s.  On the source,
   topic ``soak`` of ``--partitions`` partitions and topic ``soak-idle`` of ``--idle-partitions`` partitions that
   nothing ever writes (none when 0), both with ``retention.ms`` at
   ``--topic-retention`` and segments of a tenth of it; the flow selects both (``topics = soak, soak-idle``) and
   airmirror gives the remote topics the same retention.  ``airmirror.metadata.retention`` is ``--retention``, so
   that the metadata DB reaches its steady state within the run (exact offset-sync runs leave it only once Kafka
   deleted their records on both clusters: under Kafka's default 7 days the DB grows for 7 days, then stays flat
   the same way).  With faults, five more topics the faults use (:data:`FAULT_TOPICS`, same settings):
   ``soak-doomed`` (4 partitions), ``soak-trimmed`` (2) and ``soak-reborn`` (2), written only in bursts of 1,000,000
   records just before the window whose fault strikes them, ``soak-spare`` (2), given 2,000 records at the start,
   and ``soak-sick`` (2, on node 3 alone), given 2,000 records at the start and 2,000 once its node is back.  The
   offset-syncs topic airmirror writes on the source has three replicas, as a cluster in service gives it.  The
   metadata DB is a SQLite file in the home or, with ``--postgresql``, a database of a local PostgreSQL server
   (:mod:`airmirror.devtools.local_postgres`) that airmirror reaches through a
   :class:`~airmirror.devtools.commit_cutter.CommitCutter`, which can lose the reply to a commit.
2. **Load.**  A producer writes ``--rate`` records a second in total, round-robin over ``soak``'s partitions
   (``--record-size``-byte values, keyed, stamped now; every delivery report checked), from before the first
   window to the end of the last.
   With ``--transforms`` the flow copies through the bench's header chain (``json_data.HEADER_CHAIN``: a ``Filter``
   on a header, ``DropHeaders``, ``InsertHeader``), and the producer gives every record the headers it acts on
   (every tenth record the marker the filter drops).
3. **Windows.**  A window starts once the previous window's whole process group has exited, as long as less than
   ``--minutes`` have passed since the first window started; each runs for ``--window``.  Each window's row:

   - ``start_min``: minutes from the first window's start to this window's;
   - ``exit_code`` (0 required), and ``records`` and ``retries`` from the process's JSON report;
   - ``first_record_s``: seconds from starting the process to its first copied record, measured from outside:
     every 0.2 s the soak sums the high watermarks (read_uncommitted, so written records count before their
     transaction commits) of every partition of both remote topics, and notes the first poll above the sum taken
     just before the process started.  A transaction marker moves a high watermark too; a window that ended
     cleanly leaves no transaction open, so the next one sees no marker before its first chunk;
   - ``rss_mb``, ``threads``, ``fds``: the peaks of the process tree's summed RSS, threads and open descriptors
     (CLI, Spark JVM, Python workers), sampled when the process starts and every ``--sample-seconds``;
   - ``db_kb``: the metadata DB's size on disk (SQLite file and its WAL, or ``pg_database_size``) once the process
     exited;
   - ``log_records`` (``log_tombstones`` among them) and ``log_scan_s``: after the window, before the next, the
     batch log (``names.batch_log_topic("src")`` on the target: one partition, compacted) read by a read_committed
     consumer from its log start to the high watermark a read_uncommitted query returned just before (librdkafka
     answers a read_committed client's watermark query with the last stable offset), every record counted,
     tombstones included, and the seconds from creating that consumer to its end of log: what a copy task's scan
     of the log, its slow path to a partition's progress, costs at least;
   - ``faults``: the faults injected in or before the window.
4. **Faults** (:data:`FAULTS`, none under ``--no-faults``), each at a fraction of ``--minutes`` since the first
   window's start.  A ``during`` fault is injected in the first window that runs at that time (by its
   ``--window``), once half a window passed since its process started and it copied its first record (in the next
   window if it never does), or as soon as it copied its first record for a fault that strikes a burst (whose read
   is then still behind); a ``between`` fault before the first window that starts at or after that time.  In
   order: the source node holding ``soak-sick``'s only replicas killed for five minutes, then started again (25%;
   the windows meanwhile go on, and ``status`` is read twice during the outage); ``soak-doomed`` deleted on the
   source mid-read (35%), the target broker restarted (40%), the remote topic ``src.soak-spare`` deleted on the
   target (50%), the anchor group deleted (55%), ``soak-trimmed``'s records below the middle of its burst deleted
   mid-read as retention would (60%), the remote topic ``src.soak-reborn`` deleted and created again under its name
   while its burst is copied into it (65%), and the window's driver process frozen (SIGSTOP, its Spark tasks
   streaming on) at its first copied record until 5 s past its 60 s lease, then a rival live run with 4 Spark slots
   instead of 2 run for 40 s (it takes the flow over), then the driver thawed (70%): the item-1 interleaving of
   "never twice, never stuck" (:class:`~soak_faults.FrozenDriver`; on SQLite, frozen between two of its writes,
   since SQLite cannot break a frozen writer's lock); with ``--postgresql`` only, the metadata DB's connection cut
   right after a commit the server made, the reply lost, for the next two stream recordings and then the next two
   transactions that write (75%, :class:`~soak_faults.LostCommits`).
5. **End.**  Stops the producer, runs one plain ``replicate`` to copy the rest (exit 0 required), and compares
   source and target record by record over both topics (:func:`soak_io.compare_copies`; with ``--transforms`` the
   source as the chain leaves it, worked out without airmirror's code): per partition, key, value, headers and
   timestamp of every record, in order, over what both still hold, since retention deletes
   each side's oldest records on its own schedule; ``soak-trimmed`` is compared so too (the target keeps what it
   copied below the deleted offsets, the gap), and so is ``soak-sick``.  With faults, ``airmirror status --json``
   must then list the three stopped topics under ``stops`` (``soak-doomed``, gone from the source, ``soak-spare``,
   whose remote topic is gone, and ``soak-reborn``, whose remote topic was recreated), the remote ``src.soak-doomed``
   must have held per partition a prefix of what the source held (each record once; compared right after the
   window the topic was deleted in, before the remote topic's own retention deletes it), ``src.soak-spare`` must
   not exist again, the new ``src.soak-reborn`` must hold no committed record, the frozen driver's rival must have
   exited as a window may, every commit reply the cutter was to lose must have been lost (the window exits 0 like
   any other), and during the outage ``status`` must have named both ``soak-sick`` partitions waiting for a leader
   each time it was read while ``soak``'s lag stayed under 60 s of its producer's records.
6. **Verdicts.**  The windows are split in quarters (a quarter is ``max(1, windows // 4)`` windows); per series
   (:data:`LIMITS`), the peak of the last quarter must stay within a limit of the peak of the first: 1.2 times
   it, or 2 above it for counts (threads, descriptors, batch-log records), and scan seconds below 1 s count as
   flat.  For ``first_record_s`` only, a window with a fault and the window after it are left out of the peaks (a
   restarted broker or a deleted anchor group slow a start by design); a window that copied nothing, or a quarter
   left with no window, fails that series.  Fewer than two windows fail every series.

Writes ``benchmarks/results/soak-<UTC timestamp>.json`` (parameters, fault schedule, windows, verdicts, copy
comparison, and the count of ERROR lines in each broker's ``server.log``: a broker failing requests shows there
first), rewritten after every window so that a soak that dies leaves what it measured, and prints a markdown table
of the windows, the verdicts and the comparison.  Exit 0 when every window and the catch-up exited 0 (or 1 with the
errors the stopped ``soak-spare`` and ``soak-reborn`` are meant to give every run, :func:`exit_accepted`), every
window copied a record, every scheduled fault was injected, no delivery failed, every verdict passed, the copies are
equal and the stops are as step 5 requires (the frozen driver's window may exit 1 saying it lost its lease); 1
otherwise.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient
from json_data import HEADER_CHAIN, header_chain
from json_data import headers as json_headers
from kafka_io import ProducedHeaders, create_topics, load_topic
from shared import RESULTS, SPARK_SHUTDOWN_S, Clusters, TreePeaks, fresh_home, local_clusters, utc_stamp
from shared import log as shared_log
from soak_faults import (
    HEALTHY_NODE,
    RIVAL_WINDOW_S,
    SICK_NODE,
    SOURCE_NODES,
    DoomedTopic,
    FrozenDriver,
    LostCommits,
    RebornTopic,
    SickTopic,
    TrimmedTopic,
    delete_anchor_group,
    delete_remote_topic,
    restart_target,
)
from soak_io import (
    CLI_ERROR,
    FLOW,
    SOURCE,
    TARGET,
    compare_copies,
    db_kb,
    error_line,
    high_watermark_sum,
    parse_report,
    pg_db_kb,
    scan_batch_log,
    settled_high_watermark_sum,
    status_json,
)
from sqlalchemy import make_url

from airmirror.config.durations import parse_duration
from airmirror.devtools.commit_cutter import commit_cutter
from airmirror.devtools.local_postgres import postgres_server
from airmirror.devtools.processes import stop_process_group

DURING, BETWEEN = "during", "between"


@dataclass(frozen=True)
class Fault:
    """One scheduled fault: injected ``when`` (:data:`DURING` or :data:`BETWEEN` windows, see step 4) at ``at`` times
    ``--minutes``; ``inject`` does it (given the clusters and the window's driver pid, 0 between windows), or raises.
    ``prepare``, when set, runs before the window a ``during`` fault is injected in, and ``at_first_record`` injects
    it as soon as that window copied its first record instead of half a window in."""

    name: str
    at: float
    when: str
    inject: Callable[[Clusters, int], None]
    prepare: Callable[[Clusters], None] | None = None
    at_first_record: bool = False
    check: Callable[[Clusters], dict[str, Any]] | None = None
    """Run once the window the fault was injected in has ended; its result goes in the row's ``checks``."""

    @property
    def note(self) -> str:
        """How a window's row names it."""
        return f"{self.name} ({self.when})"


TOPIC, IDLE_TOPIC, SPARE_TOPIC = "soak", "soak-idle", "soak-spare"
DOOMED = DoomedTopic("soak-doomed", 4)
TRIMMED = TrimmedTopic("soak-trimmed", 2)
SICK = SickTopic("soak-sick", 2, watched=TOPIC)
REBORN = RebornTopic("soak-reborn", 2)
FROZEN = FrozenDriver()
LOST = LostCommits()
RIVAL_SLOTS = 4
"""The frozen driver's rival's Spark slots: more copy tasks than the windows' 2."""
SPARE_PARTITIONS, SPARE_RECORDS = 2, 2_000
FAULTS: tuple[Fault, ...] = (
    Fault("source broker down five minutes", 0.25, DURING, SICK.outage),
    Fault(
        "source topic deleted mid-read",
        0.35,
        DURING,
        DOOMED.delete,
        DOOMED.prepare,
        at_first_record=True,
        check=lambda clusters: DOOMED.compare(clusters.target.bootstrap),
    ),
    Fault("target restart", 0.4, DURING, restart_target),
    Fault("remote topic deleted", 0.5, BETWEEN, delete_remote_topic(SPARE_TOPIC)),
    Fault("anchor group deleted", 0.55, BETWEEN, delete_anchor_group),
    Fault("retention overtakes a half-copied range", 0.6, DURING, TRIMMED.trim, TRIMMED.prepare, at_first_record=True),
    Fault(
        "remote topic recreated mid-copy",
        0.65,
        DURING,
        REBORN.recreate,
        REBORN.prepare,
        at_first_record=True,
        check=REBORN.check,
    ),
    Fault(
        "driver frozen past its lease, a run with more slots takes over",
        0.7,
        DURING,
        FROZEN.freeze,
        at_first_record=True,
        check=FROZEN.check,
    ),
    Fault("metadata DB commits lose their reply", 0.75, DURING, LOST.cut, check=LOST.check),
)
"""The fault schedule, in the middle quarters so that the first and last quarters compare undisturbed windows.  A new
fault is one entry here (and its injector in :mod:`soak_io`).  Their topics (:data:`FAULT_TOPICS`) exist only in a
soak with faults."""
DOOMED_FAULT, REBORN_FAULT, FROZEN_FAULT, LOST_FAULT = (FAULTS[i].name for i in (1, -3, -2, -1))
POSTGRESQL_FAULTS = (LOST_FAULT,)
"""The faults scheduled only when the metadata DB is on PostgreSQL (``--postgresql``)."""
FAULT_TOPICS = {
    DOOMED.topic: DOOMED.partitions,
    TRIMMED.topic: TRIMMED.partitions,
    SPARE_TOPIC: SPARE_PARTITIONS,
    SICK.topic: SICK.partitions,
    REBORN.topic: REBORN.partitions,
}
COMPARED_FAULT_TOPICS = (TRIMMED.topic, SICK.topic)
"""The fault topics compared record by record at the end, like the written ones."""
STOPPED_TOPICS = (DOOMED.topic, SPARE_TOPIC, REBORN.topic)
"""The source topics the faults stop: ``status`` must name each at the end."""
STOPPED_REMOTE_TOPICS = (SPARE_TOPIC, REBORN.topic)
"""The source topics whose remote topic a fault deleted or recreated: every run fails naming them."""


@dataclass(frozen=True)
class Limit:
    """How far a series' last-quarter peak may rise above its first-quarter peak: to ``factor`` times it or ``slack``
    above it, whichever is more; a last peak below ``flat_below`` passes whatever the first."""

    factor: float = 1.2
    slack: float = 0.0
    flat_below: float = 0.0

    def passes(self, first: float, last: float) -> bool:
        return last <= self.ceiling(first) or last < self.flat_below

    def ceiling(self, first: float) -> float:
        return max(first * self.factor, first + self.slack)


LIMITS: dict[str, Limit] = {
    "first_record_s": Limit(),
    "log_records": Limit(slack=2),
    "log_scan_s": Limit(flat_below=1.0),
    "db_kb": Limit(),
    "rss_mb": Limit(),
    "threads": Limit(slack=2),
    "fds": Limit(slack=2),
}
"""The judged series (columns of :class:`Window`) and their limits.  Peaks, not single windows, are compared because
the series breathe with each window (Spark's start, the JVM's cached thread pools); a leak shows as a rising peak."""
FAULT_EXEMPT = ("first_record_s",)
"""The series whose quarter peaks leave out a window with a fault and the window after it."""
WINDOW_GRACE_S = 600.0
"""How long a window's process may outlive its ``--for`` before the soak stops it: longer than the 5 minutes a run
retries failing rounds, plus its start and its stop."""
POLL_S = 0.2
BROKERS = ("soak-source", "soak-target")
log = partial(shared_log, tag="soak")


class SteadyProducer(threading.Thread):
    """Writes ``rate`` records a second round-robin over the partitions until stopped; keeps every failed delivery."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        rate: int,
        size: int,
        headers: Callable[[int], ProducedHeaders] | None = None,
    ) -> None:
        super().__init__(daemon=True)
        self.topic, self.partitions, self.rate, self.size = topic, partitions, rate, size
        self.headers = headers
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
        self.halt = threading.Event()
        self.sent = 0
        self.failed: list[str] = []

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.failed.append(str(error))

    def run(self) -> None:
        started = time.monotonic()
        while not self.halt.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while self.sent < due:
                value = (f"{self.sent:012d}" * (self.size // 12 + 1))[: self.size].encode()
                self.producer.produce(
                    self.topic,
                    value,
                    f"key-{self.sent}".encode(),
                    partition=self.sent % self.partitions,
                    timestamp=int(time.time() * 1000),
                    headers=None if self.headers is None else self.headers(self.sent),
                    on_delivery=self._delivered,
                )
                self.sent += 1
            self.producer.poll(0)
            time.sleep(0.01)
        if self.producer.flush(120):
            self.failed.append("records left undelivered after 120 s")

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=180)


@dataclass
class Window:
    """One window's row (see step 3 of the module docstring); ``report`` is the process's JSON report (its stdout
    when that is not JSON)."""

    number: int
    start_min: float
    faults: list[str] = field(default_factory=list)
    exit_code: int | None = None
    first_record_s: float | None = None
    records: int | None = None
    retries: int | None = None
    rss_mb: float = 0.0
    threads: int = 0
    fds: int = 0
    db_kb: float = 0.0
    log_records: int = 0
    log_tombstones: int = 0
    log_scan_s: float = 0.0
    report: dict[str, Any] | str | None = None
    error: str = ""
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Soak:
    """What every window needs: the clusters, the flow's config and DB, the remote topics' partition counts."""

    args: argparse.Namespace
    home: Path
    clusters: Clusters
    config: Path
    db_size: Callable[[], float]
    """The metadata DB's size in KiB (the ``db_kb`` series)."""
    remote: dict[str, int]
    target_admin: AdminClient
    pending: list[Fault]

    def command(self) -> list[str]:
        """One live run of the flow for ``--window``."""
        return [
            *self.replicate(),
            "--continuous",
            "--for",
            f"{int(self.args.window)}s",
            "--json",
        ]

    def replicate(self, config: Path | None = None) -> list[str]:
        """A plain ``airmirror replicate`` of the flow (with ``config``, from that file instead)."""
        return [sys.executable, "-m", "airmirror.cli", "replicate", str(config or self.config), "--flow", FLOW]


def config_text(
    source: str,
    target: str,
    topics: list[str],
    db_url: str,
    retention: str,
    transforms: Sequence[str] = (),
    slots: int = 2,
) -> str:
    """The flow's MM2 properties: ``src->tgt`` over ``topics``, replication factors 1 but the offset-syncs topic's
    on the source (:data:`SOURCE_NODES`), a local Spark of ``slots`` slots, and the ``transforms`` lines
    (``{source}`` and ``{target}`` to fill in) last."""
    lines = [
        f"clusters = {SOURCE}, {TARGET}",
        f"{SOURCE}.bootstrap.servers = {source}",
        f"{TARGET}.bootstrap.servers = {target}",
        f"{FLOW}.enabled = true",
        f"topics = {', '.join(topics)}",
        "replication.factor = 1",
        "offset.storage.replication.factor = 1",
        f"offset-syncs.topic.replication.factor = {SOURCE_NODES}",
        "heartbeats.topic.replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
        f"airmirror.metadata.db.url = {db_url}",
        f"airmirror.metadata.retention = {retention}",
        f"airmirror.spark.master = local[{slots}]",
        *(line.format(source=SOURCE, target=TARGET) for line in transforms),
    ]
    return "\n".join(lines) + "\n"


def create_source_topics(bootstrap: str, topics: dict[str, int], retention_s: float) -> None:
    """Create ``topics`` (name -> partitions) with ``retention.ms`` of ``retention_s`` and segments of a tenth, on
    the source's first node but :data:`SICK`'s, on :data:`~soak_faults.SICK_NODE`; the remote topic a fault deletes
    and the topic whose node goes down get their records now."""
    config = {"retention.ms": str(int(retention_s * 1000)), "segment.ms": str(int(retention_s * 100))}
    healthy = {topic: count for topic, count in topics.items() if topic != SICK.topic}
    create_topics(bootstrap, healthy, config, node=HEALTHY_NODE)
    if SICK.topic in topics:
        create_topics(bootstrap, {SICK.topic: SICK.partitions}, config, node=SICK_NODE)
        SICK.fill(bootstrap)
    if SPARE_TOPIC in topics:
        load_topic(bootstrap, SPARE_TOPIC, SPARE_PARTITIONS, SPARE_RECORDS, 100, stamp_now=True)


def stopped_topics(soak: Soak, rows: list[Window]) -> dict[str, Any]:
    """What the faults stopped, at the end (step 5): ``status``'s stops, whether they name every topic of
    :data:`STOPPED_TOPICS`, the deleted source topic's copy (a prefix of what it held, compared right after the window
    it was deleted in, before the remote topic's retention deletes it), and whether the deleted remote topic stayed
    deleted."""
    status = status_json(soak.config)
    stops = status.get("stops", [{"topic": None, "reason": status.get("error", "no stops in status")}])
    named = {stop.get("topic") for stop in stops}
    listed = soak.target_admin.list_topics(timeout=30).topics

    def check(fault: str, failed: dict[str, Any]) -> dict[str, Any]:
        return next((row.checks[fault] for row in rows if fault in row.checks), failed)

    return {
        "stops": stops,
        "all_named": all(topic in named for topic in STOPPED_TOPICS),
        "deleted_source_copy": check(DOOMED_FAULT, {"prefix": False}),
        "deleted_remote_recreated": f"{SOURCE}.{SPARE_TOPIC}" in listed,
        "recreated_remote": check(REBORN_FAULT, {"never_written": False}),
        "frozen_driver": check(FROZEN_FAULT, {"rival_exit_code": None, "rival_error": "not run"}),
        **({"lost_commits": check(LOST_FAULT, {"passed": False})} if soak.args.postgresql else {}),
    }


def inject_between(soak: Soak, elapsed_s: float) -> list[str]:
    """Inject every pending ``between`` fault due at ``elapsed_s`` (since the first window's start); their notes."""
    due = [f for f in soak.pending if f.when == BETWEEN and elapsed_s >= f.at * soak.args.minutes * 60]
    notes = []
    for fault in due:
        log(f"fault before the window: {fault.name}")
        fault.inject(soak.clusters, 0)
        notes.append(fault.note)
        soak.pending.remove(fault)
    return notes


def due_during(soak: Soak, elapsed_s: float) -> Fault | None:
    """The first pending ``during`` fault due within a window starting at ``elapsed_s``, if any."""
    end_s = elapsed_s + soak.args.window
    return next((f for f in soak.pending if f.when == DURING and end_s > f.at * soak.args.minutes * 60), None)


def run_window(soak: Soak, row: Window, fault: Fault | None) -> None:
    """Run one live run as a process of its own and fill ``row`` with what it did (step 3); inject ``fault`` in it
    half a window after its start, once it copied a record.  The process group has exited when this returns."""
    base = settled_high_watermark_sum(soak.target_admin, soak.remote)
    peaks = TreePeaks()
    with (soak.home / f"window-{row.number:03d}.log").open("w") as stderr:
        process = subprocess.Popen(
            soak.command(), stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True
        )
        started, next_sample = time.monotonic(), 0.0
        try:
            while process.poll() is None:
                elapsed = time.monotonic() - started
                if row.first_record_s is None and (high_watermark_sum(soak.target_admin, soak.remote) or 0) > base:
                    row.first_record_s = round(elapsed, 1)
                if elapsed >= next_sample:
                    peaks.sample(process.pid)
                    next_sample = elapsed + soak.args.sample_seconds
                if (
                    fault is not None
                    and row.first_record_s is not None
                    and (fault.at_first_record or elapsed >= soak.args.window / 2)
                ):
                    log(f"fault in window {row.number}: {fault.name}")
                    fault.inject(soak.clusters, process.pid)
                    row.faults.append(fault.note)
                    soak.pending.remove(fault)
                    fault = None
                if elapsed > soak.args.window + WINDOW_GRACE_S:
                    log(f"window {row.number} outlived its --for by {WINDOW_GRACE_S:.0f} s: stopping it")
                    break
                time.sleep(POLL_S)
        finally:
            stop_process_group(process, SPARK_SHUTDOWN_S)
    stdout, _ = process.communicate()
    row.exit_code = process.returncode
    if row.exit_code:
        row.error = error_line((soak.home / f"window-{row.number:03d}.log").read_text(errors="replace"))
    row.rss_mb, row.threads, row.fds = peaks.rss_mb, peaks.threads, peaks.fds
    row.report = parse_report(stdout)
    if isinstance(row.report, dict):
        row.records, row.retries = row.report.get("records"), row.report.get("retries")


def exit_accepted(exit_code: int | None, error: str, *, lease_lost: bool = False) -> bool:
    """Exit 0, or exit 1 when the run's only failures are the stops of :data:`STOPPED_REMOTE_TOPICS`, whose remote
    topics faults deleted or recreated: airmirror fails every run naming them, after copying everything else, until
    ``airmirror reset``.  With ``lease_lost`` (the frozen driver's window), exit 1 saying it lost its lease too."""
    if exit_code == 0:
        return True
    if exit_code != 1 or not error.startswith(CLI_ERROR):
        return False
    if lease_lost and "lost its lease" in error:
        return True
    named = sum(error.count(f"remote topic {SOURCE}.{topic} ") for topic in STOPPED_REMOTE_TOPICS)
    return named > 0 and error.count("airmirror stopped replicating") == named


def after_window(soak: Soak, row: Window) -> None:
    """Fill the row's DB size and batch-log scan, taken while no run works on the flow."""
    row.db_kb = soak.db_size()
    scan = scan_batch_log(soak.clusters.target.bootstrap)
    row.log_records, row.log_tombstones, row.log_scan_s = scan.records, scan.tombstones, scan.seconds


def run_windows(soak: Soak, save: Callable[[list[Window]], None]) -> list[Window]:
    """Windows back to back for ``--minutes`` (step 3), faults as scheduled (step 4); ``save`` gets the rows after
    every window."""
    rows: list[Window] = []
    first_start = time.monotonic()
    while (elapsed := time.monotonic() - first_start) < soak.args.minutes * 60:
        row = Window(number=len(rows) + 1, start_min=round(elapsed / 60, 2))
        row.faults.extend(inject_between(soak, elapsed))
        fault = due_during(soak, elapsed)
        if fault is not None and fault.prepare is not None:
            log(f"preparing the fault of window {row.number}: {fault.name}")
            fault.prepare(soak.clusters)
        log(f"window {row.number} at minute {row.start_min}")
        run_window(soak, row, fault)
        after_window(soak, row)
        if fault is not None and fault.check is not None and fault.note in row.faults:
            row.checks[fault.name] = fault.check(soak.clusters)
        rows.append(row)
        log(
            f"window {row.number}: exit {row.exit_code}, first record after {row.first_record_s} s, "
            f"{row.records} records, batch log {row.log_records} records scanned in {row.log_scan_s} s"
        )
        save(rows)
    return rows


def left_out(rows: list[Window]) -> set[int]:
    """The windows with a fault, and the window after each: left out of :data:`FAULT_EXEMPT` series' peaks."""
    return {number for row in rows if row.faults for number in (row.number, row.number + 1)}


def verdict(rows: list[Window], metric: str, skip: set[int]) -> dict[str, Any]:
    """The first and last quarters' peaks of ``metric`` over ``rows`` without the windows in ``skip``, and whether
    the last stays within :data:`LIMITS` of the first (step 6)."""
    if len(rows) < 2:
        return {"passed": False, "why": "fewer than two windows"}
    quarter = max(1, len(rows) // 4)
    first = [row for row in rows[:quarter] if row.number not in skip]
    last = [row for row in rows[-quarter:] if row.number not in skip]
    judged = {"first_quarter": [row.number for row in first], "last_quarter": [row.number for row in last]}
    if skip:
        judged["left_out"] = sorted(skip)
    if not first or not last:
        return {**judged, "passed": False, "why": "a quarter has no window left to judge"}
    values = [getattr(row, metric) for row in first + last]
    if None in values:
        return {**judged, "passed": False, "why": "a window copied nothing"}
    first_peak, last_peak = max(values[: len(first)]), max(values[len(first) :])
    limit = LIMITS[metric]
    return {
        **judged,
        "first_peak": first_peak,
        "last_peak": last_peak,
        "limit": round(limit.ceiling(first_peak), 2),
        "passed": limit.passes(first_peak, last_peak),
    }


def verdicts(rows: list[Window]) -> dict[str, dict[str, Any]]:
    """:func:`verdict` of every series of :data:`LIMITS`."""
    skip = left_out(rows)
    return {metric: verdict(rows, metric, skip if metric in FAULT_EXEMPT else set()) for metric in LIMITS}


def print_report(document: dict[str, Any]) -> None:
    """The windows' table, the verdicts and the copy comparison, in markdown."""
    print(
        "| window | start min | exit | first record s | records | retries | RSS MB | threads | fds | DB KB "
        "| log records | log scan s | faults |\n" + "|---:" * 12 + "|---|"
    )
    for row in document["windows"]:
        cells = [row[key] for key in ("number", "start_min", "exit_code", "first_record_s", "records", "retries")]
        cells += [row[key] for key in ("rss_mb", "threads", "fds", "db_kb", "log_records", "log_scan_s")]
        cells.append("; ".join(row["faults"]))
        print("| " + " | ".join("-" if cell is None else str(cell) for cell in cells) + " |")
    print("\n| series | first quarter peak | last quarter peak | limit | verdict |\n|---|---:|---:|---:|---|")
    for metric, v in document["verdicts"].items():
        outcome = "pass" if v["passed"] else f"FAIL{': ' + v['why'] if 'why' in v else ''}"
        cells = [v.get("first_peak", "-"), v.get("last_peak", "-"), v.get("limit", "-")]
        print(f"| {metric} | {' | '.join(map(str, cells))} | {outcome} |")
    for metric in FAULT_EXEMPT:
        skipped = document["verdicts"][metric].get("left_out")
        if skipped:
            print(f"\n{metric}: windows {', '.join(map(str, skipped))} left out (a fault in them or the one before).")
    if document["stalled_windows"]:
        print(f"\nwindows that copied nothing: {', '.join(map(str, document['stalled_windows']))}")
    if document["faults_not_injected"]:
        print(f"\nfaults not injected: {', '.join(document['faults_not_injected'])}")
    copy = document["copy"]
    print(
        f"\ncopy: {copy['source_records']} source records, {copy['target_records']} target records, "
        f"{'equal' if copy['equal'] else 'UNEQUAL: ' + ', '.join(copy['unequal_partitions'][:10])}; "
        f"catch-up exit {copy['catch_up_exit_code']}; produced {document['produced']}, "
        f"{len(document['delivery_failures'])} delivery failures; broker ERROR lines {document['broker_errors']}; "
        f"{'PASSED' if document['passed'] else 'FAILED'}"
    )


def stops_as_expected(stopped: dict[str, Any] | None) -> bool:
    """No faults (``None``), or the faults' stops and checks as step 5 requires: every stopped topic named in
    ``status``, the deleted source topic's copy a prefix of it, the deleted remote topic not recreated, the
    recreated one never written, the frozen driver's rival accepted, the outage's partitions named waiting while the
    others kept up."""
    if stopped is None:
        return True
    rival = stopped["frozen_driver"]
    return (
        stopped["all_named"]
        and stopped["deleted_source_copy"]["prefix"]
        and not stopped["deleted_remote_recreated"]
        and stopped["recreated_remote"]["never_written"]
        and exit_accepted(rival["rival_exit_code"], rival["rival_error"])
        and stopped["outage"]["passed"]
        and stopped.get("lost_commits", {"passed": True})["passed"]
    )


def passed(document: dict[str, Any]) -> bool:
    """Exit 0's condition (see the module docstring)."""
    return (
        bool(document["windows"])
        and all(
            exit_accepted(row["exit_code"], row["error"], lease_lost=any(FROZEN_FAULT in f for f in row["faults"]))
            for row in document["windows"]
        )
        and not document["stalled_windows"]
        and exit_accepted(document["copy"]["catch_up_exit_code"], document["copy"]["catch_up_error"])
        and document["copy"]["equal"]
        and stops_as_expected(document.get("stopped"))
        and not document["faults_not_injected"]
        and not document["delivery_failures"]
        and all(v["passed"] for v in document["verdicts"].values())
    )


def broker_error_lines(home: Path, name: str) -> int:
    """How many ERROR lines the nodes of local cluster ``name`` logged in their ``server.log`` files."""
    logs = (home / "kafka" / name).rglob("server.log")
    return sum(line.startswith(b"[") and b"] ERROR " in line for log in logs for line in log.read_bytes().splitlines())


def duration_s(value: str) -> float:
    """A duration flag (``30s``, ``10m``) in seconds."""
    duration = parse_duration(value)
    if duration is None or duration.total_seconds() <= 0:
        raise argparse.ArgumentTypeError(f"'{value}' is not a positive duration (30s, 5m, 2h)")
    return duration.total_seconds()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add = parser.add_argument
    add("--minutes", type=float, default=60.0, help="minutes during which windows start (default 60)")
    add("--window", type=duration_s, default=120.0, help="each live run's --for (default 120s)")
    add("--rate", type=int, default=1000, help="records produced a second, in total (default 1000)")
    add("--record-size", type=int, default=100, help="value bytes (default 100)")
    add("--partitions", type=int, default=200, help="partitions of the written topic (default 200)")
    add("--idle-partitions", type=int, default=10, help="partitions of the topic never written (default 10)")
    add("--retention", default="10m", help="airmirror.metadata.retention of the flow (default 10m)")
    add("--topic-retention", type=duration_s, default=600.0, help="retention.ms of the source topics (default 10m)")
    add("--sample-seconds", type=float, default=5.0, help="process-tree sampling interval (default 5)")
    add("--no-faults", action="store_true", help="inject none of the scheduled faults")
    add(
        "--postgresql",
        action="store_true",
        help="keep the metadata DB on a local PostgreSQL server, reached through a proxy that can lose commit replies",
    )
    add(
        "--transforms",
        action="store_true",
        help="copy through the bench's header chain (json_data.HEADER_CHAIN: Filter, DropHeaders, InsertHeader)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the soak (see the module docstring); 0 when it passed, 1 otherwise."""
    args = parse_args(argv)
    home = fresh_home("soak")
    stamp = utc_stamp()
    path = RESULTS / f"soak-{stamp}.json"
    RESULTS.mkdir(exist_ok=True)
    schedule = [] if args.no_faults else [f for f in FAULTS if args.postgresql or f.name not in POSTGRESQL_FAULTS]
    document: dict[str, Any] = {
        "timestamp": stamp,
        "params": vars(args),
        "faults": [{"name": f.name, "at": f.at, "when": f.when} for f in schedule],
        "windows": [],
    }

    def save(rows: list[Window]) -> None:
        document["windows"] = [asdict(row) for row in rows]
        path.write_text(json.dumps(document, indent=2) + "\n")

    compared = {TOPIC: args.partitions} | ({IDLE_TOPIC: args.idle_partitions} if args.idle_partitions else {})
    if not args.no_faults:
        compared |= {topic: FAULT_TOPICS[topic] for topic in COMPARED_FAULT_TOPICS}
    topics = compared | ({} if args.no_faults else FAULT_TOPICS)
    stack = ExitStack()
    try:
        if args.postgresql:
            server = stack.enter_context(postgres_server())
            LOST.cutter = stack.enter_context(commit_cutter(server.host, server.port))
            db_url = make_url(server.url).set(port=LOST.cutter.port).render_as_string(hide_password=False)
            db_size = partial(pg_db_kb, server.url)
        else:
            FROZEN.sqlite_db = home / "airmirror.db"
            db_url, db_size = f"sqlite:///{FROZEN.sqlite_db}", partial(db_kb, FROZEN.sqlite_db)
        checks = {"log.retention.check.interval.ms": "30000"}
        clusters = stack.enter_context(local_clusters(BROKERS, home, source_nodes=SOURCE_NODES, broker_config=checks))
        source, target = clusters.source, clusters.target
        create_source_topics(source.bootstrap, topics, args.topic_retention)
        config = home / "mm2.properties"
        transforms = HEADER_CHAIN if args.transforms else ()
        chain = header_chain if args.transforms else None
        DOOMED.chain = chain
        text = partial(
            config_text, source.bootstrap, target.bootstrap, list(topics), db_url, args.retention, transforms
        )
        config.write_text(text())
        wide = home / "mm2-wide.properties"
        wide.write_text(text(slots=RIVAL_SLOTS))
        SICK.config, SICK.rate = config, args.rate
        soak = Soak(
            args=args,
            home=home,
            clusters=clusters,
            config=config,
            db_size=db_size,
            remote={f"{SOURCE}.{topic}": count for topic, count in topics.items()},
            target_admin=AdminClient({"bootstrap.servers": target.bootstrap}),
            pending=list(schedule),
        )
        producer = SteadyProducer(
            source.bootstrap,
            TOPIC,
            args.partitions,
            args.rate,
            args.record_size,
            json_headers if args.transforms else None,
        )
        producer.start()
        FROZEN.rival = [*soak.replicate(wide), "--continuous", "--for", f"{RIVAL_WINDOW_S}s", "--json"]
        log(f"home {home}; windows of {' '.join(soak.command()[1:])}")
        rows = run_windows(soak, save)
        if not args.no_faults:
            document["outage"] = SICK.result()
        producer.stop()
        document |= {"produced": producer.sent, "delivery_failures": producer.failed[:5]}
        catch_up = subprocess.run(soak.replicate(), capture_output=True, text=True)
        document["copy"] = {
            "catch_up_exit_code": catch_up.returncode,
            "catch_up_error": error_line(catch_up.stderr) if catch_up.returncode else "",
            **compare_copies(source.bootstrap, target.bootstrap, compared, chain),
        }
        if not args.no_faults:
            document["stopped"] = stopped_topics(soak, rows) | {"outage": document["outage"]}
        document["verdicts"] = verdicts(rows)
        document["faults_not_injected"] = [fault.name for fault in soak.pending]
        document["stalled_windows"] = [row.number for row in rows if row.first_record_s is None]
    finally:
        stack.close()
    document["broker_errors"] = {name: broker_error_lines(home, name) for name in BROKERS}
    document["passed"] = passed(document)
    save(rows)
    print_report(document)
    log(f"results in {path}")
    return 0 if document["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
