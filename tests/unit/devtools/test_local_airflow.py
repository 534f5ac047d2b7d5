"""The local Airflow's REST client (:class:`airmirror.devtools.local_airflow.AirflowApi`) against a scripted
transport: a busy Airflow (503, or no answer within the timeout) is asked again, but a POST is never repeated."""

from __future__ import annotations

import httpx
import pytest

from airmirror.devtools.local_airflow import AirflowApi
from airmirror.errors import ReplicationFailure


def api(*answers: int | type[Exception]) -> tuple[AirflowApi, list[str]]:
    """A client whose requests get ``answers`` in turn (a status, or an exception raised), and the methods seen."""
    seen: list[str] = []
    pending = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.method)
        answer = pending.pop(0)
        if isinstance(answer, int):
            return httpx.Response(answer, json={"ok": answer})
        raise answer("no answer in time", request=request)

    return AirflowApi(httpx.Client(base_url="http://airflow.test", transport=httpx.MockTransport(handle))), seen


def test_an_idempotent_call_is_asked_again_after_a_timeout_or_a_busy_answer() -> None:
    client, seen = api(httpx.ReadTimeout, 503, 200)
    assert client.call("PATCH", "/dags/d", json={"is_paused": False}) == {"ok": 200}
    assert seen == ["PATCH", "PATCH", "PATCH"]


def test_a_post_that_timed_out_is_not_sent_twice() -> None:
    client, seen = api(httpx.ReadTimeout, 200)
    with pytest.raises(httpx.ReadTimeout):
        client.call("POST", "/backfills", json={})
    assert seen == ["POST"]


def test_an_error_status_raises_at_once() -> None:
    client, seen = api(404)
    with pytest.raises(ReplicationFailure, match="GET /dags/d: 404"):
        client.call("GET", "/dags/d")
    assert seen == ["GET"]
