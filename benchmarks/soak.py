"""Soak: does a live run stay flat?  ``make soak`` (not part of ``make test``; ``SOAK_ARGS`` passes flags).

What it does, on one machine, in a fresh temporary home:

1. Starts two local single-node Kafka clusters (the brokers the tests use, checking retention every 30 s) and a
   source topic of ``--partitions`` partitions whose ``retention.ms`` is ``--topic-retention`` (20-second
   segments); airmirror gives the remote topic the same.  Exact offset-sync runs leave the metadata DB once
   Kafka deleted their records on both clusters, so with Kafka's default 7-day retention the DB would grow for
   7 days and then stay flat the same way.
2. Starts a producer writing ``--rate`` records a second (``--record-size`` bytes, keyed, stamped now; every
   delivery report checked) and ``airmirror replicate --continuous --for MINUTES`` as a user runs it, with
   ``airmirror.metadata.retention`` at ``--retention`` so that the metadata DB reaches its steady state within
   the run (at the default of 7 days it would keep growing for 7 days, then stay flat the same way).
3. Every ``--sample-seconds`` samples the run's whole process tree (CLI, Spark JVM, Python workers): threads,
   open file descriptors and RSS; and the metadata DB's size on disk (SQLite file and its WAL).
4. Halfway (``--restart-at``), restarts the target broker; the run must keep going.
5. Once the run ends by itself (exit 0 required), stops the producer, runs one plain ``replicate`` to copy what
   was produced after the live run's window, and compares target and source record by record: per partition,
   key, value, headers and timestamp of every record, in order.  Retention deletes each side's oldest records
   on its own schedule, so what both still hold is compared: the source's records must be the target's last
   ones, none missing, none twice, and the source's newest record the target's newest.
6. Judges flatness after ``--flat-after`` minutes: the samples from then on are split in two halves, and each
   series' peak in the second may exceed its peak in the first by at most 2 threads of the airmirror process
   itself, or 10% for the process tree's threads, descriptors and RSS and for the DB's size (:data:`LIMITS`).

Writes ``benchmarks/results/soak-<UTC timestamp>.json`` (the series, the verdicts) and prints a table.
Exit 0 when the run lasted, the series are flat and the target equals the source; 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import psutil
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_io import committed_messages, warm_up_cluster

from airmirror.config.durations import parse_duration
from airmirror.devtools.local_kafka import free_port, start_broker, stop_broker

RESULTS = Path(__file__).with_name("results")
LIMITS = {
    "cli_threads": ("+", 2),
    "threads": ("x", 1.10),
    "fds": ("x", 1.10),
    "rss_mb": ("x", 1.10),
    "db_kb": ("x", 1.10),
}
"""How far a series' peak in the second half of the settled window may rise above its peak in the first half: by a
count (``+``) or a factor (``x``).  Peaks, not single samples, because the series breathe with each batch (the
driver's transient clients, the Spark JVM's cached block-manager thread pools of at most 100 threads each);
a leak shows as a rising peak."""


def log(message: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class SteadyProducer(threading.Thread):
    """Writes ``rate`` records a second round-robin over the partitions until stopped; fails on any failed
    delivery."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int, size: int) -> None:
        super().__init__(daemon=True)
        self.topic, self.partitions, self.rate, self.size = topic, partitions, rate, size
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
        self.halt = threading.Event()
        self.sent = 0
        self.failed: list[str] = []

    def _delivered(self, error, message) -> None:
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


def tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def sample(pid: int, db: Path, started: float) -> dict:
    """One row of the series: the airmirror process's threads, the process tree's threads, descriptors and RSS,
    and the DB's size on disk."""
    threads = fds = rss = 0
    cli_threads = psutil.Process(pid).num_threads()
    for process in tree(pid):
        try:
            threads += process.num_threads()
            fds += process.num_fds()
            rss += process.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    db_bytes = sum(path.stat().st_size for path in (db, db.with_name(db.name + "-wal")) if path.exists())
    return {
        "minute": round((time.monotonic() - started) / 60, 1),
        "cli_threads": cli_threads,
        "threads": threads,
        "fds": fds,
        "rss_mb": round(rss / 2**20, 1),
        "db_kb": round(db_bytes / 1024, 1),
    }


def flatness(series: list[dict], after_minutes: float) -> dict:
    """Per metric: the peak in the first and in the second half of the samples at or after ``after_minutes``,
    and whether the second stays within :data:`LIMITS` of the first."""
    settled = [row for row in series if row["minute"] >= after_minutes]
    half = len(settled) // 2
    verdicts = {}
    for metric, (kind, allowed) in LIMITS.items():
        if half < 1:
            verdicts[metric] = {"flat": False, "why": "fewer than two samples after the flat-after mark"}
            continue
        first, second = max(row[metric] for row in settled[:half]), max(row[metric] for row in settled[half:])
        limit = first + allowed if kind == "+" else first * allowed
        verdicts[metric] = {
            "first_half_peak": first,
            "second_half_peak": second,
            "limit": round(limit, 1),
            "flat": second <= limit,
        }
    return verdicts


def contents(bootstrap: str, topic: str, partition: int) -> list[tuple]:
    """Key, value, headers and timestamp of every committed record of one partition, in offset order."""
    return [
        (m.key(), m.value(), m.headers(), m.timestamp()[1])
        for batch in committed_messages(bootstrap, topic, partition)
        for m in batch
    ]


def compare_copies(source: str, target: str, topic: str, remote_topic: str, partitions: int) -> dict:
    """Record-by-record comparison of what both clusters still hold (see step 5): per partition, the source's
    records must equal the target's last records of the same count."""
    held, equal = {"source_records": 0, "target_records": 0}, True
    for partition in range(partitions):
        copy, original = contents(target, remote_topic, partition), contents(source, topic, partition)
        held["source_records"] += len(original)
        held["target_records"] += len(copy)
        common = min(len(copy), len(original))
        equal = equal and common > 0 and copy[len(copy) - common :] == original[len(original) - common :]
    return {**held, "equal": equal}


def config_text(source: str, target: str, topic: str, db: Path, retention: str) -> str:
    return (
        "\n".join(
            [
                "clusters = src, tgt",
                f"src.bootstrap.servers = {source}",
                f"tgt.bootstrap.servers = {target}",
                "src->tgt.enabled = true",
                f"topics = {topic}",
                "replication.factor = 1",
                "offset.storage.replication.factor = 1",
                "offset-syncs.topic.replication.factor = 1",
                "heartbeats.topic.replication.factor = 1",
                "checkpoints.topic.replication.factor = 1",
                f"airmirror.metadata.db.url = sqlite:///{db}",
                f"airmirror.metadata.retention = {retention}",
                "airmirror.spark.master = local[2]",
            ]
        )
        + "\n"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=20.0, help="length of the live run (default 20)")
    parser.add_argument("--rate", type=int, default=500, help="records produced a second (default 500)")
    parser.add_argument("--record-size", type=int, default=200, help="value bytes (default 200)")
    parser.add_argument("--partitions", type=int, default=6, help="source partitions (default 6)")
    parser.add_argument("--retention", default="1m", help="airmirror.metadata.retention of the run (default 1m)")
    parser.add_argument(
        "--topic-retention", default="1m", help="retention.ms of the source topic, as a duration (default 1m)"
    )
    parser.add_argument("--sample-seconds", type=float, default=60.0, help="sampling interval (default 60)")
    parser.add_argument(
        "--restart-at", type=float, default=None, help="minute of the target broker restart (default: half)"
    )
    parser.add_argument(
        "--flat-after", type=float, default=5.0, help="minutes before the series must be flat (default 5)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    restart_at = args.minutes / 2 if args.restart_at is None else args.restart_at
    home = Path(tempfile.mkdtemp(prefix="airmirror-soak-"))
    os.environ["AIRMIRROR_HOME"] = str(home)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    document: dict = {"timestamp": stamp, "params": vars(args) | {"restart_at": restart_at}, "series": []}
    brokers = []
    try:
        checks = {"log.retention.check.interval.ms": "30000"}
        brokers = [
            start_broker(name, free_port(), home=home, broker_config=checks) for name in ("soak-source", "soak-target")
        ]
        source, target = brokers[0].bootstrap, brokers[1].bootstrap
        for bootstrap in (source, target):
            warm_up_cluster(bootstrap)
        topic, db = "soak", home / "airmirror.db"
        retention_ms = int(parse_duration(args.topic_retention).total_seconds() * 1000)
        new_topic = NewTopic(
            topic, args.partitions, 1, config={"retention.ms": str(retention_ms), "segment.ms": "20000"}
        )
        admin = AdminClient({"bootstrap.servers": source})
        admin.create_topics([new_topic])[topic].result()
        config = home / "mm2.properties"
        config.write_text(config_text(source, target, topic, db, args.retention))
        producer = SteadyProducer(source, topic, args.partitions, args.rate, args.record_size)
        producer.start()
        command = [
            sys.executable,
            "-m",
            "airmirror.cli",
            "replicate",
            str(config),
            "--flow",
            "src->tgt",
            "--continuous",
            "--for",
            f"{int(args.minutes * 60)}s",
            "--json",
        ]
        log(f"home {home}; {' '.join(command[1:])}")
        output = (home / "replicate.log").open("w")
        run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=output, text=True)
        started, restarted = time.monotonic(), False
        while run.poll() is None:
            time.sleep(min(args.sample_seconds, 5) if not document["series"] else args.sample_seconds)
            if run.poll() is not None:
                break
            row = sample(run.pid, db, started)
            document["series"].append(row)
            log(f"{row}")
            if not restarted and row["minute"] >= restart_at:
                log("restarting the target broker")
                brokers[1].restart(timeout=300)
                restarted = True
        report = run.stdout.read()
        document["live_run"] = {
            "exit_code": run.returncode,
            "report": json.loads(report) if run.returncode == 0 else report,
            "target_restarted": restarted,
        }
        producer.stop()
        document["produced"] = producer.sent
        document["delivery_failures"] = producer.failed[:5]
        catch_up = subprocess.run(
            [sys.executable, "-m", "airmirror.cli", "replicate", str(config), "--flow", "src->tgt"],
            capture_output=True,
            text=True,
        )
        document["copy"] = {
            "catch_up_exit_code": catch_up.returncode,
            **compare_copies(source, target, topic, f"src.{topic}", args.partitions),
        }
        document["flatness"] = flatness(document["series"], args.flat_after)
    finally:
        for broker in brokers:
            stop_broker(broker.name, home=home)
    ok = (
        document["live_run"]["exit_code"] == 0
        and document["copy"]["equal"]
        and not document["delivery_failures"]
        and all(v["flat"] for v in document["flatness"].values())
    )
    document["passed"] = ok
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"soak-{stamp}.json"
    path.write_text(json.dumps(document, indent=2) + "\n")
    print("| minute | airmirror threads | tree threads | fds | RSS MB | DB KB |\n|---:|---:|---:|---:|---:|---:|")
    for row in document["series"]:
        print(
            f"| {row['minute']} | {row['cli_threads']} | {row['threads']} | {row['fds']} | {row['rss_mb']} "
            f"| {row['db_kb']} |"
        )
    print(f"\nflat after minute {args.flat_after}: {json.dumps(document['flatness'])}")
    print(
        f"copy: {json.dumps(document['copy'])}; live run exit {document['live_run']['exit_code']}; "
        f"{'PASSED' if ok else 'FAILED'}"
    )
    log(f"results in {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
