"""airmirror vs MirrorMaker 2 vs a raw pipe: the same data, the same brokers, one run.  ``make bench``.

What it does (every number in one run, on one machine: only the ratios between copiers mean anything):

1. Set-up: two local single-node Kafka clusters (``airmirror.devtools.local_kafka``, the brokers the tests use) in a
   fresh temporary home, with their internal topics (consumer offsets, transaction state) created up front
   as on any cluster in service; a source topic loaded with ``--records`` records of ``--record-size``-byte random
   values over ``--partitions`` partitions (keys, a null key every 97th record, two headers, one null, on
   every 10th record, explicit timestamps).
2. Copies, one after another, each into its own target topic on the second cluster:
   - ``raw_pipe``: ``raw_pipe.py``, one Python process with a confluent-kafka consumer and producer, no
     guarantees; the practical ceiling for a librdkafka based copier;
   - ``mm2_default``: MirrorMaker 2 in dedicated mode (``connect-mirror`` at the brokers' Kafka version,
     resolved from Maven Central), default settings except replication factor 1 and no checkpoints;
   - ``mm2_tuned``: the same plus ``tasks.max=2``, producer ``batch.size`` 1 MiB and ``linger.ms`` 20,
     256 MiB producer buffer, 16 MiB partition / 64 MiB fetches, ``max.poll.records`` 5000;
   - ``airmirror``: ``airmirror -v replicate CONFIG --flow ...`` of the whole topic: a fresh process, Spark
     start-up included, exactly-once (one Kafka transaction per partition), read_committed.
3. Verification: per partition, a digest of every record's key, value, headers and timestamp, in offset
   order, must equal the source's; any difference fails the bench (exit 1).
4. Extra airmirror measurements: ``airmirror verify`` (issue 14) of the base copy, right after it, beside it:
   wall time of the whole command and of its Spark job, as records/s and as multiples of the copy's (above 1:
   verify is faster); live latency (1,000 new records produced, then ``airmirror replicate``
   started at once: time from the first produce to all of them visible to read_committed consumers on the
   target) and growth of wall time with the record count (x1, x4) and partition count (P, 4P).
5. Live case (issues 11 and 22, ``live.py``): ``--live-copiers`` (default all three: airmirror ``replicate
   --continuous``, ``mm2_tuned`` and ``mm2_eos``, MM2 tuned with exactly-once enabled), one after the other, after
   ``--live-warm-up-seconds`` (default 30) of back-to-back transactions on both clusters (a fresh broker's
   transaction paths run slowly until its JIT compiled them: without it the first copier pays), each
   running (and past a first warm-up record) while a producer writes ``--live-rate`` records a second (default
   5,000 x ``--record-size`` over ``--partitions``) for ``--live-seconds`` (default 60); an independent
   read_committed consumer on the target, polling without waits of its own, notes per record visible time minus
   produce time.  Reported as ``live_lag_ms``: p50, p99, max, mean, the longest gap between two arrivals
   (``longest_gap_ms``), when the longest gaps of 300 ms or more came (``long_gaps``) and the CPU seconds of each
   copier's process tree during the case; every record must arrive exactly once.  Then the same at whole-cluster
   scale (issue 35, ``live_wide_lag_ms``, unless ``--skip-live-wide``): ``--live-wide-rate`` records a second
   (default 2,000) over ``--live-wide-partitions`` (default 2,000), its watches fetching in batches (64 KiB or 20
   ms).  Each watch reads in one process per ``--live-watch-partitions`` partitions (default 1,000); each case's
   topics are deleted after it.
6. Big partition (issue 9): one source partition of ``--big-partition-records`` N x 100-byte records (default
   10,000,000, stamped with their produce time) and, first, the same at N/10, each copied by one fresh
   ``airmirror replicate`` with the target producer's ``transaction.timeout.ms`` at 15,000 (so chunk
   transactions of at most 5 s) and verified like the other copies.  Reported: wall time, records/s, MB/s, the
   peak RSS of the whole process tree of each run (CLI, Spark JVM, Python workers, also per role) and
   ``peak_rss_ratio_big_vs_small``, which issue 9 requires to stay within 1.2 (a chunked copy must not grow
   with the range).  A copy's memory over time (``rss_timeline``, one row a second) is in the JSON.
7. Partition scaling (issue 22): the same ``--partition-scaling-records`` records (default 40,000 x 100 B) over
   FEW and over MANY partitions (``--partition-scaling-partitions``, default 20 and 2,000, in topics of 10), one
   flow (``topics = <prefix>-.*``) each: a first copy, an incremental batch (one new record in every partition)
   and a batch with nothing new, each a fresh ``airmirror replicate``.  Reported: wall time of each batch
   (``copy_job_s`` beside it) and ``wall_ratios`` MANY/FEW, which issue 22 wants at most 2.  After each batch
   every remote partition's digest must equal its source partition's (all partitions read by one consumer).
   Then, as a control, how long the target broker takes to bring up as many new partitions again
   (``broker_creation_s``: until a topic created right after them accepts a write), which a first copy into an
   empty cluster waits for, and the first copy's ratio without it (``first_copy_ratio_less_broker_creation``).
8. Schema ids (issue 24, ``avro_data.py``): a real schema registry per cluster (Apicurio, the target's padded so
   ids differ) and a topic of ``--records`` Avro values of about ``--record-size`` bytes over ``--partitions``,
   framed as confluent-kafka's AvroSerializer frames them (its schema registered by a real AvroSerializer), copied
   by fresh ``airmirror replicate`` runs with ``airmirror.schema.ids = off`` and ``= translate`` (each id
   rewritten per record), alternating over ``--schema-ids-rounds`` rounds (off first in odd rounds, translate
   first in even ones), each into its own remote topic.  An ``off`` copy must equal the source; a ``translate``
   copy must equal the source with every value naming the target registry's id, and its first records must
   decode with AvroDeserializer against the target registry alone.  Reported as ``schema_ids``: each run's
   figures, and translate over off in throughput (``ratio_steady``: the copy jobs; ``ratio_wall``: whole runs)
   and in CPU seconds (``cpu_ratio``: the process tree; ``task_cpu_ratio``: the copy tasks' Python workers, where
   ids are rewritten, the figure least disturbed by other load); issue 24's goal is ``ratio_steady`` >= 0.9.
9. Transforms (issue 41, ``json_data.py``): a topic of ``--records`` JSON values of about ``--record-size`` bytes over
   ``--partitions``, each with two personal headers and every tenth with a test marker, copied by fresh runs of
   airmirror untransformed, airmirror through ``MaskField$Value`` on two fields, airmirror through a header chain
   (``Filter`` on a ``HasHeaderKey`` predicate, ``DropHeaders``, ``InsertHeader``), and MM2 tuned through the same
   SMTs (with ``header.converter = SimpleHeaderConverter``, without which MM2's InsertHeader fails), each into its
   own remote topic, over ``--transforms-rounds`` rounds (default 2; in even rounds in the reverse order).  Every copy
   must equal the copy worked out from the source.  Reported as ``transforms``: each run's figures, and over the
   seconds summed over the rounds the header chain airmirror over MM2 (``header_chain_vs_mm2_tuned``, wall and
   steady, issue 41's goal 1.2; steady here is ``write_window_s`` for both copiers, the one figure measured alike:
   airmirror's ``steady_s`` is its copy job, which begins with its Python workers' start and its fencing, before its
   first write, and MM2's begins at its first write; that job-based ratio is ``steady_job``) and MaskField over
   untransformed (``mask_vs_plain``, steady, goal 0.6).  Then the
   Avro case (``avro_data.py``, a real registry per cluster): ``--records`` Avro values copied with ids translated,
   without a chain and through ``MaskField$Value`` on two fields, each checked record by record and decoded with the
   target registry alone; reported as ``transforms.avro`` with ``mask_vs_ids`` (MM2 has no such run: its field
   SMTs fail on the bytes it hands them).
10. Report: ``benchmarks/results/<UTC timestamp>.json`` and a Markdown table on stdout.

Numbers per copier:
- ``wall_s``: process start to every record visible on the target (last stable offsets polled every 0.1 s)
  and, for copiers that end by themselves, process exit.  Includes JVM / Spark start-up.
- ``steady_mb_s``: payload (key + value bytes, MB = 10^6 bytes) over the copy itself, start-up excluded:
  raw_pipe from its first consumed record to its final flush; MM2 from the first record written on the
  target to the last (high watermarks polled every 0.1 s); airmirror the Spark copy job (every range read,
  written and committed), as logged by ``airmirror.replication.spark.copy_job``.  ``write_window_s`` is the
  polled first-to-last-write window for every copier, for a like-for-like view, and ``first_write_s`` when
  the first record landed (start-up as seen from the target).
- ``records_per_s``: records / wall_s.  ``peak_rss_mb``: peak of the summed RSS of the copier's process
  tree (for airmirror: CLI, Spark JVM and Python workers; shared pages count once per process).
- ``cpu_s``: CPU seconds (user + system) of the copier's process tree over ``wall_s`` (start-up included,
  sampled every 0.1 s); ``cpu_s_per_gb``: that over the payload in GB (10^9 bytes).
- ``ratios``: airmirror throughput over total wall time divided by the other copier's (higher is better);
  ``steady_ratios`` the same over ``steady_mb_s``; ``cpu_per_gb_ratios`` airmirror's ``cpu_s_per_gb`` divided by
  the other copier's (lower is better: at most 1, airmirror spends no more CPU per GB).

The machine should be otherwise idle: on a shared one, run the bench twice and compare (``load_avg_at_start``
is recorded).  Nothing leaves 127.0.0.1; the brokers' data lives in a temporary directory, removed at the end.

Usage (defaults: 500,000 x 1 KiB x 6 partitions, then the big partition; the whole default run takes 10 minutes)::

    make bench
    make bench BENCH_ARGS="--records 100000 --skip-scaling"
    .venv/bin/python benchmarks/bench.py --copiers airmirror,raw_pipe --skip-latency --skip-scaling

Flags: ``--records N``, ``--record-size S``, ``--partitions P``, ``--copiers LIST`` (any of raw_pipe,
mm2_default, mm2_tuned, airmirror), ``--spark-master`` (airmirror's default ``local[*]`` otherwise),
``--skip-latency``, ``--skip-scaling``, ``--live-rate R``, ``--live-seconds S``, ``--live-copiers LIST`` (any of
airmirror, mm2_tuned, mm2_eos), ``--skip-live``,
``--big-partition-records N`` (the small run is N/10),
``--skip-big-partition``, ``--big-partition-only`` (no main load, copiers, latency or scaling),
``--partition-scaling-records N``, ``--partition-scaling-partitions FEW,MANY``, ``--skip-partition-scaling``,
``--partition-scaling-only``, ``--schema-ids-rounds N``, ``--skip-schema-ids``, ``--schema-ids-only`` (only the
schema-id case, over ``--records`` x ``--record-size`` x ``--partitions``), ``--skip-transforms``,
``--transforms-only`` (likewise), ``--transforms-rounds N``, ``--live-only`` (only the live case),
``--timeout``, ``--settle-seconds`` (pause before each copier run, default 3), ``--results-dir``, ``--keep``
(keep brokers' data and logs).

The big-partition case alone, at its defaults (loads and digests 11 million records; about 6 minutes on 2 cores)::

    .venv/bin/python benchmarks/bench.py --big-partition-only

The partition-scaling case alone (issue 22)::

    .venv/bin/python benchmarks/bench.py --partition-scaling-only

The schema-id case alone (issue 24)::

    .venv/bin/python benchmarks/bench.py --schema-ids-only

The transform case alone (issue 41)::

    .venv/bin/python benchmarks/bench.py --transforms-only
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TypeVar

import psutil
from avro_data import (
    AVRO_MASK_CHAIN,
    AvroValues,
    Registries,
    decoded_values,
    latest_id,
    masked_record,
    masked_reframed,
    start_registries,
    stop_registries,
)
from copiers import CopierRun, TreeUsage, airmirror_properties, mm2_properties, run_copier
from json_data import (
    HEADER_CHAIN,
    MASK_CHAIN,
    MM2_HEADER_CONVERTER,
    JsonValues,
    through_header_chain,
    through_mask_chain,
)
from json_data import headers as json_headers
from kafka_io import (
    TargetWatch,
    create_topic,
    create_topics,
    end_offsets,
    load_topic,
    offsets_consumer,
    partition_creation_s,
    reframed,
    topic_digest,
    topics_digest,
    warm_up_cluster,
    warm_up_transactions,
)
from live import run_live

from airmirror.devtools.local_kafka import KAFKA_VERSION, free_port, start_broker, stop_broker
from airmirror.devtools.mm2 import mm2_command, write_mm2_files

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
COPIERS = ("raw_pipe", "mm2_default", "mm2_tuned", "airmirror")
LIVE_COPIERS = ("airmirror", "mm2_tuned", "mm2_eos")
LATENCY_RECORDS = 1000
BIG_RECORD_SIZE = 100
BIG_RSS_RATIO_LIMIT = 1.2
BIG_RUN_FIGURES = ("records", "wall_s", "records_per_s", "mb_s", "steady_mb_s", "peak_rss_mb", "peak_rss_by_role_mb")
VERIFY_JOB_LOG = re.compile(
    r"verify job: \d+ partitions, (?P<records>\d+) source records, \d+ target records in (?P<seconds>[\d.]+) s"
)
PARTITION_SCALING_TOPIC_PARTITIONS = 10
PARTITION_SCALING_RECORD_SIZE = 100
PARTITION_SCALING_BATCHES = ("first_copy", "incremental", "nothing_new")
PARTITION_SCALING_RATIO_TARGET = 2.0
SCHEMA_IDS_MODES = ("off", "translate")
SCHEMA_IDS_GOAL = 0.9
SCHEMA_IDS_DECODED = 3
TRANSFORMS_TOPIC = "bench-json"
TRANSFORMS_RUNS = ("airmirror_plain", "airmirror_mask", "airmirror_header_chain", "mm2_tuned_header_chain")
"""The transform case's runs, in this order in odd rounds and the reverse in even ones."""
TRANSFORMS_VS_MM2_GOAL = 1.2
"""Issue 41: airmirror through the header chain over MM2 tuned through the same SMTs, wall and steady."""
TRANSFORMS_MASK_GOAL = 0.6
"""Issue 41: airmirror masking two JSON fields over airmirror untransformed, steady."""
AVRO_TRANSFORMS_TOPIC = "bench-avro-mask"
AVRO_TRANSFORMS_RUNS = ("airmirror_avro_ids", "airmirror_avro_mask")
"""The Avro transform case's runs: ids translated only, then ids translated and two fields masked."""
Run = TypeVar("Run")
COPY_JOB_LOG = re.compile(
    r"copy job of batch \d+: (?P<ranges>\d+) ranges, (?P<records>\d+) records, (?P<bytes>\d+) bytes"
    r" in (?P<seconds>[\d.]+) s"
)


@dataclass
class Clusters:
    source: str
    target: str


@dataclass
class SourceTopic:
    name: str
    partitions: int
    records: int
    payload_bytes: int
    digest: list[tuple[int, str]]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def machine_facts() -> dict:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
        "os": platform.platform(),
        "python": platform.python_version(),
        "java": subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0],
        "kafka": KAFKA_VERSION,
        "git_commit": subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "git_dirty": bool(
            subprocess.run(
                ["git", "-C", str(REPO), "status", "--porcelain", "--", "include"], capture_output=True, text=True
            ).stdout.strip()
        ),
    }


def prepare_source(
    clusters: Clusters,
    name: str,
    partitions: int,
    records: int,
    size: int,
    stamp_now: bool = False,
    values: Callable[[int], bytes] | None = None,
    headers: Callable[[int], list | None] | None = None,
) -> SourceTopic:
    """A source topic loaded by :func:`kafka_io.load_topic` (``values`` and ``headers`` as there) and digested."""
    started = time.monotonic()
    create_topic(clusters.source, name, partitions)
    payload = load_topic(
        clusters.source, name, partitions, records, size, stamp_now=stamp_now, values=values, headers=headers
    )
    loaded = time.monotonic()
    digest = topic_digest(clusters.source, name, partitions)
    log(
        f"loaded {name}: {records} records, {payload / 1e6:.0f} MB in {loaded - started:.1f} s "
        f"(digest {time.monotonic() - loaded:.1f} s)"
    )
    return SourceTopic(name, partitions, records, payload, digest)


def alternating_rounds(rounds: int, runs: Sequence[Run]) -> Iterator[tuple[int, Run]]:
    """``(round, run)``: each of ``runs`` once a round, in order in odd rounds and in reverse in even ones, so that no
    run always comes first (the one after a pause, on brokers that idled) or last."""
    for round_ in range(1, rounds + 1):
        for run in runs if round_ % 2 else runs[::-1]:
            yield round_, run


def verify(clusters: Clusters, source: SourceTopic, target_topic: str) -> None:
    copy = topic_digest(clusters.target, target_topic, source.partitions)
    wrong = [p for p in range(source.partitions) if copy[p] != source.digest[p]]
    if wrong:
        details = ", ".join(f"p{p}: {copy[p][0]} records vs {source.digest[p][0]}" for p in wrong)
        raise SystemExit(f"VERIFICATION FAILED: {target_topic} differs from {source.name} in partitions {details}")
    log(
        f"verified {target_topic}: {sum(c for c, _ in copy)} records, "
        f"digests equal in all {source.partitions} partitions"
    )


def expected_counts(source: SourceTopic) -> list[int]:
    return [count for count, _ in source.digest]


def summarize(run: CopierRun, source: SourceTopic, steady_s: float) -> dict:
    window = (run.all_written_s or 0) - (run.first_write_s or 0)
    return {
        "wall_s": round(run.wall_s, 2),
        "steady_s": round(steady_s, 2),
        "steady_mb_s": round(source.payload_bytes / 1e6 / steady_s, 1),
        "records_per_s": round(source.records / run.wall_s),
        "peak_rss_mb": round(run.peak_rss_mb),
        "cpu_s": round(run.cpu_s, 1),
        "cpu_s_per_gb": round(run.cpu_s / (source.payload_bytes / 1e9), 1),
        "mb_s_total": round(source.payload_bytes / 1e6 / run.wall_s, 1),
        "first_write_s": round(run.first_write_s or 0, 2),
        "write_window_s": round(window, 2),
        "write_window_mb_s": round(source.payload_bytes / 1e6 / window, 1) if window > 0 else None,
    }


def run_raw_pipe(clusters: Clusters, source: SourceTopic, workdir: Path, timeout: float) -> dict:
    target_topic = f"raw.{source.name}"
    create_topic(clusters.target, target_topic, source.partitions)
    command = [
        sys.executable,
        str(HERE / "raw_pipe.py"),
        clusters.source,
        source.name,
        str(source.partitions),
        clusters.target,
        target_topic,
    ]
    watch = TargetWatch(clusters.target, target_topic, expected_counts(source))
    run = run_copier("raw_pipe", command, watch, workdir, ends_by_itself=True, timeout=timeout)
    inner = json.loads(run.stdout.strip().splitlines()[-1])
    result = summarize(run, source, inner["done_s"] - inner["first_s"])
    verify(clusters, source, target_topic)
    return result


def run_mm2(
    clusters: Clusters,
    source: SourceTopic,
    workdir: Path,
    timeout: float,
    tuned: bool,
    *,
    name: str | None = None,
    extra_lines: tuple[str, ...] = (),
    expected: SourceTopic | None = None,
) -> dict:
    """One MM2 run (default or tuned) of the whole source topic, measured and checked against ``expected`` (what the
    target must hold: by default the source itself); ``extra_lines`` (``{source}`` and ``{target}`` replaced by the
    aliases) go last in its file, and ``name`` (``mm2_tuned`` or ``mm2_default`` by default) names the run and,
    first letters, its aliases."""
    name = name or ("mm2_tuned" if tuned else "mm2_default")
    source_alias = {"mm2_tuned": "mmt", "mm2_default": "mmd"}.get(name, name.replace("_", ""))
    target_alias = f"{source_alias}t"
    expected = expected or source
    target_topic = f"{source_alias}.{source.name}"
    extra = [line.format(source=source_alias, target=target_alias) for line in extra_lines]
    properties = mm2_properties(
        source_alias, target_alias, clusters.source, clusters.target, source.name, tuned, extra=extra
    )
    config, log_config = write_mm2_files(workdir, name, properties)
    watch = TargetWatch(clusters.target, target_topic, expected_counts(expected))
    run = run_copier(
        name, mm2_command(config, log_config, target_alias), watch, workdir, ends_by_itself=False, timeout=timeout
    )
    assert run.first_write_s is not None and run.all_written_s is not None
    result = summarize(run, source, run.all_written_s - run.first_write_s)
    verify(clusters, expected, target_topic)
    return result


def airmirror_command(config: Path, flow: str) -> list[str]:
    return [str(Path(sys.executable).parent / "airmirror"), "-v", "replicate", str(config), "--flow", flow, "--json"]


def copy_job_seconds(stderr: str) -> float:
    matches = list(COPY_JOB_LOG.finditer(stderr))
    if not matches:
        raise RuntimeError("airmirror logged no copy job timing (expected 'copy job of batch ...' at INFO)")
    return float(matches[-1].group("seconds"))


@dataclass
class AirmirrorFlow:
    source_alias: str
    target_alias: str
    config: Path

    @property
    def flow(self) -> str:
        return f"{self.source_alias}->{self.target_alias}"

    def remote_topic(self, topic: str) -> str:
        return f"{self.source_alias}.{topic}"


def airmirror_flow(
    clusters: Clusters,
    source: SourceTopic,
    workdir: Path,
    alias: str,
    master: str | None,
    target_producer: dict[str, object] | None = None,
    extra_lines: tuple[str, ...] = (),
) -> AirmirrorFlow:
    """A one-flow config ``alias->{alias}t``; ``target_producer`` settings go in as ``{target}.producer.KEY``, and
    ``extra_lines`` (``{source}`` and ``{target}`` replaced by the aliases) after them."""
    config = workdir / f"{alias}.properties"
    target_alias = f"{alias}t"
    extra = [f"{target_alias}.producer.{key} = {value}" for key, value in (target_producer or {}).items()]
    extra += [line.format(source=alias, target=target_alias) for line in extra_lines]
    config.write_text(
        airmirror_properties(
            alias, target_alias, clusters.source, clusters.target, source.name, workdir / f"{alias}.db", master, extra
        )
    )
    return AirmirrorFlow(alias, target_alias, config)


def run_airmirror(
    clusters: Clusters,
    source: SourceTopic,
    flow: AirmirrorFlow,
    workdir: Path,
    timeout: float,
    name: str = "airmirror",
    timeline: bool = False,
    verify_copy: bool = True,
    expected: SourceTopic | None = None,
) -> dict:
    """One fresh ``airmirror replicate`` of the whole source topic, measured; the copy is checked against
    ``expected`` (what the target must hold: by default the source itself) unless ``verify_copy`` is false (the
    caller checks it)."""
    expected = expected or source
    watch = TargetWatch(clusters.target, flow.remote_topic(source.name), expected_counts(expected))
    run = run_copier(
        name, airmirror_command(flow.config, flow.flow), watch, workdir, ends_by_itself=True, timeout=timeout
    )
    report = json.loads(run.stdout)
    if report["records"] != expected.records:
        raise SystemExit(
            f"VERIFICATION FAILED: airmirror reports {report['records']} records copied, expected {expected.records}"
        )
    result = summarize(run, source, copy_job_seconds(run.stderr))
    result["peak_rss_by_role_mb"] = run.peak_rss_by_role_mb
    result["cpu_s_by_role"] = run.cpu_s_by_role
    if timeline:
        result["rss_timeline"] = run.rss_timeline
    if verify_copy:
        verify(clusters, expected, flow.remote_topic(source.name))
    return result


def run_verify(source: SourceTopic, flow: AirmirrorFlow, copied: dict, timeout: float) -> dict:
    """``airmirror verify`` of the flow the base run copied, beside that copy: wall time of the whole command and
    of its Spark job, in records/s, and the ratios to the copy's (above 1: verify is faster)."""
    command = [
        str(Path(sys.executable).parent / "airmirror"),
        "-v",
        "verify",
        str(flow.config),
        "--flow",
        flow.flow,
        "--json",
    ]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    wall_s = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"VERIFICATION FAILED: airmirror verify exited {done.returncode}: {done.stderr[-2000:]}")
    job = VERIFY_JOB_LOG.search(done.stderr)
    if job is None or int(job.group("records")) != source.records:
        raise SystemExit(
            f"VERIFICATION FAILED: airmirror verify compared {job and job.group('records')} records, "
            f"expected {source.records}"
        )
    job_s = float(job.group("seconds"))
    return {
        "wall_s": round(wall_s, 2),
        "job_s": round(job_s, 2),
        "records_per_s": round(source.records / wall_s),
        "job_records_per_s": round(source.records / job_s),
        "vs_replicate_wall": round(copied["wall_s"] / wall_s, 2),
        "vs_copy_job": round(copied["steady_s"] / job_s, 2),
    }


def run_latency(
    clusters: Clusters, source: SourceTopic, flow: AirmirrorFlow, size: int, workdir: Path, timeout: float
) -> dict:
    """1,000 new records, then an immediate ``airmirror replicate``: produce-to-visible time on the target."""
    remote = flow.remote_topic(source.name)
    consumer = offsets_consumer(clusters.target, committed=True)
    try:
        before = end_offsets(consumer, remote, source.partitions)
    finally:
        consumer.close()
    new_per_partition = [
        LATENCY_RECORDS // source.partitions + (1 if p < LATENCY_RECORDS % source.partitions else 0)
        for p in range(source.partitions)
    ]
    watch = TargetWatch(
        clusters.target,
        remote,
        [b + n for b, n in zip(before, new_per_partition, strict=True)],
        interval=0.05,
        base=before,
    )
    produce_started = time.monotonic()
    load_topic(clusters.source, source.name, source.partitions, LATENCY_RECORDS, size, first=source.records)
    produced = time.monotonic()
    run = run_copier(
        "airmirror_latency",
        airmirror_command(flow.config, flow.flow),
        watch,
        workdir,
        ends_by_itself=True,
        timeout=timeout,
    )
    assert watch.all_visible is not None
    grown = SourceTopic(
        source.name,
        source.partitions,
        source.records + LATENCY_RECORDS,
        0,
        topic_digest(clusters.source, source.name, source.partitions),
    )
    verify(clusters, grown, remote)
    return {
        "records": LATENCY_RECORDS,
        "produce_s": round(produced - produce_started, 2),
        "produce_to_visible_s": round(watch.all_visible - produce_started, 2),
        "replicate_wall_s": round(run.wall_s, 2),
        "copy_job_s": round(copy_job_seconds(run.stderr), 2),
    }


def run_live_cases(clusters: Clusters, args: argparse.Namespace, workdir: Path, document: dict) -> None:
    """Warm the brokers' transaction paths up (``--live-warm-up-seconds``), then the live case at ``--partitions``
    (``live_lag_ms``) and, unless ``--skip-live-wide``, at ``--live-wide-partitions`` (``live_wide_lag_ms``)."""
    if args.live_warm_up_seconds:
        counts = [warm_up_transactions(b, args.live_warm_up_seconds) for b in (clusters.source, clusters.target)]
        log(f"live warm-up: {' and '.join(map(str, counts))} transactions in {args.live_warm_up_seconds:.0f} s each")
    document["live_lag_ms"] = run_live_case(clusters, args, workdir, args.partitions, args.live_rate, "live")
    if not args.skip_live_wide:
        document["live_wide_lag_ms"] = run_live_case(
            clusters, args, workdir, args.live_wide_partitions, args.live_wide_rate, "live-wide", batched_watch=True
        )


def run_live_case(
    clusters: Clusters,
    args: argparse.Namespace,
    workdir: Path,
    partitions: int,
    rate: int,
    label: str,
    batched_watch: bool = False,
) -> dict:
    """The ``--live-copiers`` under the same steady load of ``rate`` records/s over ``partitions`` partitions, one
    after the other (``live.py``): airmirror ``replicate --continuous``, MM2 tuned, and MM2 tuned with exactly-once
    enabled; each watch reads in one process per ``--live-watch-partitions`` partitions (with batched fetches if
    ``batched_watch``)."""
    load = {"partitions": partitions, "rate": rate, "size": args.record_size, "seconds": args.live_seconds}
    processes = -(-partitions // args.live_watch_partitions)
    results = {}
    for name in args.live_copiers:
        time.sleep(args.settle_seconds)
        log(f"{label} {name} ...")
        live_dir = workdir / f"{label}-{name}"
        live_dir.mkdir()
        command, topic, remote = live_copier(name, clusters, args, live_dir, label)
        try:
            results[name] = run_live(
                name,
                command,
                clusters.source,
                clusters.target,
                topic,
                remote,
                workdir=live_dir,
                watch_processes=processes,
                batched_watch=batched_watch,
                **load,
            )
        except RuntimeError as error:  # records missing or twice, or no copy at all: the other copiers still run
            results[name] = {"error": str(error)}
        log(f"{label} {name}: {results[name]}")
    return results


def live_copier(
    name: str, clusters: Clusters, args: argparse.Namespace, workdir: Path, label: str
) -> tuple[list[str], str, str]:
    """``(command, source topic, remote topic)`` of one live copier, each with its own topic (named after the case's
    ``label``) and aliases."""
    alias, target_alias = f"live{name.replace('_', '')}", f"live{name.replace('_', '')}t"
    topic = f"{label}-{name.replace('_', '-')}"
    if name == "airmirror":
        config = workdir / "live-air.properties"
        db = workdir / "live-air.db"
        config.write_text(
            airmirror_properties(alias, target_alias, clusters.source, clusters.target, topic, db, args.spark_master)
        )
        command = [str(Path(sys.executable).parent / "airmirror"), "-v", "replicate", str(config)]
        command += ["--flow", f"{alias}->{target_alias}", "--continuous"]
    else:
        rest_port = free_port() if name == "mm2_eos" else None
        properties = mm2_properties(
            alias, target_alias, clusters.source, clusters.target, topic, tuned=True, exactly_once_rest_port=rest_port
        )
        command = mm2_command(*write_mm2_files(workdir, name, properties), target_alias)
    return command, topic, f"{alias}.{topic}"


def run_scaling(clusters: Clusters, base: dict, args: argparse.Namespace, workdir: Path) -> dict:
    """airmirror wall time at x4 records and x4 partitions, against the main run (x1, P partitions)."""
    out = {
        "base": {
            "records": args.records,
            "partitions": args.partitions,
            "wall_s": base["wall_s"],
            "steady_mb_s": base["steady_mb_s"],
        }
    }
    for key, records, partitions in (
        ("records_x4", args.records * 4, args.partitions),
        ("partitions_x4", args.records, args.partitions * 4),
    ):
        time.sleep(args.settle_seconds)
        source = prepare_source(clusters, f"bench-{key.replace('_', '-')}", partitions, records, args.record_size)
        flow = airmirror_flow(clusters, source, workdir, f"air{key.replace('_', '')}", args.spark_master)
        result = run_airmirror(clusters, source, flow, workdir, args.timeout * 4, name=f"airmirror_{key}")
        log(f"airmirror {key}: {result['wall_s']} s wall, {result['steady_mb_s']} MB/s steady")
        out[key] = {
            "records": records,
            "partitions": partitions,
            "wall_s": result["wall_s"],
            "steady_mb_s": result["steady_mb_s"],
            "peak_rss_mb": result["peak_rss_mb"],
            "wall_growth": round(result["wall_s"] / base["wall_s"], 2),
        }
    return out


def timed_replicate(flow: AirmirrorFlow, expected_records: int, timeout: float) -> dict:
    """One fresh ``airmirror -v replicate`` of the flow: its wall time (process start to exit, Spark start-up
    included) and its copy job's seconds (``None`` when it ran none); it must report ``expected_records``."""
    started = time.monotonic()
    done = subprocess.run(airmirror_command(flow.config, flow.flow), capture_output=True, text=True, timeout=timeout)
    wall_s = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"airmirror replicate of {flow.flow} exited {done.returncode}: {done.stderr[-2000:]}")
    copied = json.loads(done.stdout)["records"]
    if copied != expected_records:
        raise SystemExit(f"VERIFICATION FAILED: {flow.flow} copied {copied} records, expected {expected_records}")
    job = list(COPY_JOB_LOG.finditer(done.stderr))
    return {"wall_s": round(wall_s, 2), "copy_job_s": float(job[-1].group("seconds")) if job else None}


def partition_scaling_run(clusters: Clusters, args: argparse.Namespace, workdir: Path, partitions: int) -> dict:
    """The same ``--partition-scaling-records`` over ``partitions`` partitions (topics of
    :data:`PARTITION_SCALING_TOPIC_PARTITIONS`), copied by one flow: a first copy, an incremental batch (one new
    record in every partition) and a batch with nothing new, each a fresh ``airmirror replicate``.  After each
    batch every remote partition's digest must equal its source partition's."""
    per_topic = PARTITION_SCALING_TOPIC_PARTITIONS
    alias = f"ps{partitions}"
    topics = [f"{alias}-{i:04d}" for i in range(partitions // per_topic)]
    create_topics(clusters.source, topics, per_topic)
    started = time.monotonic()
    for i, topic in enumerate(topics):
        share = args.partition_scaling_records // len(topics) + (
            1 if i < args.partition_scaling_records % len(topics) else 0
        )
        load_topic(clusters.source, topic, per_topic, share, PARTITION_SCALING_RECORD_SIZE)
    log(
        f"loaded {len(topics)} topics x {per_topic} partitions, {args.partition_scaling_records} records "
        f"in {time.monotonic() - started:.1f} s"
    )
    flow = AirmirrorFlow(alias, f"{alias}t", workdir / f"{alias}.properties")
    flow.config.write_text(
        airmirror_properties(
            alias,
            flow.target_alias,
            clusters.source,
            clusters.target,
            f"{alias}-.*",
            workdir / f"{alias}.db",
            args.spark_master,
        )
    )
    timeout = args.timeout * max(1.0, partitions / 200)
    result: dict = {"partitions": partitions, "topics": len(topics)}
    for batch, new_records in zip(
        PARTITION_SCALING_BATCHES, (args.partition_scaling_records, partitions, 0), strict=True
    ):
        if batch == "incremental":
            for topic in topics:
                load_topic(
                    clusters.source,
                    topic,
                    per_topic,
                    per_topic,
                    PARTITION_SCALING_RECORD_SIZE,
                    first=args.partition_scaling_records,
                )
        time.sleep(args.settle_seconds)
        result[batch] = timed_replicate(flow, new_records, timeout)
        sources = topics_digest(clusters.source, topics, per_topic)
        copies = topics_digest(clusters.target, [flow.remote_topic(t) for t in topics], per_topic)
        wrong = [f"{topics[i // per_topic]}-{i % per_topic}" for i, digest in enumerate(sources) if copies[i] != digest]
        if wrong:
            raise SystemExit(
                f"VERIFICATION FAILED: after the {batch} batch, remote partitions differ from {', '.join(wrong[:10])}"
            )
        log(f"partition scaling, {partitions} partitions, {batch}: {result[batch]}")
    result["broker_creation_s"] = round(
        partition_creation_s(clusters.target, [f"{alias}-probe-{i:04d}" for i in range(len(topics))], per_topic), 2
    )
    log(
        f"partition scaling, {partitions} partitions: the target broker brings up {partitions} new partitions "
        f"in {result['broker_creation_s']} s"
    )
    return result


def run_partition_scaling(clusters: Clusters, args: argparse.Namespace, workdir: Path) -> dict:
    """Issue 22: the same records over few and over many partitions; per batch kind the wall time of each and
    the ratio many/few, which issue 22 bounds at :data:`PARTITION_SCALING_RATIO_TARGET`."""
    few, many = (partition_scaling_run(clusters, args, workdir, p) for p in args.partition_scaling_partitions)
    return {
        "records": args.partition_scaling_records,
        "record_size": PARTITION_SCALING_RECORD_SIZE,
        "partitions_per_topic": PARTITION_SCALING_TOPIC_PARTITIONS,
        "few": few,
        "many": many,
        "wall_ratios": {
            batch: ratio(many[batch]["wall_s"], few[batch]["wall_s"]) for batch in PARTITION_SCALING_BATCHES
        },
        "first_copy_ratio_less_broker_creation": ratio(
            many["first_copy"]["wall_s"] - many["broker_creation_s"],
            few["first_copy"]["wall_s"] - few["broker_creation_s"],
        ),
        "ratio_target": PARTITION_SCALING_RATIO_TARGET,
    }


def run_big_partition(clusters: Clusters, args: argparse.Namespace, workdir: Path) -> dict:
    """Issue 9: one partition of N x 100 B records and of N/10, each copied by a fresh ``airmirror replicate``.

    The peak RSS of the whole process tree must not grow with the partition: ``peak_rss_ratio_big_vs_small``
    (N run over N/10 run) is what issue 9 bounds at :data:`BIG_RSS_RATIO_LIMIT`.  The source is loaded just
    before each copy and deleted from neither cluster (the brokers' home is removed at the end).
    """
    runs: dict[str, dict] = {}
    for label, records in (("small", args.big_partition_records // 10), ("big", args.big_partition_records)):
        time.sleep(args.settle_seconds)
        source = prepare_source(clusters, f"bench-big-{label}", 1, records, BIG_RECORD_SIZE, stamp_now=True)
        flow = airmirror_flow(
            clusters,
            source,
            workdir,
            f"airbig{label}",
            args.spark_master,
        )  # the flow's default settings, as a user's
        time.sleep(args.settle_seconds)
        log(f"airmirror big partition ({label}, {records:,} records) ...")
        timeout = args.timeout * max(1.0, records / 1_000_000)
        result = run_airmirror(clusters, source, flow, workdir, timeout, name=f"airmirror_big_{label}", timeline=True)
        result["records"] = records
        result["payload_mb"] = round(source.payload_bytes / 1e6, 1)
        result["mb_s"] = round(source.payload_bytes / 1e6 / result["wall_s"], 2)
        runs[label] = result
        log(
            f"airmirror big partition ({label}): {result['wall_s']} s wall, {result['records_per_s']:,} records/s, "
            f"{result['peak_rss_mb']} MB peak RSS {result['peak_rss_by_role_mb']}"
        )
    big, small = runs["big"], runs["small"]
    rss_ratio = ratio(big["peak_rss_mb"], small["peak_rss_mb"])
    return {
        "records": big["records"],
        "small_records": small["records"],
        "record_size": BIG_RECORD_SIZE,
        "partitions": 1,
        "payload_mb": big["payload_mb"],
        "wall_s": big["wall_s"],
        "records_per_s": big["records_per_s"],
        "mb_s": big["mb_s"],
        "steady_mb_s": big["steady_mb_s"],
        "peak_rss_mb": big["peak_rss_mb"],
        "peak_rss_by_role_mb": big["peak_rss_by_role_mb"],
        "small_wall_s": small["wall_s"],
        "small_records_per_s": small["records_per_s"],
        "small_mb_s": small["mb_s"],
        "small_steady_mb_s": small["steady_mb_s"],
        "small_peak_rss_mb": small["peak_rss_mb"],
        "small_peak_rss_by_role_mb": small["peak_rss_by_role_mb"],
        "peak_rss_ratio_big_vs_small": rss_ratio,
        "peak_rss_ratio_limit": BIG_RSS_RATIO_LIMIT,
        "peak_rss_within_limit": rss_ratio <= BIG_RSS_RATIO_LIMIT,
        "rss_timeline_columns": ["s", "total", *TreeUsage.ROLES],
        "rss_timeline": big["rss_timeline"],
        "small_rss_timeline": small["rss_timeline"],
    }


def run_schema_ids(clusters: Clusters, args: argparse.Namespace, workdir: Path) -> dict:
    """Issue 24: the same Avro records copied with ``airmirror.schema.ids = off`` and ``= translate``, alternating
    over ``--schema-ids-rounds`` rounds; throughput translate over off, whose goal is :data:`SCHEMA_IDS_GOAL`.  The
    registries run under ``workdir`` for the length of the case."""
    registries = start_registries(workdir)
    try:
        time.sleep(args.settle_seconds)
        values = AvroValues(registries.source, "bench-avro", args.record_size)
        source = prepare_source(clusters, "bench-avro", args.partitions, args.records, 0, values=values)
        runs = []
        for round_, mode in alternating_rounds(args.schema_ids_rounds, SCHEMA_IDS_MODES):
            time.sleep(args.settle_seconds)
            runs.append(schema_ids_run(clusters, source, registries, values, args, workdir, mode, round_))
            log(f"schema ids {mode}, round {round_}: {runs[-1]}")
    finally:
        stop_registries(workdir)
    return {
        "records": args.records,
        "record_size": args.record_size,
        "partitions": args.partitions,
        "payload_mb": round(source.payload_bytes / 1e6, 1),
        "rounds": args.schema_ids_rounds,
        "source_schema_id": values.schema_id,
        "runs": runs,
        **schema_ids_ratios(runs),
        "goal": SCHEMA_IDS_GOAL,
    }


def schema_ids_run(
    clusters: Clusters,
    source: SourceTopic,
    registries: Registries,
    values: AvroValues,
    args: argparse.Namespace,
    workdir: Path,
    mode: str,
    round_: int,
) -> dict:
    """One fresh ``airmirror replicate`` of the Avro topic with ``airmirror.schema.ids = mode``, checked: ``off``
    copies the source as it is; ``translate`` copies it with every value naming the target's id, which decodes with
    the target registry alone."""
    lines = (*registry_lines(registries), f"airmirror.schema.ids = {mode}")
    flow = airmirror_flow(clusters, source, workdir, f"ids{mode[0]}{round_}", args.spark_master, extra_lines=lines)
    result = run_airmirror(
        clusters, source, flow, workdir, args.timeout, name=f"airmirror_ids_{mode}_{round_}", verify_copy=False
    )
    remote = flow.remote_topic(source.name)
    figures = {"mode": mode, "round": round_, **result, "load_avg_1m_after": round(os.getloadavg()[0], 2)}
    if mode == "off":
        verify(clusters, source, remote)
        return figures
    target_id = latest_id(registries.target, f"{remote}-value")
    if target_id == values.schema_id:
        raise SystemExit(f"the schema has id {target_id} on both registries: nothing to translate")
    translated = topic_digest(clusters.source, source.name, source.partitions, partial(reframed, schema_id=target_id))
    verify(clusters, SourceTopic(source.name, source.partitions, source.records, 0, translated), remote)
    check_decodes(clusters, source, remote, registries, values.record)
    return {**figures, "target_schema_id": target_id}


def registry_lines(registries: Registries) -> tuple[str, ...]:
    """The flow lines that give both clusters the bench's registries."""
    return (
        f"{{source}}.schema.registry.url = {registries.source.url}",
        f"{{target}}.schema.registry.url = {registries.target.url}",
    )


def check_decodes(
    clusters: Clusters, source: SourceTopic, remote: str, registries: Registries, record: Callable[[int], dict]
) -> None:
    """Exit unless the first :data:`SCHEMA_IDS_DECODED` values of ``remote``'s partition 0 decode, with the target
    registry alone, to ``record(i)`` of the source record ``i`` each is a copy of."""
    shown = min(SCHEMA_IDS_DECODED, source.records // source.partitions)
    decoded = decoded_values(clusters.target, remote, 0, registries.target, shown)
    wanted = [record(i * source.partitions) for i in range(shown)]
    if decoded != wanted:
        raise SystemExit(
            f"VERIFICATION FAILED: {remote} does not decode with the target registry: {str(decoded)[:300]} "
            f"!= {str(wanted)[:300]}"
        )


def summed_seconds(runs: list[dict], names: Iterable[str]) -> dict[str, dict[str, float]]:
    """Per run name, its wall, steady and write-window seconds summed over the rounds."""
    keys = ("wall_s", "steady_s", "write_window_s")
    return {name: {key: sum(run.get(key, 0.0) for run in runs if run["run"] == name) for key in keys} for name in names}


def schema_ids_ratios(runs: list[dict]) -> dict:
    """Translate over off, summed over the rounds: throughput of the copy jobs and of whole runs (above 1:
    translate is faster), and CPU seconds of the whole process tree and of the copy tasks' Python workers alone
    (above 1: translate spends more).  The CPU ratios hardly depend on what else the machine runs; on an idle
    machine, where the copy tasks keep every core busy, the throughput ratio is about 1 / ``task_cpu_ratio``."""
    figures = {run["mode"]: dict.fromkeys(("steady_s", "wall_s", "cpu_s", "task_cpu_s"), 0.0) for run in runs}
    for run in runs:
        total = figures[run["mode"]]
        for key in ("steady_s", "wall_s", "cpu_s"):
            total[key] += run[key]
        total["task_cpu_s"] += run["cpu_s_by_role"].get("python", 0.0)
    off, translate = figures["off"], figures["translate"]
    return {
        "ratio_steady": ratio(off["steady_s"], translate["steady_s"]),
        "ratio_wall": ratio(off["wall_s"], translate["wall_s"]),
        "cpu_ratio": ratio(translate["cpu_s"], off["cpu_s"]),
        "task_cpu_ratio": ratio(translate["task_cpu_s"], off["task_cpu_s"]),
    }


def run_transforms(clusters: Clusters, args: argparse.Namespace, workdir: Path) -> dict:
    """Issue 41: ``--records`` JSON values of about ``--record-size`` bytes (``json_data.py``) copied by fresh runs of
    airmirror untransformed, airmirror through ``MaskField$Value`` on two fields, airmirror through the header chain
    (Filter on a header, DropHeaders, InsertHeader) and MM2 tuned through the same SMTs, each into its own remote
    topic and checked against the copy worked out from the source; ratios against :data:`TRANSFORMS_VS_MM2_GOAL` and
    :data:`TRANSFORMS_MASK_GOAL`."""
    time.sleep(args.settle_seconds)
    source = prepare_source(
        clusters,
        TRANSFORMS_TOPIC,
        args.partitions,
        args.records,
        0,
        values=JsonValues(args.record_size),
        headers=json_headers,
    )
    payload = source.payload_bytes
    expected = {
        chain: SourceTopic(source.name, source.partitions, sum(c for c, _ in digest), payload, digest)
        for chain, digest in (
            ("header_chain", topic_digest(clusters.source, source.name, source.partitions, through_header_chain)),
            ("mask", topic_digest(clusters.source, source.name, source.partitions, through_mask_chain)),
        )
    }
    runs = []
    for round_, name in alternating_rounds(args.transforms_rounds, TRANSFORMS_RUNS):
        time.sleep(args.settle_seconds)
        figures = transforms_run(clusters, source, expected, args, workdir, name, round_)
        runs.append({"run": name, "round": round_, **figures})
        log(f"{name}, round {round_}: {runs[-1]}")
    seconds = summed_seconds(runs, TRANSFORMS_RUNS)
    plain, mask = seconds["airmirror_plain"], seconds["airmirror_mask"]
    chain, mm2 = seconds["airmirror_header_chain"], seconds["mm2_tuned_header_chain"]
    return {
        "records": args.records,
        "record_size": args.record_size,
        "partitions": args.partitions,
        "payload_mb": round(payload / 1e6, 1),
        "rounds": args.transforms_rounds,
        "kept_by_header_chain": expected["header_chain"].records,
        "runs": runs,
        "header_chain_vs_mm2_tuned": {
            "wall": ratio(mm2["wall_s"], chain["wall_s"]),
            "steady": ratio(mm2["write_window_s"], chain["write_window_s"]),
            "steady_job": ratio(mm2["steady_s"], chain["steady_s"]),
            "goal": TRANSFORMS_VS_MM2_GOAL,
        },
        "mask_vs_plain": {
            "steady": ratio(plain["steady_s"], mask["steady_s"]),
            "wall": ratio(plain["wall_s"], mask["wall_s"]),
            "goal": TRANSFORMS_MASK_GOAL,
        },
        "header_chain_vs_plain": {
            "steady": ratio(plain["steady_s"], chain["steady_s"]),
            "wall": ratio(plain["wall_s"], chain["wall_s"]),
        },
        "avro": run_avro_transforms(clusters, args, workdir),
    }


def run_avro_transforms(clusters: Clusters, args: argparse.Namespace, workdir: Path) -> dict:
    """Issue 41's Avro case: ``--records`` Avro values (``avro_data.py``) copied with schema ids translated, by fresh
    runs of airmirror without a chain and through ``MaskField$Value`` on two fields, over ``--transforms-rounds``
    rounds; every copy checked record by record against the copy worked out from the source, and its first values
    decoded with the target registry alone.  MM2 has no such run: its field SMTs fail on the bytes it hands them."""
    registries = start_registries(workdir)
    try:
        time.sleep(args.settle_seconds)
        values = AvroValues(registries.source, AVRO_TRANSFORMS_TOPIC, args.record_size)
        source = prepare_source(clusters, AVRO_TRANSFORMS_TOPIC, args.partitions, args.records, 0, values=values)
        runs = []
        for round_, name in alternating_rounds(args.transforms_rounds, AVRO_TRANSFORMS_RUNS):
            time.sleep(args.settle_seconds)
            figures = avro_transforms_run(clusters, source, registries, values, args, workdir, name, round_)
            runs.append({"run": name, "round": round_, **figures})
            log(f"{name}, round {round_}: {runs[-1]}")
    finally:
        stop_registries(workdir)
    seconds = summed_seconds(runs, AVRO_TRANSFORMS_RUNS)
    ids, mask = seconds["airmirror_avro_ids"], seconds["airmirror_avro_mask"]
    return {
        "records": args.records,
        "payload_mb": round(source.payload_bytes / 1e6, 1),
        "runs": runs,
        "mask_vs_ids": {
            "steady": ratio(ids["steady_s"], mask["steady_s"]),
            "wall": ratio(ids["wall_s"], mask["wall_s"]),
        },
    }


def avro_transforms_run(
    clusters: Clusters,
    source: SourceTopic,
    registries: Registries,
    values: AvroValues,
    args: argparse.Namespace,
    workdir: Path,
    name: str,
    round_: int,
) -> dict:
    """One run of the Avro transform case (:data:`AVRO_TRANSFORMS_RUNS`), into a remote topic of its own, checked."""
    masks = name == "airmirror_avro_mask"
    lines = (*registry_lines(registries), *(AVRO_MASK_CHAIN if masks else ()))
    alias = f"avro{'mask' if masks else 'ids'}{round_}"
    flow = airmirror_flow(clusters, source, workdir, alias, args.spark_master, extra_lines=lines)
    figures = run_airmirror(clusters, source, flow, workdir, args.timeout, name=f"{name}_{round_}", verify_copy=False)
    remote = flow.remote_topic(source.name)
    target_id = latest_id(registries.target, f"{remote}-value")
    reshape = partial(masked_reframed if masks else reframed, schema_id=target_id)
    expected = topic_digest(clusters.source, source.name, source.partitions, reshape)
    verify(clusters, SourceTopic(source.name, source.partitions, source.records, 0, expected), remote)
    check_decodes(
        clusters, source, remote, registries, lambda i: masked_record(values.record(i)) if masks else values.record(i)
    )
    return {**figures, "target_schema_id": target_id}


def transforms_run(
    clusters: Clusters,
    source: SourceTopic,
    expected: dict[str, SourceTopic],
    args: argparse.Namespace,
    workdir: Path,
    name: str,
    round_: int,
) -> dict:
    """One run of the transform case (:data:`TRANSFORMS_RUNS`), into a remote topic of its own, checked."""
    if name == "mm2_tuned_header_chain":
        return run_mm2(
            clusters,
            source,
            workdir,
            args.timeout,
            tuned=True,
            name=f"mm2_tuned_chain_{round_}",
            extra_lines=(*HEADER_CHAIN, MM2_HEADER_CONVERTER),
            expected=expected["header_chain"],
        )
    lines, target = {
        "airmirror_plain": ((), source),
        "airmirror_mask": (MASK_CHAIN, expected["mask"]),
        "airmirror_header_chain": (HEADER_CHAIN, expected["header_chain"]),
    }[name]
    alias = f"{name.removeprefix('airmirror_').replace('_', '')}{round_}"
    flow = airmirror_flow(clusters, source, workdir, alias, args.spark_master, extra_lines=lines)
    return run_airmirror(clusters, source, flow, workdir, args.timeout, name=f"{name}_{round_}", expected=target)


def ratio(numerator: float, denominator: float) -> float:
    return round(numerator / denominator, 2)


def ratios(copiers: dict) -> tuple[dict, dict, dict]:
    """airmirror against every other copier: over wall time and steady rate (higher is better), and its CPU
    seconds per GB over the other's (lower is better)."""
    air = copiers.get("airmirror")
    if air is None:
        return {}, {}, {}
    wall, steady, cpu = {}, {}, {}
    for other in ("mm2_tuned", "mm2_default", "raw_pipe"):
        if other in copiers:
            key = f"airmirror_vs_{other}"
            wall[key] = ratio(copiers[other]["wall_s"], air["wall_s"])
            steady[key] = ratio(air["steady_mb_s"], copiers[other]["steady_mb_s"])
            cpu[key] = ratio(air["cpu_s_per_gb"], copiers[other]["cpu_s_per_gb"])
    return wall, steady, cpu


def table(document: dict) -> str:
    """The results as Markdown tables, one per case the bench ran."""
    machine = document["machine"]
    lines = [f"{machine['nproc']} cores, {machine['ram_gb']} GB RAM, Kafka {machine['kafka']}"]
    for section in (
        _copier_lines,
        _ratio_lines,
        _verify_lines,
        _latency_lines,
        _live_lines,
        _scaling_lines,
        _partition_scaling_lines,
        _big_partition_lines,
        _schema_ids_lines,
        _transforms_lines,
    ):
        lines += section(document)
    return "\n".join(lines)


def _copier_lines(document: dict) -> list[str]:
    """The copiers' table (no lines when the bench did not run it)."""
    params = document["params"]
    lines: list[str] = []
    if document["copiers"]:
        lines += [
            f"{params['records']:,} records x {params['record_size']} B x {params['partitions']} partitions",
            "",
            "| copier | wall s | steady MB/s | records/s | peak RSS MB | CPU s | CPU s/GB |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
    for name, c in document["copiers"].items():
        lines.append(
            f"| {name} | {c['wall_s']:.1f} | {c['steady_mb_s']:.1f} | {c['records_per_s']:,} | {c['peak_rss_mb']:,} "
            f"| {c['cpu_s']:.1f} | {c['cpu_s_per_gb']:.1f} |"
        )
    return lines


def _ratio_lines(document: dict) -> list[str]:
    """airmirror's ratios to the other copiers (no lines when the bench did not run it)."""
    lines: list[str] = []
    if document["ratios"]:
        lines += [
            "",
            "| ratio (airmirror vs) | wall time | steady | CPU s/GB (airmirror / other, lower is better) |",
            "|---|---:|---:|---:|",
        ]
        for key, value in document["ratios"].items():
            lines.append(
                f"| {key.removeprefix('airmirror_vs_')} | {value:.2f} | {document['steady_ratios'][key]:.2f} "
                f"| {document['cpu_per_gb_ratios'][key]:.2f} |"
            )
    return lines


def _verify_lines(document: dict) -> list[str]:
    """The ``airmirror verify`` case (no lines when the bench did not run it)."""
    lines: list[str] = []
    checked = document.get("verify")
    if checked:
        lines += [
            "",
            "| airmirror verify | wall s | records/s | Spark job s | job records/s | x replicate wall | x copy job |",
            "|---|---:|---:|---:|---:|---:|---:|",
            f"| verify | {checked['wall_s']:.1f} | {checked['records_per_s']:,} | {checked['job_s']:.1f} | "
            f"{checked['job_records_per_s']:,} | {checked['vs_replicate_wall']:.2f} | {checked['vs_copy_job']:.2f} |",
        ]
    return lines


def _latency_lines(document: dict) -> list[str]:
    """The live latency of one replicate run (no lines when the bench did not run it)."""
    lines: list[str] = []
    latency = document.get("latency")
    if latency:
        lines += [
            "",
            f"live latency, {latency['records']:,} new records: "
            f"{latency['produce_to_visible_s']:.1f} s produce to visible "
            f"(replicate run {latency['replicate_wall_s']:.1f} s, copy job {latency['copy_job_s']:.1f} s)",
        ]
    return lines


def _live_lines(document: dict) -> list[str]:
    """The live copiers' lag, per live case the bench ran (no lines when it ran none)."""
    params = document["params"]
    lines: list[str] = []
    for key in ("live_lag_ms", "live_wide_lag_ms"):
        live = document.get(key)
        if not live:
            continue
        first = next((figures for figures in live.values() if "error" not in figures), None)
        if first is None:  # every copier failed: the case's load as asked
            load = params["live"] if key == "live_lag_ms" else {**params["live"], **params["live"]["wide"]}
            first = {"partitions": params["partitions"], **load}
        lines += [
            "",
            f"live: {first['rate']:,} records/s x {params['record_size']} B over {first['partitions']:,} partitions "
            f"for {first['seconds']:.0f} s",
            "",
            "| live copier | lag p50 ms | p90 | p99 | max | longest gap ms | gaps > 500 ms | CPU s | peak RSS MB "
            "| floor p50 / p99 ms |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name, figures in live.items():
            if "error" in figures:
                lines.append(f"| {name} | VERIFICATION FAILED: {figures['error']} |")
                continue
            floor = figures["floor"]
            lines.append(
                f"| {name} | {figures['p50']:,} | {figures['p90']:,} | {figures['p99']:,} | {figures['max']:,} "
                f"| {figures['longest_gap_ms']:,} | {figures['gaps_over_500_ms']} | {figures['cpu_s']:.1f} "
                f"| {figures['peak_rss_mb']:,} | {floor['p50']} / {floor['p99']} |"
            )
    return lines


def _scaling_lines(document: dict) -> list[str]:
    """How airmirror scales with records and partitions (no lines when the bench did not run it)."""
    lines: list[str] = []
    scaling = document.get("scaling")
    if scaling:
        base = scaling["base"]
        lines += [
            "",
            "| airmirror scaling | records | partitions | wall s | growth | steady MB/s |",
            "|---|---:|---:|---:|---:|---:|",
            f"| base | {base['records']:,} | {base['partitions']} | {base['wall_s']:.1f} | 1.00 "
            f"| {base['steady_mb_s']:.1f} |",
        ]
        for key in ("records_x4", "partitions_x4"):
            s = scaling[key]
            lines.append(
                f"| {key} | {s['records']:,} | {s['partitions']} | {s['wall_s']:.1f} | {s['wall_growth']:.2f} "
                f"| {s['steady_mb_s']:.1f} |"
            )
    return lines


def _partition_scaling_lines(document: dict) -> list[str]:
    """The partition scaling case (no lines when the bench did not run it)."""
    lines: list[str] = []
    spread = document.get("partition_scaling")
    if spread:
        few, many = spread["few"], spread["many"]
        lines += [
            "",
            f"partition scaling: {spread['records']:,} records x {spread['record_size']} B, topics of "
            f"{spread['partitions_per_topic']} partitions (issue 22's target: ratio <= {spread['ratio_target']})",
            "",
            f"| airmirror batch | {few['partitions']:,} partitions s | {many['partitions']:,} partitions s | ratio |",
            "|---|---:|---:|---:|",
        ]
        for batch, value in spread["wall_ratios"].items():
            lines.append(f"| {batch} | {few[batch]['wall_s']:.1f} | {many[batch]['wall_s']:.1f} | {value:.2f} |")
        lines.append(
            f"| the target broker bringing up as many new partitions | {few['broker_creation_s']:.1f} "
            f"| {many['broker_creation_s']:.1f} | |"
        )
        lines.append(f"| first copy less that | | | {spread['first_copy_ratio_less_broker_creation']:.2f} |")
    return lines


def _big_partition_lines(document: dict) -> list[str]:
    """The big partition case (no lines when the bench did not run it)."""
    lines: list[str] = []
    big = document.get("big_partition")
    if big:
        timeout = big.get("transaction_timeout_ms")  # set by results before the case ran at default settings
        settings = "default settings" if timeout is None else f"target producer transaction.timeout.ms {timeout:,}"
        lines += [
            "",
            f"big partition: 1 partition x {big['record_size']} B records, {settings}",
            "",
            "| airmirror big partition | records | wall s | records/s | MB/s | steady MB/s | peak RSS MB "
            "| CLI / JVM / Python MB |",
            "|---|---:|---:|---:|---:|---:|---:|---|",
        ]
        for label, prefix in (("small", "small_"), ("big", "")):
            run = {key: big[prefix + key] for key in BIG_RUN_FIGURES}
            roles = run["peak_rss_by_role_mb"]
            lines.append(
                f"| {label} | {run['records']:,} | {run['wall_s']:.1f} | {run['records_per_s']:,} "
                f"| {run['mb_s']:.1f} | {run['steady_mb_s']:.1f} | {run['peak_rss_mb']:,} "
                f"| {roles.get('cli', 0):,} / {roles.get('jvm', 0):,} / {roles.get('python', 0):,} |"
            )
        verdict = "within" if big["peak_rss_within_limit"] else "ABOVE"
        lines += [
            "",
            f"peak_rss_ratio_big_vs_small: {big['peak_rss_ratio_big_vs_small']:.2f} "
            f"({verdict} issue 9's limit of {big['peak_rss_ratio_limit']})",
        ]
    return lines


def _schema_ids_lines(document: dict) -> list[str]:
    """The schema-id case (no lines when the bench did not run it)."""
    lines: list[str] = []
    case = document.get("schema_ids")
    if case:
        verdict = "meets" if case["ratio_steady"] >= case["goal"] else "BELOW"
        lines += [
            "",
            f"schema ids: {case['records']:,} Avro records x ~{case['record_size']} B x {case['partitions']} "
            f"partitions, {case['rounds']} rounds of off and translate",
            "",
            "| airmirror.schema.ids | round | wall s | copy job s | steady MB/s | CPU s | copy tasks' CPU s "
            "| load avg after |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for run in case["runs"]:
            lines.append(
                f"| {run['mode']} | {run['round']} | {run['wall_s']:.1f} | {run['steady_s']:.2f} "
                f"| {run['steady_mb_s']:.1f} | {run['cpu_s']:.1f} | {run['cpu_s_by_role'].get('python', 0.0):.1f} "
                f"| {run['load_avg_1m_after']:.1f} |"
            )
        lines += [
            "",
            f"translate / off: throughput {case['ratio_steady']:.2f} over the copy jobs ({verdict} issue 24's goal of "
            f"{case['goal']}), {case['ratio_wall']:.2f} over whole runs; CPU {case['cpu_ratio']:.2f}, "
            f"copy tasks' CPU {case['task_cpu_ratio']:.2f}",
        ]
    return lines


def _transforms_lines(document: dict) -> list[str]:
    """The transform case (no lines when the bench did not run it)."""
    case = document.get("transforms")
    if not case:
        return []
    lines = [
        "",
        f"transforms: {case['records']:,} JSON records x ~{case['record_size']} B x {case['partitions']} partitions, "
        f"{case['kept_by_header_chain']:,} kept by the header chain, {case['rounds']} rounds",
        "",
        "| run | round | wall s | steady s | steady MB/s | CPU s | peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for run in case["runs"]:
        lines.append(
            f"| {run['run']} | {run['round']} | {run['wall_s']:.1f} | {run['steady_s']:.2f} | {run['steady_mb_s']:.1f} "
            f"| {run['cpu_s']:.1f} | {run['peak_rss_mb']} |"
        )
    versus, mask = case["header_chain_vs_mm2_tuned"], case["mask_vs_plain"]
    lines += [
        "",
        f"header chain, airmirror / MM2 tuned: wall {versus['wall']:.2f}, steady {versus['steady']:.2f} "
        f"({'meets' if min(versus['wall'], versus['steady']) >= versus['goal'] else 'BELOW'} issue 41's goal of "
        f"{versus['goal']}; steady is first to last write on the target for both, airmirror's copy job "
        f"{versus['steady_job']:.2f})",
        f"MaskField on two fields / untransformed: steady {mask['steady']:.2f}, wall {mask['wall']:.2f} "
        f"({'meets' if mask['steady'] >= mask['goal'] else 'BELOW'} issue 41's goal of {mask['goal']})",
    ]
    avro = case.get("avro")
    if avro:
        lines += [
            "",
            "| Avro run | round | wall s | steady s | steady MB/s | CPU s |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {run['run']} | {run['round']} | {run['wall_s']:.1f} | {run['steady_s']:.2f} | "
            f"{run['steady_mb_s']:.1f} | {run['cpu_s']:.1f} |"
            for run in avro["runs"]
        ]
        lines.append(
            f"Avro, MaskField on two fields / ids translated only: steady {avro['mask_vs_ids']['steady']:.2f}, "
            f"wall {avro['mask_vs_ids']['wall']:.2f}"
        )
    return lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="airmirror vs MM2 vs a raw pipe (see the module docstring)")
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--copiers", default=",".join(COPIERS), help=f"comma list of {', '.join(COPIERS)}")
    parser.add_argument("--spark-master", help="airmirror.spark.master for the airmirror runs")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--live-rate", type=int, default=5_000, help="records/s of the live case's producer")
    parser.add_argument("--live-seconds", type=float, default=60.0, help="how long the live case produces")
    parser.add_argument(
        "--live-wide-partitions", type=int, default=2000, help="the whole-cluster live case's partition count"
    )
    parser.add_argument(
        "--live-wide-rate", type=int, default=2000, help="records/s the whole-cluster live case's producer writes"
    )
    parser.add_argument("--skip-live-wide", action="store_true", help="skip the whole-cluster live case")
    parser.add_argument(
        "--live-watch-partitions",
        type=int,
        default=1000,
        help="partitions each measuring process of the live cases reads (more partitions, more processes)",
    )
    parser.add_argument(
        "--live-warm-up-seconds",
        type=float,
        default=30.0,
        help="transactions run back to back on both clusters before the live case, so that the first live copier "
        "meets brokers as warm as the last one does (0: none)",
    )
    parser.add_argument(
        "--live-copiers", default=",".join(LIVE_COPIERS), help=f"the live case's copiers: comma list of {LIVE_COPIERS}"
    )
    parser.add_argument("--skip-live", action="store_true", help="no live case")
    only = "only the live case, over --partitions x --record-size at --live-rate for --live-seconds"
    parser.add_argument("--live-only", action="store_true", help=only)
    parser.add_argument(
        "--big-partition-records",
        type=int,
        default=10_000_000,
        help="records of the big-partition case (issue 9); its small run has a tenth",
    )
    parser.add_argument("--skip-big-partition", action="store_true", help="no big-partition case")
    parser.add_argument(
        "--big-partition-only",
        action="store_true",
        help="only the big-partition case: no main load, copiers, latency or scaling",
    )
    parser.add_argument(
        "--partition-scaling-records", type=int, default=40_000, help="records of the partition-scaling case (issue 22)"
    )
    parser.add_argument(
        "--partition-scaling-partitions",
        default="20,2000",
        help="FEW,MANY: the partition counts of the partition-scaling case, each a multiple of 10 (topics of 10)",
    )
    parser.add_argument("--skip-partition-scaling", action="store_true", help="no partition-scaling case")
    only = "only the partition-scaling case: no main load, copiers, latency, scaling, live or big partition"
    parser.add_argument("--partition-scaling-only", action="store_true", help=only)
    parser.add_argument(
        "--schema-ids-rounds", type=int, default=2, help="rounds of the schema-id case: one off, one translate run each"
    )
    parser.add_argument("--skip-schema-ids", action="store_true", help="no schema-id case")
    only = "only the schema-id case (issue 24), over --records x --record-size x --partitions"
    parser.add_argument("--schema-ids-only", action="store_true", help=only)
    parser.add_argument(
        "--transforms-rounds", type=int, default=2, help="rounds of the transform case: each of its runs once each"
    )
    parser.add_argument("--skip-transforms", action="store_true", help="no transform case")
    only = "only the transform case (issue 41), over --records x --record-size x --partitions"
    parser.add_argument("--transforms-only", action="store_true", help=only)
    parser.add_argument("--timeout", type=float, default=300.0, help="per copier run, seconds")
    parser.add_argument(
        "--settle-seconds",
        type=float,
        default=3.0,
        help="pause before each copier run, so the one before it does not skew it",
    )
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    parser.add_argument("--keep", action="store_true", help="keep the temporary home (broker data, copier logs)")
    args = parser.parse_args(argv)
    args.copiers = [c.strip() for c in args.copiers.split(",") if c.strip()]
    unknown = set(args.copiers) - set(COPIERS)
    if unknown:
        parser.error(f"unknown copiers: {', '.join(sorted(unknown))}")
    args.live_copiers = [c.strip() for c in args.live_copiers.split(",") if c.strip()]
    unknown = set(args.live_copiers) - set(LIVE_COPIERS)
    if unknown or not args.live_copiers:
        named = ", ".join(sorted(unknown)) or "none"
        parser.error(f"--live-copiers: unknown copiers or none ({named}); any of {', '.join(LIVE_COPIERS)}")
    apply_only_flags(parser, args)
    if args.schema_ids_rounds < 1 or args.transforms_rounds < 1:
        parser.error("--schema-ids-rounds and --transforms-rounds must be at least 1")
    args.partition_scaling_partitions = partition_counts(parser, args.partition_scaling_partitions)
    if not args.skip_big_partition and args.big_partition_records < 10:
        parser.error("--big-partition-records must be at least 10 (the small run has a tenth)")
    if "airmirror" not in args.copiers:
        args.skip_latency = args.skip_scaling = True
    return args


ONLY_FLAGS = {
    "big_partition_only": "skip_big_partition",
    "partition_scaling_only": "skip_partition_scaling",
    "schema_ids_only": "skip_schema_ids",
    "transforms_only": "skip_transforms",
    "live_only": "skip_live",
}
"""Each ``--...-only`` flag and the ``--skip-...`` flag of its case."""


def apply_only_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A ``--...-only`` flag (:data:`ONLY_FLAGS`) skips the copiers and every other case; it excludes its own case's
    ``--skip-...`` flag and the other ``--...-only`` flags."""
    chosen = [only for only in ONLY_FLAGS if getattr(args, only)]
    if not chosen:
        return
    only = chosen[0]
    skip = ONLY_FLAGS[only]
    if len(chosen) > 1 or getattr(args, skip):
        flag = lambda name: "--" + name.replace("_", "-")  # noqa: E731
        parser.error(f"{flag(only)} excludes {flag(skip)} and the other --...-only flags")
    args.copiers = []
    for other in ONLY_FLAGS.values():
        setattr(args, other, other != skip)


def partition_counts(parser: argparse.ArgumentParser, value: str) -> tuple[int, int]:
    """``--partition-scaling-partitions FEW,MANY``: two multiples of the topic size, FEW below MANY."""
    try:
        few, many = (int(part) for part in value.split(","))
    except ValueError:
        parser.error(f"--partition-scaling-partitions must be FEW,MANY (two integers), not {value!r}")
    size = PARTITION_SCALING_TOPIC_PARTITIONS
    if not (0 < few < many and few % size == 0 and many % size == 0):
        parser.error(f"--partition-scaling-partitions {value}: FEW < MANY, each a positive multiple of {size}")
    return few, many


def results_json(document: dict) -> str:
    """Indented JSON, with lists of numbers (the RSS timelines' rows) kept on one line."""
    text = json.dumps(document, indent=2)
    numbers = re.compile(r"\[\s*(-?[\d.]+(?:,\s*-?[\d.]+)*)\s*\]")
    return numbers.sub(lambda m: "[" + ", ".join(x.strip() for x in m[1].split(",")) + "]", text) + "\n"


def run_copier_cases(clusters: Clusters, args: argparse.Namespace, workdir: Path, document: dict) -> None:
    """The copiers over the same source topic, then airmirror's verify and latency cases on its flow; results
    go into ``document``."""
    flow = None
    if args.copiers:
        source = prepare_source(clusters, "bench", args.partitions, args.records, args.record_size)
        document["params"]["payload_mb"] = round(source.payload_bytes / 1e6, 1)
    for name in COPIERS:
        if name not in args.copiers:
            continue
        time.sleep(args.settle_seconds)
        log(f"{name} ...")
        if name == "raw_pipe":
            result = run_raw_pipe(clusters, source, workdir, args.timeout)
        elif name.startswith("mm2"):
            result = run_mm2(clusters, source, workdir, args.timeout, tuned=name == "mm2_tuned")
        else:
            flow = airmirror_flow(clusters, source, workdir, "air", args.spark_master)
            result = run_airmirror(clusters, source, flow, workdir, args.timeout)
        document["copiers"][name] = result
        log(
            f"{name}: {result['wall_s']} s wall, {result['steady_mb_s']} MB/s steady, "
            f"{result['peak_rss_mb']} MB peak RSS"
        )
    document["ratios"], document["steady_ratios"], document["cpu_per_gb_ratios"] = ratios(document["copiers"])
    if flow is None:
        return
    document["verify"] = run_verify(source, flow, document["copiers"]["airmirror"], args.timeout)
    log(f"verify: {document['verify']}")
    if not args.skip_latency:
        time.sleep(args.settle_seconds)
        document["latency"] = run_latency(clusters, source, flow, args.record_size, workdir, args.timeout)
        log(f"latency: {document['latency']}")


def run_separate_cases(clusters: Clusters, args: argparse.Namespace, workdir: Path, document: dict) -> None:
    """The cases with topics of their own (live, scaling, partition scaling, big partition, schema ids, transforms),
    unless skipped;
    results go into ``document``."""
    if not args.skip_live:
        run_live_cases(clusters, args, workdir, document)
    if not args.skip_scaling:
        document["scaling"] = run_scaling(clusters, document["copiers"]["airmirror"], args, workdir)
    if not args.skip_partition_scaling:
        document["partition_scaling"] = run_partition_scaling(clusters, args, workdir)
    if not args.skip_big_partition:
        document["big_partition"] = run_big_partition(clusters, args, workdir)
    if not args.skip_schema_ids:
        document["schema_ids"] = run_schema_ids(clusters, args, workdir)
    if not args.skip_transforms:
        document["transforms"] = run_transforms(clusters, args, workdir)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    document: dict = {
        "timestamp": stamp,
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine_facts(),
        "params": {
            "records": args.records,
            "record_size": args.record_size,
            "partitions": args.partitions,
            "spark_master": args.spark_master or "local[*] (airmirror default)",
            "copiers": args.copiers,
            "big_partition_records": None if args.skip_big_partition else args.big_partition_records,
            "live": None
            if args.skip_live
            else {
                "rate": args.live_rate,
                "seconds": args.live_seconds,
                "copiers": args.live_copiers,
                "wide": None
                if args.skip_live_wide
                else {"partitions": args.live_wide_partitions, "rate": args.live_wide_rate},
                "watch_partitions_per_process": args.live_watch_partitions,
            },
            "partition_scaling": None
            if args.skip_partition_scaling
            else {"records": args.partition_scaling_records, "partitions": list(args.partition_scaling_partitions)},
            "schema_ids_rounds": None if args.skip_schema_ids else args.schema_ids_rounds,
            "transforms_rounds": None if args.skip_transforms else args.transforms_rounds,
        },
        "copiers": {},
    }
    home = Path(tempfile.mkdtemp(prefix="airmirror-bench-"))
    workdir = home / "runs"
    workdir.mkdir()
    os.environ["AIRMIRROR_HOME"] = str(home)
    log(f"home {home}")
    try:
        brokers = [start_broker(name, free_port(), home=home) for name in ("bench-source", "bench-target")]
        clusters = Clusters(brokers[0].bootstrap, brokers[1].bootstrap)
        for bootstrap in (clusters.source, clusters.target):
            warm_up_cluster(bootstrap)
        run_copier_cases(clusters, args, workdir, document)
        run_separate_cases(clusters, args, workdir, document)
    finally:
        for name in ("bench-source", "bench-target"):
            stop_broker(name, home=home)
        if args.keep:
            log(f"kept {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)
    document["bench_s"] = round(time.monotonic() - started, 1)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    path = args.results_dir / f"{stamp}.json"
    path.write_text(results_json(document))
    print(table(document))
    print(f"\nwritten {path.relative_to(REPO) if path.is_relative_to(REPO) else path} ({document['bench_s']} s)")
    failed = [
        f"{case} {name}"
        for case in ("live_lag_ms", "live_wide_lag_ms")
        for name, figures in (document.get(case) or {}).items()
        if "error" in figures
    ]
    if failed:
        print(f"VERIFICATION FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
