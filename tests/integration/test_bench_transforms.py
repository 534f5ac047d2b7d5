"""``benchmarks/bench.py --transforms-only`` tiny (issue 41): JSON records copied by airmirror untransformed, through
MaskField and through the header chain, and by MM2 tuned through the same SMTs, then Avro records copied with ids
translated, without and with MaskField; each copy checked by the bench itself against the copy worked out from the
source (``benchmarks/json_data.py``, ``benchmarks/avro_data.py``).  Enough records that MM2's copy spans
more than one of the target watch's 0.1 s polls (its steady time is a difference of two).  A module of its own, so
that it runs beside the other bench tests rather than after them.  No timing is asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench_runner import run_bench

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_tiny_transforms_case_checks_every_copy_and_reports_every_ratio(tmp_path: Path) -> None:
    completed, document = run_bench(
        tmp_path,
        *("--transforms-only", "--transforms-rounds", "1", "--records", "20000", "--record-size", "256"),
        *("--partitions", "2"),
        "--settle-seconds",
        "0",
    )
    case = document["transforms"]
    assert [(run["run"], run["round"]) for run in case["runs"]] == [
        ("airmirror_plain", 1),
        ("airmirror_mask", 1),
        ("airmirror_header_chain", 1),
        ("mm2_tuned_header_chain", 1),
    ]
    assert case["kept_by_header_chain"] == 18_000  # every tenth record carries the marker the chain filters on
    versus = case["header_chain_vs_mm2_tuned"]
    figures = [versus[f] for f in ("wall", "steady", "steady_job")] + [case["mask_vs_plain"]["steady"]]
    assert all(figure > 0 for figure in figures), case
    assert "header chain, airmirror / MM2 tuned" in completed.stdout and "MaskField on two fields" in completed.stdout
    avro = case["avro"]
    assert [(run["run"], run["round"]) for run in avro["runs"]] == [
        ("airmirror_avro_ids", 1),
        ("airmirror_avro_mask", 1),
    ]
    assert avro["mask_vs_ids"]["steady"] > 0 and "Avro, MaskField on two fields" in completed.stdout
    assert document["copiers"] == {} and "schema_ids" not in document
