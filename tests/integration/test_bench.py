"""``benchmarks/bench.py`` end to end on a small load: every copier runs, every copy verifies, the report is whole.

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


def test_small_bench_verifies_every_copier_and_reports_every_figure(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench.py"), "--records", "3000", "--record-size", "512",
         "--partitions", "3", "--results-dir", str(tmp_path)],
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
    assert document["scaling"]["records_x4"]["records"] == 12000
    assert document["scaling"]["partitions_x4"]["partitions"] == 12
    assert "| airmirror |" in completed.stdout
    assert "verified" in completed.stderr
