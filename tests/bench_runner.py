"""``benchmarks/bench.py`` run as a user runs it, for the bench's own tests: a child process, its results file read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks" / "bench.py"


def run_bench(results_dir: Path, *flags: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Run the bench with ``flags`` and ``--results-dir results_dir`` (15 minutes at most, with Python's fault
    handler, so that a crash prints its threads' stacks); assert it exited 0 and wrote one results file; return the
    finished process and that file's document."""
    completed = subprocess.run(
        [sys.executable, "-X", "faulthandler", str(BENCH), *flags, "--results-dir", str(results_dir)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert completed.returncode == 0, (
        f"exit {completed.returncode}\nstdout: {completed.stdout[-2000:]}\nstderr: {completed.stderr[-4000:]}"
    )
    (result,) = results_dir.glob("*.json")
    return completed, json.loads(result.read_text())
