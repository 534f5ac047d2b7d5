"""A manual flow DAG run (``dag.test()``, real local Kafka, real Spark, Airflow's own task runner) copies past
records stamped a day in the future: only backfill runs and ``--until`` bound a run by time.

Scheduled runs are checked the same way end to end under ``airflow standalone`` (``test_standalone.py``),
where the scheduler creates them; backfill runs stopping at their intervals' ends are checked there too.
"""

from __future__ import annotations

import time

import pytest

from tests.airflow.run_helpers import run_flow, task_states
from tests.conftest import write_config
from tests.kafka_helpers import Record, create_topic, produce, records_of, sample_records

pytestmark = pytest.mark.integration

DAY_MS = 86_400_000
# Kafka 4 rejects records stamped more than an hour ahead by default; these topics accept a week.
ACCEPTS_FUTURE = {"message.timestamp.after.max.ms": str(7 * DAY_MS)}


def run_type_of(run) -> str:
    return str(getattr(run.run_type, "value", run.run_type))


def future_record(label: str) -> Record:
    return Record(
        f"{label}-key".encode(), f"{label} stamped a day ahead".encode(), (), int(time.time() * 1000) + DAY_MS
    )


def test_manual_runs_copy_past_records_stamped_in_the_future(airflow_db, clusters, prefix, tmp_path, dag_bag_for):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.ahead"
    create_topic(a, topic, config=ACCEPTS_FUTURE)
    config = write_config(
        tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.task.retries = 0"
    )
    produce(a, topic, 0, [*sample_records(10, "before"), future_record("first"), *sample_records(10, "after")])
    first = run_flow(dag_bag_for, config)
    assert run_type_of(first) == "manual"
    states = task_states(first)
    assert states.pop("verify") == "skipped" and set(states.values()) == {"success"}
    assert len(records_of(b, f"a.{topic}", 0)) == 21
    assert records_of(b, f"a.{topic}", 0) == records_of(a, topic, 0)

    produce(a, topic, 0, [future_record("second"), *sample_records(5, "more")])
    second = run_flow(dag_bag_for, config)
    assert task_states(second)["record_batch"] == "success"
    assert len(records_of(b, f"a.{topic}", 0)) == 27
    assert records_of(b, f"a.{topic}", 0) == records_of(a, topic, 0)
