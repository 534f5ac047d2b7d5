"""The replication view inside Airflow's real API app, in process: the flow DAGs parsed and stored in Airflow's
metadata DB as the DAG processor stores them, the app built by Airflow (``create_app``) with the airmirror
plugin mounted by Airflow's plugin manager, real logins (``POST /auth/token``) and per-DAG permission decided
by a real auth manager (:mod:`tests.airflow.dag_scoped_auth`: SimpleAuthManager plus "``reader`` may not read
``airmirror__a__c``", since SimpleAuthManager alone cannot refuse one DAG to a user).

Five flows, each with its own metadata DB: a->b, a->c and b->c are migrated and hold samples and a committed batch
(a->c's newest run failed after it; b->c lags and has a stopped partition), b->a's DB file does not exist and
c->a's is an empty SQLite file.  The view must not create, migrate or write any of them.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from airmirror.model import LagSample, PartitionKey, RunFailure
from airmirror.store import MetadataStore
from tests.airflow.dag_scoped_auth import CLASS_PATH, HIDDEN_DAG, READER
from tests.store_helpers import commit_ten

pytestmark = pytest.mark.integration

ADMIN = "admin"
FLOWS = {"a->b": "healthy", "a->c": "failing", "b->c": "lagging", "b->a": "missing", "c->a": "empty"}
MIGRATED = ("healthy", "failing", "lagging")


@dataclass(frozen=True)
class ViewServer:
    client: httpx.Client
    home: Path
    tokens: dict[str, str]

    def get(self, path: str, user: str | None = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[user]}"} if user else {}
        return self.client.get(path, headers=headers)


def tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as connection:
        return [name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]


@pytest.fixture(scope="module")
def view(airflow_db, tmp_path_factory) -> Iterator[ViewServer]:
    from airflow.api_fastapi.app import create_app, purge_cached_app
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    from fastapi.testclient import TestClient

    home = tmp_path_factory.mktemp("replication-view")
    lines = ["clusters = a, b, c", *(f"{alias}.bootstrap.servers = 127.0.0.1:1" for alias in "abc")]
    for flow, state in FLOWS.items():
        db = home / f"{flow.replace('->', '_')}.db"
        lines += [f"{flow}.enabled = true", f"{flow}.airmirror.metadata.db.url = sqlite:///{db}"]
        if state in MIGRATED:
            with MetadataStore.open(f"sqlite:///{db}") as store:
                now = datetime.now(UTC)
                samples = [LagSample("orders", 0, now - timedelta(minutes=m), 10 * m, None, None) for m in (30, 10)]
                store.record_lag_samples(flow, samples)
                commit_ten(store, flow)
                commit_ten(store, flow, partition=1)
                if state == "failing":
                    store.record_run_failure(flow, RunFailure(datetime.now(UTC), "cannot reach cluster 'c': refused"))
                if state == "lagging":
                    store.record_lag_samples(flow, [LagSample("orders", 0, datetime.now(UTC), 5_000, 900_000, None)])
                    store.stop_partition(flow, PartitionKey("orders", 1), "source partition orders-1 was deleted")
        elif state == "empty":
            sqlite3.connect(db).close()
    config = home / "mm2.properties"
    config.write_text("\n".join(lines) + "\n")

    with pytest.MonkeyPatch.context() as env:
        env.setenv("AIRMIRROR_CONFIG", str(config))
        env.setenv("AIRFLOW__CORE__AUTH_MANAGER", CLASS_PATH)
        env.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", f"{ADMIN}:admin,{READER}:viewer")
        env.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", str(home / "passwords.json"))
        bag = DagBag(dag_folder=str(Path(__file__).resolve().parents[2] / "dags"))
        assert bag.import_errors == {}
        DagBundlesManager().sync_bundles_to_db()
        sync_bag_to_db(bag, "dags-folder", None)
        purge_cached_app()
        app = create_app(apps="core")
        try:
            with TestClient(app) as client:
                passwords = json.loads((home / "passwords.json").read_text())
                logins = {
                    user: client.post("/auth/token", json={"username": user, "password": passwords[user]})
                    for user in (ADMIN, READER)
                }
                yield ViewServer(client, home, {user: login.json()["access_token"] for user, login in logins.items()})
        finally:
            purge_cached_app()


def test_a_user_sees_only_the_flows_whose_dag_they_may_read(view: ViewServer):
    assert view.get(f"/api/v2/dags/{HIDDEN_DAG}", READER).status_code == 403, "Airflow itself refuses the DAG"
    assert {f["flow"] for f in view.get("/airmirror/api/flows", READER).json()} == {"a->b", "b->a", "b->c", "c->a"}
    assert {f["flow"] for f in view.get("/airmirror/api/flows", ADMIN).json()} == set(FLOWS)
    index = view.get("/airmirror/", READER)
    assert index.status_code == 200 and "a-&gt;b" in index.text and "a-&gt;c" not in index.text
    for path in ("/airmirror/api/flows/a-%3Ec", "/airmirror/flows/a-%3Ec", f"/airmirror/dags/{HIDDEN_DAG}"):
        assert view.get(path, READER).status_code == 404, path
        assert view.get(path, ADMIN).status_code == 200, path
    page = view.get("/airmirror/flows/a-%3Eb", READER)
    assert page.status_code == 200 and 'data-topic="orders"' in page.text and "<polyline" in page.text


def test_the_overview_shows_each_flows_state_worst_first_with_its_figures(view: ViewServer):
    flows = view.get("/airmirror/api/flows", ADMIN).json()

    assert [(f["flow"], f["state"]) for f in flows][:3] == [
        ("a->c", "failing"),
        ("b->c", "stopped partitions"),
        ("a->b", "healthy"),
    ]
    assert {f["flow"]: f["state"] for f in flows[3:]} == {"b->a": "unavailable", "c->a": "unavailable"}
    shown = {f["flow"]: f for f in flows}
    assert "refused" in shown["a->c"]["last_failure"]["error"]
    lagging = shown["b->c"]
    assert lagging["states"] == ["stopped partitions", "lagging"]
    assert (lagging["stopped_partitions"], lagging["lag_records"], lagging["oldest_record_age_ms"]) == (
        1,
        5_000,
        900_000,
    )
    assert "flow c->b, which is not enabled" in lagging["latency_note"]
    assert "no heartbeat has travelled a->b yet" in shown["a->b"]["latency_note"]  # b->a is enabled
    assert shown["a->b"]["partitions"] == 2 and len(shown["a->b"]["lag_sparkline"]) == 2

    page = view.get("/airmirror/", ADMIN).text
    for flow, state in (("a->c", "failing"), ("b->c", "stopped partitions"), ("a->b", "healthy")):
        assert f'data-flow="{flow.replace(">", "&gt;")}" data-state="{state}"' in page
    assert page.index('data-flow="a-&gt;c"') < page.index('data-flow="b-&gt;c"') < page.index('data-flow="a-&gt;b"')
    assert 'class="sparkline"' in page and "n/a (one-way flow)" in page
    by_lag = view.get("/airmirror/?sort=lag", ADMIN).text
    assert by_lag.index('data-flow="b-&gt;c"') < by_lag.index('data-flow="a-&gt;b"')


def test_without_login_nothing_answers_and_no_api_schema_or_docs_are_published(view: ViewServer):
    for path in ("/airmirror/", "/airmirror/api/flows", "/airmirror/flows/a-%3Eb"):
        assert view.get(path).status_code in (401, 403), path
    for path in ("/airmirror/openapi.json", "/airmirror/docs", "/airmirror/redoc"):
        assert view.get(path).status_code in (401, 403, 404), path
        assert view.get(path, ADMIN).status_code == 404, path


def test_a_get_never_creates_or_migrates_a_store_and_says_why_it_shows_nothing(view: ViewServer):
    missing, empty = view.home / "b_a.db", view.home / "c_a.db"
    for flow, why in (("b-%3Ea", "cannot be read"), ("c-%3Ea", "has no schema yet")):
        page = view.get(f"/airmirror/flows/{flow}", READER)
        assert page.status_code == 503 and why in page.text
        assert view.get(f"/airmirror/api/flows/{flow}", READER).status_code == 503
    assert not missing.exists()
    assert tables(empty) == []


def test_no_page_shows_a_file_path(view: ViewServer):
    home = str(view.home)
    paths = ["/airmirror/", "/airmirror/api/flows", "/airmirror/dags/airmirror__a__b"]
    for flow in ("a-%3Eb", "b-%3Ea", "c-%3Ea"):
        paths += [f"/airmirror/flows/{flow}", f"/airmirror/api/flows/{flow}"]
    for path in paths:
        shown = view.get(path, ADMIN).text
        assert home not in shown and ".db" not in shown and "mm2.properties" not in shown, path
