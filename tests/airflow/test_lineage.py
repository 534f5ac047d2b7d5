"""OpenLineage of flow runs, with the OpenLineage provider's file transport, against real Kafka and Spark.

Each run is ``airflow dags test`` in a fresh process, as a worker would start: the provider reads its transport
from the environment once, when its plugin loads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import write_config
from tests.kafka_helpers import create_topic, produce, sample_records

pytestmark = pytest.mark.integration

AIRFLOW = Path(sys.executable).parent / "airflow"


def run_with_lineage(config: Path, events: Path) -> None:
    """One ``airflow dags test`` run of flow a->b whose OpenLineage events are appended to ``events``."""
    env = {
        **os.environ,
        "AIRMIRROR_CONFIG": str(config),
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(events), "append": True}),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "airmirror-tests",
    }
    done = subprocess.run(
        [str(AIRFLOW), "dags", "test", "airmirror__a__b"], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]


def completed(events: Path, job: str) -> list[dict]:
    """The COMPLETE events of ``job`` in the order they were written."""
    lines = [json.loads(line) for line in events.read_text().splitlines() if line.strip()]
    return [e for e in lines if e["eventType"] == "COMPLETE" and e["job"]["name"] == job]


def datasets(event: dict, side: str) -> list[tuple[str, str]]:
    return sorted((d["namespace"], d["name"]) for d in event[side])


def test_a_run_that_copies_names_source_and_remote_topics_and_an_idle_run_names_none(
    airflow_db, clusters, prefix, tmp_path
):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    for topic in (f"{prefix}.orders", f"{prefix}.users"):
        create_topic(a, topic)
        produce(a, topic, 0, sample_records(20, topic))
    config = write_config(
        tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.task.retries = 0"
    )
    events = tmp_path / "openlineage.jsonl"

    run_with_lineage(config, events)

    [copying] = completed(events, "airmirror__a__b.record_batch")
    assert datasets(copying, "inputs") == [(f"kafka://{a}", f"{prefix}.orders"), (f"kafka://{a}", f"{prefix}.users")]
    assert datasets(copying, "outputs") == [
        (f"kafka://{b}", f"a.{prefix}.orders"),
        (f"kafka://{b}", f"a.{prefix}.users"),
    ]

    run_with_lineage(config, events)

    [_, idle] = completed(events, "airmirror__a__b.record_batch")
    assert (idle["inputs"], idle["outputs"]) == ([], [])
