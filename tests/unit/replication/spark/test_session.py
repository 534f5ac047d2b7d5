"""The Spark master a copy job runs on: a local master retries failed tasks as a cluster does."""

from __future__ import annotations

from airmirror.replication.spark.session import with_task_retries


def test_local_masters_get_task_retries() -> None:
    assert with_task_retries("local[*]") == "local[*,4]"
    assert with_task_retries("local[2]") == "local[2,4]"
    assert with_task_retries("local") == "local[1,4]"
    assert with_task_retries("spark://host:7077") == "spark://host:7077"
