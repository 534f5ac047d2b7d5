"""The trigger-form params of a flow DAG, and how a run's params and data interval become BatchOptions.

Rules:
- Only a backfill run (run type ``backfill``) or an explicit ``until`` param bounds a batch by time
  (:func:`bounds_by_time`).  A backfill run copies the records whose timestamps are before the end of its
  data interval, so backfills migrate history interval by interval, in order, and re-running a finished
  interval finds nothing left to copy.  Every other run (``scheduled``, ``asset_triggered``, ``manual``
  without ``until``, ...) copies up to the last stable offset: the broker resolves a time bound to the first
  offset whose timestamp is at or after it, so one record stamped in the future (say a day ahead) would pin
  that bound at its offset and hold back every record after it until the wall clock passed its timestamp.
  Without a time bound, a record stamped in the future never holds back the records after it beyond one
  schedule interval.
- ``start_from`` other than ``stored`` decides where partitions start; moving a partition's existing cursor
  also needs ``reset_cursor=true`` (checked against the store before any work starts).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from airflow.sdk import Param

from airmirror.errors import InputError
from airmirror.replication.options import START_KEYWORDS, BatchOptions, parse_batch_options, parse_timestamp

PARAM_NAMES = {"max_records": "max_records_per_partition"}
BACKFILL_RUN_TYPE = "backfill"  # DagRunType.BACKFILL_JOB


SECTION_WHAT = "What to copy"
SECTION_WHERE = "Where to start and stop"
SECTION_SAFETY = "Safety"
SECTION_VERIFY = "Verification"


def date_time_param(title: str, description: str) -> Param:
    """An optional time of the "Where to start and stop" section, picked with the form's date-time picker."""
    return Param(
        None, type=["null", "string"], format="date-time", title=title, description=description, section=SECTION_WHERE
    )


def flow_params() -> dict[str, Param]:
    """Params shown, with descriptions and JSON-schema validation, in the trigger form, grouped in sections:
    ``start_from`` proposes its keywords (a timestamp may still be typed), ``start_at`` and ``until`` have
    date-time pickers."""
    return {
        "topics": Param(
            "",
            type="string",
            title="Topics subset",
            description="Regex (full match) narrowing the flow's replicated source topics for this run; empty = all.",
            section=SECTION_WHAT,
        ),
        "max_records_per_partition": Param(
            None,
            type=["null", "integer"],
            minimum=1,
            title="Max records per partition",
            description="Cap of this run's batch per partition. Default: airmirror.batch.max.records.per.partition.",
            section=SECTION_WHAT,
        ),
        "start_from": Param(
            "stored",
            type="string",
            title="Start from",
            description="'stored' (the cursor), 'earliest', 'latest', or an ISO-8601 timestamp (or pick one in "
            "'Start at'). Moving an existing cursor also needs reset_cursor.",
            pattern=r"^(stored|earliest|latest|\d{4}-\d{2}-\d{2}([T ].*)?)$",
            examples=list(START_KEYWORDS),
            section=SECTION_WHERE,
        ),
        "start_at": date_time_param(
            "Start at",
            "Start each partition at its first record stamped at or after this time (the same as start_from set to "
            "that timestamp; leave start_from at 'stored').",
        ),
        "until": date_time_param(
            "Until",
            "Copy records stamped before this time. Default: no time bound (copy to the last stable offset), except "
            "in backfill runs, which stop at their data interval end.",
        ),
        "reset_cursor": Param(
            False,
            type="boolean",
            title="Reset cursor",
            description="Allow start_from or start_at to move existing cursors.",
            section=SECTION_SAFETY,
        ),
        "dry_run": Param(
            False,
            type="boolean",
            title="Dry run",
            description="Plan and log the batch; change nothing.",
            section=SECTION_SAFETY,
        ),
        "verify": Param(
            False,
            type="boolean",
            title="Verify",
            description="After the batch is recorded, compare every replicated partition (narrowed by 'Topics subset') "
            "with its source, record by record, as 'airmirror verify' does; the task fails on any difference.",
            section=SECTION_VERIFY,
        ),
    }


def run_type_name(dag_run: Any) -> str | None:
    """The run type of an Airflow DagRun (``context["dag_run"]``) as its plain value, e.g. ``"scheduled"``;
    None when there is no run (or it has no type)."""
    run_type = getattr(dag_run, "run_type", None)
    if run_type is None:
        return None
    return str(getattr(run_type, "value", run_type))


def bounds_by_time(run_type: str | None, until: Any) -> bool:
    """Whether a run's batch is bounded by time: an explicit ``until`` param always bounds it; otherwise only
    a backfill run does (by its data interval end).  Scheduled, asset-triggered, manual and every other run
    type copy to the last stable offset, so a record stamped in the future cannot hold the flow back."""
    return bool(until) or run_type == BACKFILL_RUN_TYPE


def start_from(params: Mapping[str, Any]) -> str | None:
    """The run's start: ``start_at`` (a picked time) or ``start_from``; InputError when both move the start."""
    start_at, keyword = params.get("start_at"), params.get("start_from")
    if not start_at:
        return keyword
    if keyword not in (None, "", "stored"):
        raise InputError(f"param 'start_at' and param 'start_from' ('{keyword}') both set where to start: give one")
    parse_timestamp(str(start_at), "param 'start_at'")
    return str(start_at)


def batch_options(
    params: Mapping[str, Any], data_interval_end: datetime | None, *, run_type: str | None = None
) -> BatchOptions:
    """Validate a run's params (InputError naming the param) and resolve them into BatchOptions.

    ``run_type`` is the Airflow run type (:func:`run_type_name`); the time bound follows
    :func:`bounds_by_time`: the ``until`` param, else a backfill run's ``data_interval_end``, else none."""
    until = params.get("until")
    interval_end = data_interval_end if bounds_by_time(run_type, until) else None
    return parse_batch_options(
        named=lambda option: f"param '{PARAM_NAMES.get(option, option)}'",
        topics=params.get("topics"),
        start_from=start_from(params),
        until=until,
        max_records=params.get("max_records_per_partition"),
        dry_run=params.get("dry_run", False),
        reset_cursor=params.get("reset_cursor", False),
        default_until_ms=None if interval_end is None else int(interval_end.timestamp() * 1000),
    )
