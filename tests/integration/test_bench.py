"""``benchmarks/bench.py`` end to end on a small load: every copier runs, every copy verifies, the report is whole.

The big-partition case (issue 9) runs tiny too (20,000 records and 2,000), and so does the partition-scaling
case (issue 22: 100 records over 10 and over 20 partitions), so their code paths are exercised.

No timing is asserted: the bench only has to run, check its copies and report every figure.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
COPIERS = ("raw_pipe", "mm2_default", "mm2_tuned", "airmirror")
FIGURES = {"wall_s", "steady_mb_s", "records_per_s", "peak_rss_mb"}
RATIOS = {"airmirror_vs_mm2_tuned", "airmirror_vs_mm2_default", "airmirror_vs_raw_pipe"}
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
    completed = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench.py"), "--records", "3000", "--record-size", "512",
         "--partitions", "3", "--big-partition-records", "20000", "--live-rate", "300", "--live-seconds", "3", "--settle-seconds", "0",
         "--partition-scaling-records", "100", "--partition-scaling-partitions", "10,20",
         "--results-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    [result] = tmp_path.glob("*.json")
    document = json.loads(result.read_text())
    assert set(document["copiers"]) == set(COPIERS)
    for name, figures in document["copiers"].items():
        assert FIGURES <= set(figures), name
        assert all(figures[f] > 0 for f in FIGURES), (name, figures)
    assert set(document["ratios"]) == RATIOS == set(document["steady_ratios"])
    assert document["latency"]["records"] == 1000
    assert all(document["verify"][f] > 0 for f in ("wall_s", "job_s", "records_per_s", "vs_copy_job")), document["verify"]
    assert "| airmirror verify |" in completed.stdout
    assert document["scaling"]["records_x4"]["records"] == 12000
    assert document["scaling"]["partitions_x4"]["partitions"] == 12
    live = document["live_lag_ms"]
    assert set(live) == {"airmirror", "mm2_tuned"}
    for name, figures in live.items():
        assert figures["records"] == 900 and 0 <= figures["p50"] <= figures["p99"] <= figures["max"], (name, figures)
        assert figures["cpu_s"] > 0, (name, figures)
    assert "| live copier |" in completed.stdout
    big = document["big_partition"]
    assert (big["records"], big["small_records"], big["partitions"]) == (20000, 2000, 1)
    assert big["transaction_timeout_ms"] == 15000
    assert all(big[f] > 0 for f in BIG_FIGURES), big
    assert {"cli", "jvm", "python"} <= set(big["peak_rss_by_role_mb"]), big["peak_rss_by_role_mb"]
    assert big["rss_timeline"] and big["small_rss_timeline"]
    assert "| airmirror |" in completed.stdout
    assert "| big | 20,000 |" in completed.stdout
    assert "peak_rss_ratio_big_vs_small" in completed.stdout
    assert "verified" in completed.stderr
    spread = document["partition_scaling"]
    assert (spread["few"]["partitions"], spread["many"]["partitions"], spread["many"]["topics"]) == (10, 20, 2)
    for batch in ("first_copy", "incremental", "nothing_new"):
        assert spread["few"][batch]["wall_s"] > 0 and spread["many"][batch]["wall_s"] > 0, (batch, spread)
        assert spread["wall_ratios"][batch] > 0, spread
    assert spread["few"]["nothing_new"]["copy_job_s"] is None and spread["many"]["incremental"]["copy_job_s"] > 0
    assert "| incremental |" in completed.stdout
