"""The Spark session a copy job runs in: a local master retries failed tasks as a cluster does, and a background
session starts only when the run asks (once it holds the flow's lease)."""

from __future__ import annotations

import pytest

from airmirror.replication.pipeline import start_early
from airmirror.replication.spark import session
from airmirror.replication.spark.session import with_task_retries


def test_local_masters_get_task_retries() -> None:
    assert with_task_retries("local[*]") == "local[*,4]"
    assert with_task_retries("local[2]") == "local[2,4]"
    assert with_task_retries("local") == "local[1,4]"
    assert with_task_retries("spark://host:7077") == "spark://host:7077"


def test_a_background_session_starts_only_when_started_and_only_once(monkeypatch) -> None:
    started: list[str] = []
    monkeypatch.setattr(session, "spark_session", lambda master, app_name, conf: started.append(app_name) or app_name)
    background = session.BackgroundSession("local[2]", "airmirror a->b")
    assert started == []
    assert background.start() is background
    background.start()
    assert background() == "airmirror a->b"
    assert started == ["airmirror a->b"]


def test_a_session_that_failed_to_start_raises_its_error_at_the_call(monkeypatch) -> None:
    def refuse(master: str, app_name: str, conf: object) -> None:
        raise RuntimeError("no JVM")

    monkeypatch.setattr(session, "spark_session", refuse)
    with pytest.raises(RuntimeError, match="no JVM"):
        session.BackgroundSession("local[2]", "airmirror a->b")()


def test_start_early_starts_a_factory_that_can_start_and_leaves_plain_factories_alone() -> None:
    class Recording:
        def __init__(self) -> None:
            self.starts = 0

        def start(self) -> Recording:
            self.starts += 1
            return self

    recording = Recording()
    start_early(recording)
    start_early(lambda: None)
    assert recording.starts == 1
