"""``benchmarks/bench.py --schema-ids-only`` tiny (issue 24): a registry per cluster, and one ``off`` and one
``translate`` copy of the same Avro records, each checked by the bench itself (translate: every value names the
target's id and decodes with the target registry alone).  A module of its own, so that it runs beside the small bench
of ``test_bench.py`` rather than after it.  No timing is asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench_runner import run_bench

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_tiny_schema_ids_case_checks_both_copies_and_reports_every_ratio(tmp_path: Path) -> None:
    completed, document = run_bench(
        tmp_path,
        *("--schema-ids-only", "--schema-ids-rounds", "1", "--records", "3000", "--record-size", "512"),
        *("--partitions", "3", "--settle-seconds", "0"),
    )
    ids = document["schema_ids"]
    assert [(run["mode"], run["round"]) for run in ids["runs"]] == [("off", 1), ("translate", 1)]
    assert ids["runs"][1]["target_schema_id"] != ids["source_schema_id"]
    assert all(ids[f] > 0 for f in ("ratio_steady", "ratio_wall", "cpu_ratio", "task_cpu_ratio")), ids
    assert "| airmirror.schema.ids | round |" in completed.stdout and "translate / off: throughput" in completed.stdout
