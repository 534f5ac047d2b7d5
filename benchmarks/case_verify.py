"""The verify case (issue 14): ``airmirror verify`` of the flow the copier case's airmirror run copied, right after
it, beside it.  Results: ``verify`` (:class:`VerifyFigures`)."""

from __future__ import annotations

import re
import subprocess
import time
from typing import TypedDict

from runs import AIRMIRROR, AirmirrorFlow, CopyFigures, SourceTopic

VERIFY_JOB_LOG = re.compile(
    r"verify job: \d+ partitions, (?P<records>\d+) source records, \d+ target records in (?P<seconds>[\d.]+) s"
)
"""airmirror's INFO line on its verify job."""


class VerifyFigures(TypedDict):
    """Wall time of the whole command and of its Spark job, as seconds and records/s, and the copy's over them."""

    wall_s: float
    job_s: float
    records_per_s: int
    job_records_per_s: int
    vs_replicate_wall: float
    """The copy's wall time over verify's (above 1: verify is faster)."""
    vs_copy_job: float
    """The copy job's seconds over verify's job's."""


def run_verify(source: SourceTopic, flow: AirmirrorFlow, copied: CopyFigures, timeout: float) -> VerifyFigures:
    """``airmirror verify`` of ``flow``, which copied ``source`` as ``copied`` says; exits unless it succeeds and
    compares every source record."""
    command = [AIRMIRROR, "-v", "verify", str(flow.config), "--flow", flow.flow, "--json"]
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


def verify_lines(checked: VerifyFigures | None) -> list[str]:
    """The case's table (no lines when the bench did not run it)."""
    if not checked:
        return []
    return [
        "",
        "| airmirror verify | wall s | records/s | Spark job s | job records/s | x replicate wall | x copy job |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| verify | {checked['wall_s']:.1f} | {checked['records_per_s']:,} | {checked['job_s']:.1f} | "
        f"{checked['job_records_per_s']:,} | {checked['vs_replicate_wall']:.2f} | {checked['vs_copy_job']:.2f} |",
    ]
