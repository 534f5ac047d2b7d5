"""``benchmarks/bench.py`` end to end on a small load: every copier runs, every copy verifies, the report is whole.

MM2 with its defaults is left out of the throughput copiers: it is the tuned MM2's runner with other settings (one
MM2 start-up less).  The big-partition case (issue 9) runs tiny too (20,000 records and 2,000), so its code path is
exercised.  The live case runs airmirror and MM2 with exactly-once (MM2 tuned differs from the latter only by the
exactly-once keys, and its tuned settings are exercised by the throughput copiers), to spare one more MM2 start-up.
The partition-scaling case (issue 22) is skipped here: even tiny, it is six more airmirror runs (each a Spark
start-up); its flags and table are checked without brokers below.  So is the scaling case (x4 records, x4
partitions): it is two more runs of the airmirror copier above, on more data.  The schema-id case (issue 24) runs
tiny in a module of its own (``test_bench_schema_ids.py``), so that the test suite's workers share the two.

No timing is asserted: the bench only has to run, check its copies and report every figure.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.bench_runner import REPO, run_bench
from tests.polling import wait_until

sys.path.insert(0, str(REPO / "benchmarks"))  # benchmarks/ is no package
import bench
import case_copiers
import case_schema_ids
import copiers
import live
import report

pytestmark = [pytest.mark.integration, pytest.mark.slow]
COPIERS = ("raw_pipe", "mm2_tuned", "airmirror")
FIGURES = {"wall_s", "steady_mb_s", "records_per_s", "peak_rss_mb", "cpu_s", "cpu_s_per_gb"}
RATIOS = {"airmirror_vs_mm2_tuned", "airmirror_vs_raw_pipe"}
BIG_FIGURES = {
    "wall_s",
    "records_per_s",
    "mb_s",
    "peak_rss_mb",
    "small_wall_s",
    "small_records_per_s",
    "small_mb_s",
    "small_peak_rss_mb",
    "peak_rss_ratio_big_vs_small",
}


def test_small_bench_verifies_every_copier_and_reports_every_figure(tmp_path: Path) -> None:
    completed, document = run_bench(
        tmp_path,
        *("--copiers", ",".join(COPIERS), "--records", "3000", "--record-size", "512", "--partitions", "3"),
        *("--big-partition-records", "20000"),
        *(
            "--live-rate",
            "300",
            "--live-seconds",
            "3",
            "--live-warm-up-seconds",
            "1",
            "--settle-seconds",
            "0",
            "--live-copiers",
            "airmirror,mm2_eos",
            "--live-watch-partitions",
            "2",
            "--skip-live-wide",
        ),
        *("--skip-partition-scaling", "--skip-scaling", "--skip-schema-ids", "--skip-transforms"),
    )
    assert set(document["copiers"]) == set(COPIERS)
    for name, figures in document["copiers"].items():
        assert set(figures) >= FIGURES, name
        assert all(figures[f] > 0 for f in FIGURES), (name, figures)
    assert set(document["ratios"]) == RATIOS == set(document["steady_ratios"]) == set(document["cpu_per_gb_ratios"])
    assert "| copier | wall s | steady MB/s | records/s | peak RSS MB | CPU s | CPU s/GB |" in completed.stdout
    assert document["latency"]["records"] == 1000
    assert all(document["verify"][f] > 0 for f in ("wall_s", "job_s", "records_per_s", "vs_copy_job")), document[
        "verify"
    ]
    assert "| airmirror verify |" in completed.stdout
    live = document["live_lag_ms"]
    assert set(live) == {"airmirror", "mm2_eos"}
    for name, figures in live.items():
        assert figures["records"] == 900 and 0 <= figures["p50"] <= figures["p99"] <= figures["max"], (name, figures)
        assert (figures["partitions"], figures["watch_processes"]) == (3, 2), (name, figures)
        assert figures["cpu_s"] > 0 and figures["longest_gap_ms"] > 0, (name, figures)
        assert figures["p50"] <= figures["p90"] <= figures["p99"] and figures["peak_rss_mb"] > 0, (name, figures)
        assert 0 <= figures["floor"]["p50"] <= figures["floor"]["p99"], (name, figures)
    assert "| live copier |" in completed.stdout
    big = document["big_partition"]
    assert (big["records"], big["small_records"], big["partitions"]) == (20000, 2000, 1)
    assert "transaction_timeout_ms" not in big  # the case runs at the flow's default settings
    assert "big partition: 1 partition x 100 B records, default settings" in completed.stdout
    assert all(big[f] > 0 for f in BIG_FIGURES), big
    assert {"cli", "jvm", "python"} <= set(big["peak_rss_by_role_mb"]), big["peak_rss_by_role_mb"]
    assert big["rss_timeline"] and big["small_rss_timeline"]
    assert "| airmirror |" in completed.stdout
    assert "| big | 20,000 |" in completed.stdout
    assert "peak_rss_ratio_big_vs_small" in completed.stdout
    assert "verified" in completed.stderr
    assert "partition_scaling" not in document and "scaling" not in document and "live_wide_lag_ms" not in document
    assert "schema_ids" not in document and "transforms" not in document


def test_partition_scaling_flags_select_the_case_alone_and_check_the_counts() -> None:
    args = bench.parse_args(["--partition-scaling-only", "--partition-scaling-partitions", "10,30"])
    assert (args.copiers, args.skip_live, args.skip_big_partition, args.skip_scaling) == ([], True, True, True)
    assert args.partition_scaling_partitions == (10, 30) and not args.skip_partition_scaling
    assert bench.parse_args([]).partition_scaling_partitions == (20, 2000)
    for wrong in ("10", "20,15", "20,25", "x,20"):
        with pytest.raises(SystemExit):
            bench.parse_args(["--partition-scaling-partitions", wrong])


def test_schema_ids_only_runs_that_case_alone_and_skips_it_under_the_other_only_flags() -> None:
    args = bench.parse_args(["--schema-ids-only", "--records", "1000"])
    skipped = (args.skip_live, args.skip_big_partition, args.skip_partition_scaling)
    assert args.copiers == [] and skipped == (True, True, True)
    assert not args.skip_schema_ids and args.schema_ids_rounds == 2 and args.records == 1000
    assert bench.parse_args(["--big-partition-only"]).skip_schema_ids
    assert bench.parse_args(["--partition-scaling-only"]).skip_schema_ids
    assert not bench.parse_args([]).skip_schema_ids
    for wrong in (["--schema-ids-only", "--skip-schema-ids"], ["--schema-ids-rounds", "0"]):
        with pytest.raises(SystemExit):
            bench.parse_args(wrong)


def test_transforms_only_runs_that_case_alone() -> None:
    args = bench.parse_args(["--transforms-only", "--records", "1000"])
    skipped = (args.skip_live, args.skip_big_partition, args.skip_partition_scaling, args.skip_schema_ids)
    assert args.copiers == [] and skipped == (True,) * 4 and not args.skip_transforms
    assert bench.parse_args(["--schema-ids-only"]).skip_transforms and not bench.parse_args([]).skip_transforms
    for wrong in (["--transforms-only", "--skip-transforms"], ["--transforms-only", "--live-only"]):
        with pytest.raises(SystemExit):
            bench.parse_args(wrong)


def test_live_only_runs_the_live_case_alone() -> None:
    args = bench.parse_args(["--live-only", "--partitions", "2000", "--live-rate", "2000"])
    skipped = (args.skip_big_partition, args.skip_partition_scaling, args.skip_schema_ids)
    assert args.copiers == [] and skipped == (True, True, True) and not args.skip_live
    assert (args.partitions, args.live_rate) == (2000, 2000)
    for wrong in (["--live-only", "--skip-live"], ["--live-only", "--schema-ids-only"]):
        with pytest.raises(SystemExit):
            bench.parse_args(wrong)


def test_schema_ids_ratios_sum_the_rounds_and_the_table_shows_each_run() -> None:
    def run(mode: str, round_: int, steady_s: float, wall_s: float, cpu_s: float) -> dict:
        figures = {"steady_s": steady_s, "wall_s": wall_s, "cpu_s": cpu_s, "steady_mb_s": 9.0, "load_avg_1m_after": 1.5}
        return {"mode": mode, "round": round_, **figures, "cpu_s_by_role": {"python": cpu_s / 2}}

    runs = [run("off", 1, 4.0, 10.0, 8.0), run("translate", 1, 5.0, 11.0, 9.0), run("translate", 2, 5.0, 9.0, 11.0)]
    runs.append(run("off", 2, 6.0, 10.0, 12.0))
    ratios = case_schema_ids.schema_ids_ratios(runs)
    assert ratios == {"ratio_steady": 1.0, "ratio_wall": 1.0, "cpu_ratio": 1.0, "task_cpu_ratio": 1.0}
    case = {"records": 1000, "record_size": 1024, "partitions": 3, "rounds": 2, "runs": runs, "goal": 0.9, **ratios}
    document = {"params": {}, "machine": {"nproc": 2, "ram_gb": 8, "kafka": "4"}, "copiers": {}, "ratios": {}}
    text = report.table({**document, "schema_ids": case})
    assert "| translate | 2 | 9.0 | 5.00 | 9.0 | 11.0 | 5.5 | 1.5 |" in text
    assert "translate / off: throughput 1.00 over the copy jobs (meets issue 24's goal of 0.9)" in text


def test_partition_scaling_table_shows_each_batch_and_its_ratio() -> None:
    run = {"first_copy": {"wall_s": 2.0}, "incremental": {"wall_s": 1.0}, "nothing_new": {"wall_s": 0.5}}
    spread = {
        "records": 400,
        "record_size": 100,
        "partitions_per_topic": 10,
        "ratio_target": 2.0,
        "few": {"partitions": 10, "broker_creation_s": 0.1, **run},
        "many": {"partitions": 20, "broker_creation_s": 0.4, **run},
        "wall_ratios": {"first_copy": 1.0, "incremental": 1.5, "nothing_new": 1.0},
        "first_copy_ratio_less_broker_creation": 0.84,
    }
    document = {
        "params": {},
        "machine": {"nproc": 2, "ram_gb": 8, "kafka": "4"},
        "copiers": {},
        "ratios": {},
        "partition_scaling": spread,
    }
    text = report.table(document)
    assert "| airmirror batch | 10 partitions s | 20 partitions s | ratio |" in text
    assert "| incremental | 1.0 | 1.0 | 1.50 |" in text
    assert "| the target broker bringing up as many new partitions | 0.1 | 0.4 | |" in text
    assert "| first copy less that | | | 0.84 |" in text


def test_the_partition_creation_control_times_a_broker_bringing_up_new_partitions_and_leaves_none(
    clusters, prefix
) -> None:
    from confluent_kafka.admin import AdminClient
    from kafka_io import partition_creation_s

    topics = [f"{prefix}-control-{i}" for i in range(3)]
    admin = AdminClient({"bootstrap.servers": clusters["b"].bootstrap})
    assert partition_creation_s(clusters["b"].bootstrap, topics, 4) > 0
    wait_until(
        lambda: not [topic for topic in admin.list_topics(timeout=30).topics if topic.startswith(f"{prefix}-control")],
        30,
        "the control topics and their probe deleted",
    )


def test_live_copiers_default_to_airmirror_and_both_mm2_variants_and_refuse_others() -> None:
    assert bench.parse_args([]).live_copiers == ["airmirror", "mm2_tuned", "mm2_eos"]
    assert bench.parse_args(["--live-copiers", "mm2_tuned, mm2_eos"]).live_copiers == ["mm2_tuned", "mm2_eos"]
    for wrong in ("mm2_default", "", "airmirror,raw_pipe"):
        with pytest.raises(SystemExit):
            bench.parse_args(["--live-copiers", wrong])


def test_mm2_exactly_once_config_enables_it_on_the_target_with_the_internal_rest_server() -> None:
    plain = copiers.mm2_properties("src", "tgt", "127.0.0.1:1", "127.0.0.1:2", "t", tuned=True).splitlines()
    eos = copiers.mm2_properties("src", "tgt", "127.0.0.1:1", "127.0.0.1:2", "t", tuned=True, exactly_once_rest_port=7)
    added = [line for line in eos.splitlines() if line not in plain]
    assert added == [
        "tgt.exactly.once.source.support = enabled",
        "dedicated.mode.enable.internal.rest = true",
        "listeners = http://127.0.0.1:7",
        "src.consumer.isolation.level = read_committed",
    ]


def test_longest_gap_is_the_widest_space_between_consecutive_arrivals() -> None:
    assert live.longest_gap([100, 130, 400, 410]) == 270
    assert live.longest_gap([100]) == 0 == live.longest_gap([])


def test_tables_show_cpu_per_gb_its_ratio_and_the_live_gap() -> None:
    copier = {
        "wall_s": 2.0,
        "steady_mb_s": 50.0,
        "records_per_s": 1000,
        "peak_rss_mb": 300,
        "cpu_s": 3.0,
        "cpu_s_per_gb": 6.0,
    }
    lag = {
        "records": 900,
        "rate": 300,
        "seconds": 3.0,
        "p50": 20,
        "p90": 40,
        "p99": 90,
        "max": 120,
        "mean": 30,
        "longest_gap_ms": 2570,
        "gaps_over_500_ms": 1,
        "partitions": 3,
        "cpu_s": 1.5,
        "peak_rss_mb": 700,
        "floor": {"p50": 2, "p99": 9, "max": 15},
    }
    document = {
        "params": {"records": 1000, "record_size": 512, "partitions": 3},
        "machine": {"nproc": 2, "ram_gb": 8, "kafka": "4"},
        "copiers": {"mm2_tuned": copier, "airmirror": {**copier, "cpu_s_per_gb": 4.5}},
        "live_lag_ms": {"mm2_eos": lag},
    }
    document["ratios"], document["steady_ratios"], document["cpu_per_gb_ratios"] = case_copiers.ratios(
        document["copiers"]
    )
    text = report.table(document)
    assert "| airmirror | 2.0 | 50.0 | 1,000 | 300 | 3.0 | 4.5 |" in text
    assert "| mm2_tuned | 1.00 | 1.00 | 0.75 |" in text
    assert "| mm2_eos | 20 | 40 | 90 | 120 | 2,570 | 1 | 1.5 | 700 | 2 / 9 |" in text


def test_the_scaling_table_shows_the_base_run_and_each_growth() -> None:
    def run(records: int, partitions: int, wall_s: float, **grown: float) -> dict:
        return {"records": records, "partitions": partitions, "wall_s": wall_s, "steady_mb_s": 50.0, **grown}

    scaling = {
        "base": run(1000, 3, 10.0),
        "records_x4": run(4000, 3, 20.0, wall_growth=2.0, peak_rss_mb=500),
        "partitions_x4": run(1000, 12, 12.5, wall_growth=1.25, peak_rss_mb=400),
    }
    document = {"params": {}, "machine": {"nproc": 2, "ram_gb": 8, "kafka": "4"}, "copiers": {}, "ratios": {}}
    text = report.table({**document, "scaling": scaling})
    assert "| base | 1,000 | 3 | 10.0 | 1.00 | 50.0 |" in text
    assert "| records_x4 | 4,000 | 3 | 20.0 | 2.00 | 50.0 |" in text
    assert "| partitions_x4 | 1,000 | 12 | 12.5 | 1.25 | 50.0 |" in text
