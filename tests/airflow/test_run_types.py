"""The time bound of a flow DAG run depends on its run type: ``dag.test()`` runs of type scheduled, manual and
backfill against real local Kafka, real Spark and Airflow's own task runner, over a partition holding one
record stamped a day in the future.

``dag.test()`` always creates a ``manual`` run.  :func:`run_of_type` makes it create the run with another
type instead (a real DagRun row with that ``run_type``, created by Airflow's ``create_dagrun`` as the scheduler
or a backfill would); the tasks then read it through the execution API like in any deployment.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest

from tests.airflow.test_flow_runs import run_flow, task_states
from tests.conftest import write_config
from tests.kafka_helpers import Record, create_topic, produce, records_of, sample_records

pytestmark = pytest.mark.integration

DAY_MS = 86_400_000
# Kafka 4 rejects records stamped more than an hour ahead by default; these topics accept a week.
ACCEPTS_FUTURE = {"message.timestamp.after.max.ms": str(7 * DAY_MS)}


def run_of_type(monkeypatch, run_type: str) -> None:
    """Make the next ``dag.test()`` calls create their DagRun with ``run_type`` (``scheduled``, ``backfill``)."""
    import airflow.models.dagrun as dagrun_module
    from airflow.models.dagrun import DagRun
    from airflow.utils.state import DagRunState
    from airflow.utils.types import DagRunTriggeredByType, DagRunType
    from sqlalchemy import select

    kind = DagRunType(run_type)
    triggered_by = {DagRunType.BACKFILL_JOB: DagRunTriggeredByType.BACKFILL}.get(kind, DagRunTriggeredByType.TIMETABLE)

    def get_or_create_dagrun(*, dag, logical_date, data_interval, run_after, conf, start_date, session, **_manual):
        """Airflow's own helper for ``dag.test()``, with ``run_type`` (and its run id and trigger) instead of
        ``manual``."""
        existing = session.scalar(select(DagRun).where(DagRun.dag_id == dag.dag_id, DagRun.logical_date == logical_date))
        if existing:
            session.delete(existing)
            session.commit()
        return dag.create_dagrun(
            run_id=DagRun.generate_run_id(run_type=kind, logical_date=logical_date, run_after=run_after),
            logical_date=logical_date,
            data_interval=data_interval,
            run_after=run_after,
            conf=conf,
            run_type=kind,
            state=DagRunState.RUNNING,
            triggered_by=triggered_by,
            triggering_user_name=None,
            start_date=start_date,
            session=session,
        )

    monkeypatch.setattr(dagrun_module, "get_or_create_dagrun", get_or_create_dagrun)


def run_now(dag_bag_for, config, conf: dict | None = None):
    """A run whose data interval ends now (the flow's default ``1m`` schedule: ``(now - 1m, now]``)."""
    bag = dag_bag_for(config)
    assert bag.import_errors == {}
    return bag.dags["airmirror__a__b"].test(logical_date=datetime.now(timezone.utc), run_conf=conf)


def run_type_of(run) -> str:
    return str(getattr(run.run_type, "value", run.run_type))


def future_record(label: str) -> Record:
    return Record(f"{label}-key".encode(), f"{label} stamped a day ahead".encode(), (), int(time.time() * 1000) + DAY_MS)


def flow_config(tmp_path, clusters, prefix):
    return write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.task.retries = 0")


def test_scheduled_and_manual_runs_copy_past_a_record_stamped_in_the_future(airflow_db, clusters, prefix, tmp_path, dag_bag_for, monkeypatch):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.ahead"
    create_topic(a, topic, config=ACCEPTS_FUTURE)
    before, after = sample_records(10, "before"), sample_records(10, "after")
    produce(a, topic, 0, [*before, future_record("first"), *after])
    assert len(records_of(a, topic, 0)) == 21
    config = flow_config(tmp_path, clusters, prefix)

    with monkeypatch.context() as patched:
        run_of_type(patched, "scheduled")
        scheduled = run_now(dag_bag_for, config)
    assert run_type_of(scheduled) == "scheduled"
    assert set(task_states(scheduled).values()) == {"success"}
    assert records_of(b, f"a.{topic}", 0) == records_of(a, topic, 0)
    assert len(records_of(b, f"a.{topic}", 0)) == 21

    more = sample_records(5, "more")
    produce(a, topic, 0, [future_record("second"), *more])
    assert len(records_of(a, topic, 0)) == 27
    manual = run_flow(dag_bag_for, config)
    assert run_type_of(manual) == "manual"
    assert task_states(manual)["record_batch"] == "success"
    assert records_of(b, f"a.{topic}", 0) == records_of(a, topic, 0)
    assert len(records_of(b, f"a.{topic}", 0)) == 27


def test_a_backfill_run_stops_at_a_record_stamped_after_its_interval(airflow_db, clusters, prefix, tmp_path, dag_bag_for, monkeypatch):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.pinned"
    create_topic(a, topic, config=ACCEPTS_FUTURE)
    before, after = sample_records(10, "before"), sample_records(10, "after")
    produce(a, topic, 0, [*before, future_record("pin"), *after])
    assert len(records_of(a, topic, 0)) == 21
    config = flow_config(tmp_path, clusters, prefix)

    with monkeypatch.context() as patched:
        run_of_type(patched, "backfill")
        backfill = run_now(dag_bag_for, config)
    assert run_type_of(backfill) == "backfill"
    assert task_states(backfill)["record_batch"] == "success"
    assert records_of(b, f"a.{topic}", 0) == before

    with monkeypatch.context() as patched:
        run_of_type(patched, "scheduled")
        scheduled = run_now(dag_bag_for, config)
    assert task_states(scheduled)["record_batch"] == "success"
    assert records_of(b, f"a.{topic}", 0) == records_of(a, topic, 0)
    assert len(records_of(b, f"a.{topic}", 0)) == 21
