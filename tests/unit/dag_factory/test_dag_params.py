"""Flow-DAG logic that needs no cluster: schedules, run params and time bounds per run type, emission intervals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from airflow.sdk.api.datamodels._generated import DagRunType as SdkDagRunType
from airflow.utils.types import DagRunType

from airmirror.dag_factory.emitter_tasks import is_due
from airmirror.dag_factory.params import batch_options, bounds_by_time, flow_params, run_type_name
from airmirror.dag_factory.schedule import parse_schedule
from airmirror.errors import ConfigError, InputError

END = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def test_durations_become_fixed_data_intervals():
    assert parse_schedule("1m").delta == timedelta(minutes=1)
    assert parse_schedule("90s").delta == timedelta(seconds=90)
    assert parse_schedule("2h").delta == timedelta(hours=2)


def test_crons_become_cron_data_intervals():
    assert type(parse_schedule("*/5 * * * *")).__name__ == "CronDataIntervalTimetable"
    assert type(parse_schedule("@hourly")).__name__ == "CronDataIntervalTimetable"


@pytest.mark.parametrize("value", ["every minute", "0m", "61 * * * *", ""])
def test_bad_schedules_name_the_key(value):
    with pytest.raises(ConfigError, match=r"airmirror\.schedule"):
        parse_schedule(value, line=3)


END_MS = int(END.timestamp() * 1000)
UNTIL = "2024-04-01T00:00:00Z"
UNTIL_MS = int(datetime(2024, 4, 1, tzinfo=UTC).timestamp() * 1000)
EVERY_RUN_TYPE = [t.value for t in DagRunType]


@pytest.mark.parametrize("run_type", [*EVERY_RUN_TYPE, None])
@pytest.mark.parametrize("until", [None, "", UNTIL])
def test_only_backfills_and_an_explicit_until_bound_by_time(run_type, until):
    expected = bool(until) or run_type == "backfill"
    assert bounds_by_time(run_type, until) is expected


@pytest.mark.parametrize(
    ("run_type", "params", "until_ms"),
    [
        ("scheduled", {}, None),
        ("asset_triggered", {}, None),
        ("manual", {}, None),
        ("manual", {"until": None}, None),
        ("operator_triggered", {}, None),
        (None, {}, None),
        ("backfill", {}, END_MS),
        ("backfill", {"until": ""}, END_MS),
        ("backfill", {"until": UNTIL}, UNTIL_MS),
        ("scheduled", {"until": UNTIL}, UNTIL_MS),
        ("manual", {"until": UNTIL}, UNTIL_MS),
    ],
)
def test_time_bound_per_run_type_and_until_param(run_type, params, until_ms):
    options = batch_options(params, END, run_type=run_type)
    assert options.until_ms == until_ms
    assert (options.start_from, options.reset_cursor, options.dry_run, options.topics_regex) == (
        "stored",
        False,
        False,
        None,
    )


def test_a_backfill_without_data_interval_has_no_time_bound():
    assert batch_options({}, None, run_type="backfill").until_ms is None


@pytest.mark.parametrize("run_type", list(DagRunType) + list(SdkDagRunType))
def test_run_type_name_reads_airflow_run_types(run_type):
    assert run_type_name(SimpleNamespace(run_type=run_type)) == run_type.value
    assert bounds_by_time(run_type_name(SimpleNamespace(run_type=run_type)), None) is (run_type.value == "backfill")


def test_run_type_name_without_a_run():
    assert run_type_name(None) is None
    assert run_type_name(SimpleNamespace(run_type="scheduled")) == "scheduled"


def test_explicit_params_override():
    options = batch_options(
        {
            "until": UNTIL,
            "topics": "orders.*",
            "start_from": "2024-03-01",
            "reset_cursor": True,
            "max_records_per_partition": 10,
            "dry_run": True,
        },
        END,
    )
    assert options.until_ms == UNTIL_MS
    assert options.start_from == "timestamp" and options.start_ms == int(
        datetime(2024, 3, 1, tzinfo=UTC).timestamp() * 1000
    )
    assert (options.topics_regex, options.reset_cursor, options.max_records, options.dry_run) == (
        "orders.*",
        True,
        10,
        True,
    )


@pytest.mark.parametrize(
    ("params", "name"),
    [
        ({"topics": "(bad"}, "topics"),
        ({"until": "soon"}, "until"),
        ({"start_from": "2024-13-45"}, "start_from"),
        ({"max_records_per_partition": 0}, "max_records_per_partition"),
        ({"start_at": "someday"}, "start_at"),
        ({"start_at": "2024-03-01T00:00:00Z", "start_from": "earliest"}, "start_at"),
    ],
)
def test_invalid_params_name_the_param(params, name):
    with pytest.raises(InputError, match=f"'{name}'"):
        batch_options(params, END)


@pytest.mark.parametrize("start_from", [None, "", "stored"])
def test_a_picked_start_time_starts_like_a_timestamp_start_from(start_from):
    options = batch_options({"start_at": "2024-03-01T00:00:00+00:00", "start_from": start_from}, END)
    assert options.start_from == "timestamp"
    assert options.start_ms == int(datetime(2024, 3, 1, tzinfo=UTC).timestamp() * 1000)


def test_the_trigger_form_groups_params_and_offers_pickers():
    params = flow_params()
    assert {param.schema["section"] for param in params.values()} == {
        "What to copy",
        "Where to start and stop",
        "Safety",
        "Verification",
    }
    assert params["start_from"].schema["examples"] == ["stored", "earliest", "latest"]
    assert params["start_at"].schema["format"] == params["until"].schema["format"] == "date-time"
    assert all(param.description for param in params.values())


def test_emission_at_most_once_per_interval():
    minute = (END - timedelta(minutes=1), END)
    assert is_due(1, *minute) and is_due(60, *minute)
    assert [is_due(300, END + timedelta(minutes=m - 1), END + timedelta(minutes=m)) for m in range(1, 11)].count(
        True
    ) == 2
    assert is_due(300, None, None)
