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

The code: this module is the command line and the order of the cases; ``case_*.py`` are the cases, each with its
run, its typed results and its table (``case_copiers.py``, ``case_verify.py``, ``case_latency.py``,
``case_live.py``, ``case_scaling.py``, ``case_partition_scaling.py``, ``case_big_partition.py``,
``case_schema_ids.py``, ``case_transforms.py`` and ``case_avro_transforms.py``); ``report.py`` is the results
document, its JSON and its tables; ``runs.py`` the measured copies the cases are made of, over ``copiers.py``
(a copier's process, measured), ``live.py`` (a live copier, measured), ``kafka_io.py`` (loads, watches, digests),
the data modules (``json_data.py``, ``avro_data.py``) and ``shared.py`` (what the bench shares with the soak).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from case_big_partition import run_big_partition
from case_copiers import COPIERS, ratios, run_copiers
from case_latency import run_latency
from case_live import LIVE_COPIERS, live_params, run_live_cases
from case_partition_scaling import TOPIC_PARTITIONS, partition_scaling_params, run_partition_scaling
from case_scaling import run_scaling
from case_schema_ids import run_schema_ids
from case_transforms import run_transforms
from case_verify import run_verify
from report import BenchDocument, Params, results_json, table
from shared import REPO, RESULTS, Clusters, fresh_home, local_clusters, log, machine_facts, utc_stamp

BROKERS = ("bench-source", "bench-target")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (the flags of the module docstring), checked: a bad one exits 2 saying why."""
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
    parser.add_argument("--results-dir", type=Path, default=RESULTS)
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

        def flag(name: str) -> str:
            return "--" + name.replace("_", "-")

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
    size = TOPIC_PARTITIONS
    if not (0 < few < many and few % size == 0 and many % size == 0):
        parser.error(f"--partition-scaling-partitions {value}: FEW < MANY, each a positive multiple of {size}")
    return few, many


def bench_params(args: argparse.Namespace) -> Params:
    """The results' ``params``: the load and what each case was asked for (``None`` for a case skipped)."""
    return {
        "records": args.records,
        "record_size": args.record_size,
        "partitions": args.partitions,
        "spark_master": args.spark_master or "local[*] (airmirror default)",
        "copiers": args.copiers,
        "big_partition_records": None if args.skip_big_partition else args.big_partition_records,
        "live": live_params(args),
        "partition_scaling": partition_scaling_params(args),
        "schema_ids_rounds": None if args.skip_schema_ids else args.schema_ids_rounds,
        "transforms_rounds": None if args.skip_transforms else args.transforms_rounds,
    }


def run_copier_cases(clusters: Clusters, args: argparse.Namespace, workdir: Path, document: BenchDocument) -> None:
    """The copiers over the same source topic, then airmirror's verify and latency cases on its flow; results
    go into ``document``."""
    copies = run_copiers(clusters, args, workdir)
    if copies.source is not None:
        document["params"]["payload_mb"] = round(copies.source.payload_bytes / 1e6, 1)
    document["copiers"] = copies.figures
    document["ratios"], document["steady_ratios"], document["cpu_per_gb_ratios"] = ratios(copies.figures)
    if copies.source is None or copies.flow is None:
        return
    document["verify"] = run_verify(copies.source, copies.flow, copies.figures["airmirror"], args.timeout)
    log(f"verify: {document['verify']}")
    if not args.skip_latency:
        time.sleep(args.settle_seconds)
        document["latency"] = run_latency(clusters, copies.source, copies.flow, args.record_size, workdir, args.timeout)
        log(f"latency: {document['latency']}")


def run_separate_cases(clusters: Clusters, args: argparse.Namespace, workdir: Path, document: BenchDocument) -> None:
    """The cases with topics of their own (live, scaling, partition scaling, big partition, schema ids, transforms),
    unless skipped; results go into ``document``."""
    if not args.skip_live:
        live, wide = run_live_cases(clusters, args, workdir)
        document["live_lag_ms"] = live
        if wide is not None:
            document["live_wide_lag_ms"] = wide
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


def live_failures(document: BenchDocument) -> list[str]:
    """``CASE COPIER`` of every live copier whose records went missing or arrived twice."""
    cases = (("live_lag_ms", document.get("live_lag_ms")), ("live_wide_lag_ms", document.get("live_wide_lag_ms")))
    return [
        f"{case} {name}" for case, results in cases for name, figures in (results or {}).items() if "error" in figures
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the bench (see the module docstring); 1 when a live copier failed its check, 0 otherwise (a copy that
    differs from its source exits 1 at once)."""
    args = parse_args(argv)
    started = time.monotonic()
    stamp = utc_stamp()
    document: BenchDocument = {
        "timestamp": stamp,
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine_facts(),
        "params": bench_params(args),
        "copiers": {},
        "ratios": {},
        "steady_ratios": {},
        "cpu_per_gb_ratios": {},
    }
    home = fresh_home("bench")
    workdir = home / "runs"
    workdir.mkdir()
    log(f"home {home}")
    try:
        with local_clusters(BROKERS, home) as clusters:
            run_copier_cases(clusters, args, workdir, document)
            run_separate_cases(clusters, args, workdir, document)
    finally:
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
    failed = live_failures(document)
    if failed:
        print(f"VERIFICATION FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
