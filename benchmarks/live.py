"""One copier's run of the bench's live case (``case_live.py``): its replication lag under a steady load.

A copier runs continuously (MM2 as always, airmirror as ``replicate --continuous``).  Once it has copied a first warm-up
record (its start-up is not lag), a producer writes ``rate`` records a second of ``size``-byte values, round-robin over
the partitions, for ``seconds`` seconds, each stamped with its produce time (CreateTime, which every copier keeps) and
keyed with its sequence number. An independent read_committed consumer on the target (in a process of its own) notes,
for every record, when it became visible there minus its produce time: the record's replication lag.  The case reports
the lag's p50, p90, p99 and max, the longest gap between two consecutive arrivals on the target (a copier that delivers
in bursts shows its cycle here) and how many gaps were longer than :data:`STALL_MS`, the CPU seconds the copier's whole
process tree used from the first produce to the last record visible (and by role), its peak RSS, and the machine's
1-minute load average at the end (the bench's own brokers and copier included; the case is only fair on an otherwise
idle machine).  The measuring clients' own floor is measured beside it: a second watch reads the *source* topic the same
way, and its produce-to-visible lag (``floor``) must stay far below the copier's.  Every record must arrive exactly once
(its key seen once, none missing).  A watch of many partitions spreads them over ``watch_processes`` processes (every
``n``-th partition each), so that the measuring clients keep up with thousands of partitions; the topics are deleted
after the case, so that the next copier's finds the brokers as this one did.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import subprocess
import time
from itertools import pairwise
from pathlib import Path
from typing import Any, TypedDict, final

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka_io import create_topic, delete_topics
from shared import SPARK_SHUTDOWN_S, TreeUsage

from airmirror.devtools.processes import stop_process_group

READY_TIMEOUT_S = 180.0
DRAIN_TIMEOUT_S = 180.0
IDLE_POLL_S = 0.1
"""How long the measuring consumer's ``poll`` blocks when nothing arrives; it returns at the first record."""
BATCHED_FETCH_BYTES = 64 * 1024
BATCHED_FETCH_WAIT_MS = 20
"""A batched watch's fetch waits for this many bytes or this long: the floor shows what it adds."""
LONG_GAP_MS = 300
"""A gap between arrivals this long or longer is listed with its time (``long_gaps``)."""
STALL_MS = 500
"""A gap between arrivals longer than this is a stall (``gaps_over_500_ms``)."""


class Floor(TypedDict):
    """The measuring clients' own produce-to-visible lag, in ms, read off the source topic."""

    p50: int
    p99: int
    max: int


@final
class LiveFigures(TypedDict):
    """One copier's live case: the load, the records' lag on the target in ms (percentiles, max, mean), the gaps
    between arrivals, the copier's CPU and peak RSS, the clients' :class:`Floor` and the load average at the end."""

    records: int
    rate: int
    seconds: float
    partitions: int
    watch_processes: int
    batched_watch: bool
    p50: int
    p90: int
    p99: int
    max: int
    mean: int
    longest_gap_ms: int
    gaps_over_500_ms: int
    long_gaps: list[list[float]]
    """``[seconds since the first arrival, gap ms]`` of the longest gaps (:func:`long_gaps`)."""
    cpu_s: float
    cpu_s_by_role: dict[str, float]
    peak_rss_mb: int
    floor: Floor
    load_avg_1m_at_end: float


def produce_steadily(bootstrap: str, topic: str, partitions: int, rate: int, size: int, seconds: float) -> int:
    """Produce ``rate * seconds`` records at ``rate`` records/s, in 10 ms slices; returns how many were produced."""
    block = os.urandom(size + 4096)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    total, sent, started = int(rate * seconds), 0, time.monotonic()
    while sent < total:
        due = min(total, int((time.monotonic() - started) * rate) + 1)
        now_ms = int(time.time() * 1000)
        while sent < due:
            producer.produce(
                topic,
                block[sent % 4096 : sent % 4096 + size],
                str(sent).encode(),
                partition=sent % partitions,
                timestamp=now_ms,
            )
            sent += 1
        producer.poll(0)
        time.sleep(0.01)
    if producer.flush(120) != 0:
        raise RuntimeError("the live producer could not deliver every record")
    return sent


class VisibilityWatch:
    """Reads a topic from its start, read_committed, in ``processes`` processes of its own (so that neither the
    producer nor the other watch shares their interpreters; each reads every ``processes``-th partition), and keeps,
    per record in arrival order, its key, its arrival time and its visible-minus-produced lag (ms since the epoch,
    the producer's clock): :attr:`keys`, :attr:`arrivals_ms` and :attr:`lags_ms`, filled in by :meth:`stop`."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, processes: int = 1, batched: bool = False) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.keys: list[bytes | None] = []
        self.arrivals_ms: list[int] = []
        self.lags_ms: list[int] = []
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._watchers = []
        for index in range(min(processes, partitions)):
            count, results = context.Value("q", 0), context.Queue()
            process = context.Process(
                target=watch_topic,
                args=(bootstrap, topic, list(range(index, partitions, processes)), batched, count, self._stop, results),
                daemon=True,
            )
            self._watchers.append((process, count, results))

    def start(self) -> VisibilityWatch:
        for process, _, _ in self._watchers:
            process.start()
        return self

    def count(self) -> int:
        """The records seen so far, by all processes."""
        return sum(count.value for _, count, _ in self._watchers)

    def wait_for(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.count() < count and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.count() >= count

    def stop(self) -> None:
        """Stop every process and merge what they saw, in arrival order."""
        self._stop.set()
        seen: list[tuple[int, bytes | None, int]] = []
        for process, _, results in self._watchers:
            keys, arrivals_ms, lags_ms = results.get(timeout=120)
            seen += zip(arrivals_ms, keys, lags_ms, strict=True)
            process.join(30)
        seen.sort(key=lambda record: record[0])
        self.arrivals_ms = [arrival for arrival, _, _ in seen]
        self.keys = [key for _, key, _ in seen]
        self.lags_ms = [lag for _, _, lag in seen]


def watch_topic(
    bootstrap: str, topic: str, partitions: list[int], batched: bool, count: Any, stop: Any, results: Any
) -> None:
    """A :class:`VisibilityWatch`'s process: read until ``stop``, counting arrivals in ``count``; then put the keys,
    arrival times and lags on ``results``.  ``batched`` fetches wait for :data:`BATCHED_FETCH_BYTES` or
    :data:`BATCHED_FETCH_WAIT_MS`: a fetch of thousands of partitions answered at every new record keeps the brokers
    and the machine's cores busy with the measuring alone."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-live-watch",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            # the broker answers a fetch as soon as records are readable; this only bounds an idle fetch
            "fetch.wait.max.ms": BATCHED_FETCH_WAIT_MS if batched else 10,
            "fetch.min.bytes": BATCHED_FETCH_BYTES if batched else 1,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    keys: list[bytes | None] = []
    arrivals_ms: list[int] = []
    lags_ms: list[int] = []
    try:
        while not stop.is_set():
            # No wait of our own: poll() returns at the first record fetched (its timeout only bounds an idle wait),
            # then consume(n, 0) takes what else is already fetched without waiting.  consume(n, t) alone would wait
            # until n records or t had passed, adding up to t to every record's lag.
            first = consumer.poll(IDLE_POLL_S)
            if first is None:
                continue
            now_ms = int(time.time() * 1000)
            for message in [first, *consumer.consume(1000, 0)]:
                error = message.error()
                if error is None:
                    keys.append(message.key())
                    arrivals_ms.append(now_ms)
                    lags_ms.append(now_ms - message.timestamp()[1])
                elif error.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(error)
            count.value = len(keys)
    finally:
        consumer.close()
        results.put((keys, arrivals_ms, lags_ms))


def percentile(values: list[int], fraction: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def longest_gap(arrivals_ms: list[int]) -> int:
    """The longest time between two consecutive arrivals (0 for fewer than two)."""
    return max((later - earlier for earlier, later in pairwise(arrivals_ms)), default=0)


def long_gaps(arrivals_ms: list[int], at_least_ms: int = LONG_GAP_MS, most: int = 20) -> list[list[float]]:
    """``[seconds since the first arrival, gap ms]`` of the ``most`` longest gaps of at least ``at_least_ms``, in
    time order: whether they recur at some interval of the copier's says where they come from."""
    gaps = [(later - earlier, earlier) for earlier, later in pairwise(arrivals_ms) if later - earlier >= at_least_ms]
    longest = sorted(gaps, reverse=True)[:most]
    return [[round((at - arrivals_ms[0]) / 1000, 1), gap] for gap, at in sorted(longest, key=lambda g: g[1])]


def run_live(
    name: str,
    command: list[str],
    clusters_source: str,
    clusters_target: str,
    topic: str,
    remote_topic: str,
    *,
    partitions: int,
    rate: int,
    size: int,
    seconds: float,
    workdir: Path,
    watch_processes: int = 1,
    batched_watch: bool = False,
) -> LiveFigures:
    """One copier's live case (see the module docstring), each watch in ``watch_processes`` processes, with batched
    fetches if ``batched_watch``; raises ``RuntimeError`` when records go missing or arrive twice, or the copier never
    starts copying."""
    create_topic(clusters_source, topic, partitions)
    admin = AdminClient({"bootstrap.servers": clusters_target})
    with open(workdir / f"{name}.stdout", "wb") as out, open(workdir / f"{name}.stderr", "wb") as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, start_new_session=True)
        try:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while remote_topic not in admin.list_topics(timeout=10).topics:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{name} never created {remote_topic} (exit {process.returncode})")
                time.sleep(0.2)
            watch = VisibilityWatch(clusters_target, remote_topic, partitions, watch_processes, batched_watch).start()
            floor = VisibilityWatch(clusters_source, topic, partitions, watch_processes, batched_watch).start()
            produce_steadily(clusters_source, topic, partitions, 1, size, 1)
            if not watch.wait_for(1, READY_TIMEOUT_S):
                raise RuntimeError(f"{name} did not copy the warm-up record")
            usage = TreeUsage(process.pid, interval=0.5)
            produced = produce_steadily(clusters_source, topic, partitions, rate, size, seconds)
            watch.wait_for(1 + produced, DRAIN_TIMEOUT_S)
            peak_rss_mb = usage.stop()
            watch.stop()
            floor.stop()
        finally:
            stop_process_group(process, linger_s=SPARK_SHUTDOWN_S)
    delete_topics(clusters_source, [topic])
    delete_topics(clusters_target, [remote_topic])
    lags, keys = watch.lags_ms[1:], watch.keys[1:]
    if sorted(int(key) for key in keys if key is not None) != list(range(produced)):
        raise RuntimeError(
            f"{name}: {len(keys)} records visible on the target, {len(set(keys))} distinct, of {produced} produced"
        )
    return {
        "records": produced,
        "rate": rate,
        "seconds": seconds,
        "partitions": partitions,
        "watch_processes": watch_processes,
        "batched_watch": batched_watch,
        "p50": percentile(lags, 0.50),
        "p90": percentile(lags, 0.90),
        "p99": percentile(lags, 0.99),
        "max": max(lags),
        "mean": round(statistics.fmean(lags)),
        "longest_gap_ms": longest_gap(watch.arrivals_ms[1:]),
        "gaps_over_500_ms": sum(1 for a, b in pairwise(watch.arrivals_ms[1:]) if b - a > STALL_MS),
        "long_gaps": long_gaps(watch.arrivals_ms[1:]),
        "cpu_s": round(usage.cpu_s(), 1),
        "cpu_s_by_role": usage.cpu_s_by_role(),
        "peak_rss_mb": round(peak_rss_mb),
        "floor": {
            "p50": percentile(floor.lags_ms[1:], 0.50),
            "p99": percentile(floor.lags_ms[1:], 0.99),
            "max": max(floor.lags_ms[1:]),
        },
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
    }
