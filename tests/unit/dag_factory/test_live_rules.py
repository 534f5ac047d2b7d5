"""Which DAG runs are live, and how live emission tasks repeat (:mod:`airmirror.dag_factory.live`)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airmirror.config import load_config
from airmirror.dag_factory.live import emit_repeatedly, live_seconds

END = datetime(2026, 11, 24, 3, 0, tzinfo=UTC)


def context(run_type: str = "scheduled", seconds: float = 60, **params: Any) -> dict[str, Any]:
    return {
        "params": {"dry_run": False, "until": None, **params},
        "dag_run": SimpleNamespace(run_type=run_type),
        "data_interval_start": END - timedelta(seconds=seconds),
        "data_interval_end": END,
    }


@pytest.mark.parametrize("run_type", ["scheduled", "manual", "asset_triggered"])
def test_a_live_run_lasts_its_data_interval(run_type: str) -> None:
    assert live_seconds(True, context(run_type, 90)) == 90


def test_runs_of_a_flow_without_live_mode_copy_one_batch() -> None:
    assert live_seconds(False, context()) is None


@pytest.mark.parametrize(
    "ctx",
    [context("backfill"), context(until="2026-11-24T02:00:00Z"), context(dry_run=True), context(seconds=0)],
    ids=["backfill", "until", "dry run", "empty interval"],
)
def test_time_bounded_dry_and_empty_runs_are_not_live(ctx: dict[str, Any]) -> None:
    assert live_seconds(True, ctx) is None


def test_a_run_without_data_interval_is_not_live() -> None:
    assert live_seconds(True, {"params": {}, "dag_run": SimpleNamespace(run_type="manual")}) is None


def test_emissions_repeat_for_the_window_at_most_once_per_tick() -> None:
    times: list[float] = []
    started = time.monotonic()
    emitted = emit_repeatedly(lambda: times.append(time.monotonic()), 0.1, 0.55)
    assert 2 <= emitted == len(times) <= 6
    assert all(time_ >= started + 0.1 * tick for tick, time_ in enumerate(times))


def test_a_failed_emission_is_tried_again_at_the_next_tick() -> None:
    calls: list[int] = []

    def flaky() -> None:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("broker away")

    assert emit_repeatedly(flaky, 0.05, 0.2) == len(calls) - 1


def test_the_task_fails_when_the_last_emission_of_the_window_failed() -> None:
    def broken() -> None:
        raise RuntimeError("broker away")

    with pytest.raises(RuntimeError, match="broker away"):
        emit_repeatedly(broken, 0.05, 0.12)


def test_a_stop_ends_the_window_early() -> None:
    stop = threading.Event()
    stop.set()
    assert emit_repeatedly(lambda: None, 10, 3600, stop=stop) == 0


@pytest.mark.parametrize("interval", [0, -1])
def test_emissions_never_repeat_at_an_interval_that_is_not_positive(interval: float) -> None:
    calls: list[float] = []
    with pytest.raises(ValueError, match="must be positive"):
        emit_repeatedly(lambda: calls.append(time.monotonic()), interval, 5)
    assert calls == []


@pytest.mark.parametrize("what", ["heartbeats", "checkpoints"])
def test_an_emission_task_turned_off_by_a_negative_interval_skips_naming_the_key(tmp_path: Path, what: str) -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    from airmirror.dag_factory.flow_dag import run_emission

    path = tmp_path / "mm2.properties"
    path.write_text(
        f"clusters = a, b\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\na->b.enabled = true\n"
        f"emit.{what}.interval.seconds = -1\n"
    )
    flow = load_config(path, env={}).flow("a->b")
    with pytest.raises(AirflowSkipException, match=rf"emit\.{what}\.interval\.seconds is -1 \(negative: off"):
        run_emission(what, getattr(flow, what), True, str(path), flow.name)
