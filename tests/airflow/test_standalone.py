"""End to end: ``airflow standalone`` schedules the flow DAGs; a scheduled run and a backfill replicate.

The live topic holds a record stamped a day ahead: the scheduler's runs copy past it (only backfill runs and
``--until`` bound a run by time), while the backfill runs of the history flow stop at their intervals' ends.
Flow b->a is live (``airmirror.live = true``): its scheduled run replicates for its 45 s data interval while the
executor runs the emission tasks beside it.

Airflow keeps its metadata in PostgreSQL here, as in production (see :mod:`airmirror.devtools.local_airflow`).
Slow (it starts Airflow's scheduler, DAG processor, API server and triggerer); CI runs it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from airmirror.devtools.local_airflow import LocalAirflow
from airmirror.devtools.local_kafka import LocalBroker, free_port, start_broker
from airmirror.devtools.local_postgres import postgres_server
from airmirror.mm2.wire_formats import Heartbeat
from airmirror.model import LagSample, PartitionKey, RunFailure
from airmirror.store import MetadataStore
from tests.browser import HeadlessChromium
from tests.conftest import write_config
from tests.kafka_helpers import (
    Record,
    SteadyProducer,
    create_topic,
    produce,
    read_partition,
    records_of,
    sample_records,
)
from tests.polling import wait_until
from tests.store_helpers import commit_ten, commit_ten_each

pytestmark = [pytest.mark.integration, pytest.mark.slow]

YEARS = (2023, 2024)  # two yearly intervals show the order; each more is one more DAG run
PULSE_PARTITIONS = 2
ARTIFACTS = Path(__file__).resolve().parents[2] / ".artifacts"
LIVE_WINDOW_S = 45
"""Long enough for the run's planned batch and a stream after it, counted from the task's start (Spark's start
included) on a loaded 2-core machine."""
DAY_MS = 86_400_000
# Kafka 4 rejects records stamped more than an hour ahead by default; the live topic accepts a week.
ACCEPTS_FUTURE = {"message.timestamp.after.max.ms": str(7 * DAY_MS)}


@pytest.fixture(scope="module")
def e2e_clusters(test_home) -> Iterator[dict[str, LocalBroker]]:
    """Clusters a, b and c of this module alone: its flows emit heartbeats both ways, and MM2 replicates
    heartbeats topics whatever ``topics`` says, so on the shared clusters every later flow would copy them."""
    brokers: dict[str, LocalBroker] = {}
    try:
        for alias in ("a", "b", "c"):
            brokers[alias] = start_broker(f"e2e-{alias}", free_port(), home=test_home)
        yield brokers
    finally:
        for broker in brokers.values():
            broker.stop()


WIDE, WIDE_TOPICS, WIDE_PARTITIONS = "wide", 200, 10
READY_TOPICS = "document.readyState == 'complete' && !!document.querySelector('tr[data-topic-row]')"
"""A flow page has loaded (its last byte too: the first rows show before the rest arrive)."""


def text_shown(text: str) -> str:
    """A JavaScript test that the page shows ``text``."""
    return f"document.body.innerText.includes('{text}')"


def overview_stores(home: Path) -> dict[str, str]:
    """The metadata DBs of two flows that never run (paused, scheduled yearly), as runs left them: ``c->a``, whose
    newest run failed after its last commit, and ``c->b``, a whole cluster's flow (2,000 partitions) that lags, with a
    stopped partition.  Returns each flow's DB URL."""
    now = datetime.now(UTC)
    urls = {flow: f"sqlite:///{home / (flow.replace('->', '_') + '.db')}" for flow in ("c->a", "c->b")}
    with MetadataStore.open(urls["c->a"]) as store:
        commit_ten(store, "c->a", f"{WIDE}.000")
        failed = RunFailure(datetime.now(UTC), "cannot reach cluster 'a': Connection refused")
        store.record_run_failure("c->a", failed)  # after the commit: the flow is failing
    keys = [PartitionKey(f"{WIDE}.{t:03d}", p) for t in range(WIDE_TOPICS) for p in range(WIDE_PARTITIONS)]
    with MetadataStore.open(urls["c->b"]) as store:
        commit_ten_each(store, "c->b", keys)
        store.record_lag_samples("c->b", [LagSample(k.topic, k.partition, now, 7, 600_000, None) for k in keys])
        store.stop_partition("c->b", keys[-1], f"source partition {keys[-1].topic}-9 was deleted")
    return urls


@pytest.fixture(scope="module")
def airflow_env(e2e_clusters, test_home, tmp_path_factory) -> Iterator[tuple[LocalAirflow, dict, str, Path]]:
    brokers = e2e_clusters
    prefix = "e2e"
    create_topic(brokers["a"].bootstrap, f"{prefix}.live", 2, ACCEPTS_FUTURE)
    create_topic(brokers["a"].bootstrap, f"{prefix}.history", 1, {"retention.ms": "-1"})
    create_topic(brokers["b"].bootstrap, f"{prefix}.pulse", PULSE_PARTITIONS)
    home = tmp_path_factory.mktemp("standalone")
    stores = overview_stores(home)
    config = write_config(
        home / "mm2.properties",
        brokers,
        "\n".join(
            [
                *(
                    line
                    for flow, url in stores.items()
                    for line in (
                        f"{flow}.enabled = true",
                        f"{flow}.airmirror.metadata.db.url = {url}",
                        f"{flow}.airmirror.schedule = 0 0 1 1 *",
                        f"{flow}.topics = {WIDE}\\..*",
                    )
                ),
                "a->b.enabled = true",
                f"a->b.topics = {prefix}\\.live",
                "a->c.enabled = true",
                f"a->c.topics = {prefix}\\.history",
                "a->c.airmirror.schedule = 0 0 1 1 *",
                "b->a.enabled = true",
                f"b->a.topics = {prefix}\\.pulse",
                "b->a.airmirror.live = true",
                f"b->a.airmirror.schedule = {LIVE_WINDOW_S}s",
                "airmirror.task.retries = 1",
            ]
        ),
    )
    with postgres_server() as metadata_server:
        airflow = LocalAirflow(test_home, free_port(), metadata_db=metadata_server.create_database("airflow"))
        try:
            airflow.start(config)
            yield airflow, brokers, prefix, config
        finally:
            airflow.stop(timeout=10)


def test_scheduled_run_replicates_the_flow_past_a_record_stamped_in_the_future(airflow_env):
    airflow, brokers, prefix, _ = airflow_env
    ahead = Record(b"ahead", b"stamped a day ahead", (), int(time.time() * 1000) + DAY_MS)
    for p in range(2):
        produce(
            brokers["a"].bootstrap,
            f"{prefix}.live",
            p,
            [*sample_records(25, f"live{p}"), ahead, *sample_records(5, f"after{p}")],
        )
    api = airflow.client()
    api.wait_for_dag("airmirror__a__b")
    api.unpause("airmirror__a__b")

    api.wait_for_runs("airmirror__a__b", 1, timeout=400, run_type="scheduled")

    for p in range(2):
        source = records_of(brokers["a"].bootstrap, f"{prefix}.live", p)
        assert len(source) == 31
        assert records_of(brokers["b"].bootstrap, f"a.{prefix}.live", p) == source


def test_backfill_replicates_each_interval_in_order_and_a_rerun_is_a_no_op(airflow_env):
    airflow, brokers, prefix, _ = airflow_env
    dag_id = "airmirror__a__c"
    api = airflow.client()
    api.wait_for_dag(dag_id)
    api.unpause(dag_id)
    api.wait_for_runs(dag_id, 1, timeout=400, run_type="scheduled")
    per_year = {
        year: [
            Record(
                f"{year}-{i}".encode(),
                f"event {i} of {year}".encode(),
                (),
                int(datetime(year, 3, 1 + i, tzinfo=UTC).timestamp() * 1000),
            )
            for i in range(5)
        ]
        for year in YEARS
    }
    produce(brokers["a"].bootstrap, f"{prefix}.history", 0, [r for year in YEARS for r in per_year[year]])

    api.call(
        "POST",
        "/backfills",
        json={
            "dag_id": dag_id,
            "from_date": f"{YEARS[0]}-01-01T00:00:00Z",
            "to_date": f"{YEARS[-1]}-12-31T00:00:00Z",
            "max_active_runs": 1,
        },
    )
    runs = api.wait_for_runs(dag_id, len(YEARS), timeout=600, run_type="backfill")

    runs.sort(key=lambda r: r["logical_date"])
    assert [r["logical_date"][:4] for r in runs] == [str(y) for y in YEARS]
    assert [api.xcom(dag_id, r["dag_run_id"], "record_batch")["records"] for r in runs] == [5] * len(YEARS)
    assert [r["end_date"] for r in runs] == sorted(r["end_date"] for r in runs)
    target = records_of(brokers["c"].bootstrap, f"a.{prefix}.history", 0)
    assert target == [r for year in YEARS for r in per_year[year]]

    rerun = runs[0]  # an interval already copied, and the later one after it
    api.call(
        "POST",
        f"/dags/{dag_id}/clearTaskInstances",
        json={"dag_run_id": rerun["dag_run_id"], "dry_run": False, "only_failed": False, "reset_dag_runs": True},
    )
    wait_until_rerun(api, dag_id, rerun)
    assert api.xcom(dag_id, rerun["dag_run_id"], "record_batch")["records"] == 0
    assert records_of(brokers["c"].bootstrap, f"a.{prefix}.history", 0) == target


def wait_until_rerun(api, dag_id: str, run: dict, timeout: float = 300) -> None:
    """Wait until a cleared run has finished again (a new end date and success)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        current = api.call("GET", f"/dags/{dag_id}/dagRuns/{run['dag_run_id']}")
        if current["state"] == "success" and current["end_date"] != run["end_date"]:
            return
        assert current["state"] != "failed"
        time.sleep(2)
    raise AssertionError(f"{run['dag_run_id']} was not re-run within {timeout}s")


def test_a_live_scheduled_run_replicates_for_its_interval_while_heartbeats_are_emitted_beside_it(airflow_env):
    airflow, brokers, prefix, _ = airflow_env
    dag_id = "airmirror__b__a"
    source, target = brokers["b"].bootstrap, brokers["a"].bootstrap
    api = airflow.client()
    api.wait_for_dag(dag_id)
    producer = SteadyProducer(source, f"{prefix}.pulse", PULSE_PARTITIONS, burst=10, pause=0.1)
    producer.start()
    try:
        api.unpause(dag_id)
        run = api.wait_for_runs(dag_id, 1, timeout=400, run_type="scheduled")[0]
        api.call("PATCH", f"/dags/{dag_id}", json={"is_paused": True})
    finally:
        producer.stop()

    tis = {
        ti["task_id"]: ti
        for ti in api.call("GET", f"/dags/{dag_id}/dagRuns/{run['dag_run_id']}/taskInstances")["task_instances"]
    }
    replicate = tis["replicate"]
    copied = api.xcom(dag_id, run["dag_run_id"], "replicate")
    assert copied["batches"] >= 2 and copied["records"] > 0
    events = api.call("GET", "/assets/events", params={"source_dag_id": dag_id, "source_run_id": run["dag_run_id"]})[
        "asset_events"
    ]
    pulse = [e["extra"] for e in events if e["uri"] == f"kafka://{target}/b.{prefix}.pulse"]
    assert len(pulse) == 1 and 0 < pulse[0]["records"] <= copied["records"]
    started, ended = (datetime.fromisoformat(replicate[key]).timestamp() * 1000 for key in ("start_date", "end_date"))
    beats = [Heartbeat.decode(r.key, r.value) for _, r in read_partition(target, "heartbeats", 0)]
    beside = [
        beat
        for beat in beats
        if (beat.source_alias, beat.target_alias) == ("b", "a") and started <= beat.timestamp <= ended
    ]
    assert len(beside) >= 3, "no heartbeats were emitted while replicate ran"
    for p in range(PULSE_PARTITIONS):
        copied_records = records_of(target, f"b.{prefix}.pulse", p)
        assert copied_records == records_of(source, f"{prefix}.pulse", p)[: len(copied_records)]
        assert any(started <= r.timestamp <= ended for r in copied_records), (
            "nothing produced during the live run was copied"
        )


def test_the_overview_shows_each_flows_state_and_a_whole_cluster_flow_pages_its_topics_in_a_real_browser(
    airflow_env,
):
    airflow, _, _, _ = airflow_env
    api = airflow.client()
    api.wait_for_dag("airmirror__c__b")
    token = httpx.post(
        f"{airflow.url}/auth/token", json={"username": "admin", "password": airflow.admin_password()}, timeout=30
    ).json()["access_token"]
    figures = {
        f["flow"]: f
        for f in httpx.get(
            f"{airflow.url}/airmirror/api/flows", headers={"Authorization": f"Bearer {token}"}, timeout=60
        ).json()
    }
    with HeadlessChromium() as browser:
        browser.set_cookie(airflow.url, "_token", token)
        browser.open(
            f"{airflow.url}/airmirror/",
            "document.readyState == 'complete' && !!document.querySelector('tr[data-flow]')",
        )
        rows = browser.evaluate("[...document.querySelectorAll('tr[data-flow]')].map(r => r.dataset.flow)")
        states = browser.evaluate(
            "Object.fromEntries([...document.querySelectorAll('tr[data-flow]')].map(r => "
            "[r.dataset.flow, r.querySelector('[data-field=state]').innerText]))"
        )
        print(f"overview screenshot: {browser.screenshot(ARTIFACTS / 'replication-overview-states.png')}")
        assert rows.index("c->a") < rows.index("c->b"), rows
        assert states["c->a"].startswith("failing") and "Connection refused" in states["c->a"]
        assert states["c->b"].startswith("stopped partitions, lagging")
        assert states["a->b"].startswith(figures["a->b"]["state"])
        wide = figures["c->b"]
        assert (wide["partitions"], wide["stopped_partitions"], wide["lag_records"]) == (2_000, 1, 14_000)

        started = time.monotonic()
        browser.open(f"{airflow.url}/airmirror/flows/c-%3Eb", READY_TOPICS)
        opened_s = time.monotonic() - started
        navigation = browser.evaluate("performance.getEntriesByType('navigation')[0].duration")
        print(f"2,000-partition flow page: {navigation:.0f} ms navigation, {opened_s:.2f} s until its first topic row")
        assert browser.evaluate("document.querySelectorAll('tr[data-topic-row]').length") == 50
        first = browser.evaluate("document.querySelector('tr[data-topic-row]').dataset.topicRow")
        assert first == f"{WIDE}.{WIDE_TOPICS - 1:03d}", "the topic with the stopped partition comes first"
        shown = browser.evaluate(
            f"(() => {{ const row = document.querySelector('tr[data-topic-row=\"{first}\"]');"
            " row.querySelector('summary').click();"
            " return [...row.querySelectorAll('tr[data-partition]')].filter(p => p.offsetParent !== null).length; })()"
        )
        assert shown == WIDE_PARTITIONS
        print(f"flow page screenshot: {browser.screenshot(ARTIFACTS / 'replication-wide-flow.png')}")
        browser.evaluate(
            f"document.querySelector('input[name=topic]').value = '{WIDE}\\\\.00[0-9]';"
            " document.querySelector('form').submit()"
        )
        wait_until(lambda: browser.evaluate(f"{READY_TOPICS} && {text_shown('10 of 200 topics')}"), 30, "the filter")
        assert browser.evaluate("document.querySelectorAll('tr[data-topic-row]').length") == 10
        browser.open(f"{airflow.url}/airmirror/flows/c-%3Eb", "location.search == '' && " + READY_TOPICS)
        browser.evaluate("document.querySelector('a[rel=next]').click()")
        wait_until(lambda: browser.evaluate(f"{READY_TOPICS} && {text_shown('page 2 of 4')}"), 30, "page 2")
        assert browser.evaluate("document.querySelectorAll('tr[data-topic-row]').length") == 50


def test_the_replication_view_in_a_real_browser_matches_status_and_outlives_the_clusters(airflow_env):
    airflow, brokers, prefix, config = airflow_env
    dag_id, flow_path = "airmirror__a__b", "/airmirror/flows/a-%3Eb"
    api = airflow.client()
    api.wait_for_dag(dag_id)
    api.unpause(dag_id)
    api.wait_for_runs(dag_id, 1, timeout=400, run_type="scheduled")
    token = httpx.post(
        f"{airflow.url}/auth/token", json={"username": "admin", "password": airflow.admin_password()}, timeout=30
    ).json()["access_token"]
    for path in ("/airmirror/api/flows", flow_path):
        assert httpx.get(f"{airflow.url}{path}", timeout=30).status_code in (401, 403), path
    for path in ("/airmirror/openapi.json", "/airmirror/docs", "/airmirror/redoc"):
        assert httpx.get(f"{airflow.url}{path}", timeout=30).status_code in (401, 403, 404), path

    status = json.loads(
        subprocess.run(
            [sys.executable, "-m", "airmirror.cli", "status", str(config), "--flow", "a->b", "--json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    known = next(p for p in status["partitions"] if p["topic"] == f"{prefix}.live" and p["partition"] == 0)
    row = f'tr[data-topic="{prefix}.live"][data-partition="0"]'
    with HeadlessChromium() as browser:
        browser.set_cookie(airflow.url, "_token", token)
        browser.open(
            f"{airflow.url}{flow_path}", f"document.readyState == 'complete' && !!document.querySelector('{row}')"
        )
        topic_row = f'tr[data-topic-row="{prefix}.live"]'
        expanded = browser.evaluate(
            f"(() => {{ document.querySelector('{topic_row} summary').click();"
            f" return document.querySelector('{row}').offsetParent !== null; }})()"
        )
        assert expanded, "the topic's row expands to its partitions"
        shown = browser.evaluate(
            f"[...document.querySelectorAll('{row} td[data-field]')].map(td => [td.dataset.field, td.innerText])"
        )
        screenshot = browser.screenshot(ARTIFACTS / "replication-view.png")
        print(f"replication view screenshot: {screenshot}")
        cells = dict(shown)
        assert int(cells["records"].replace(",", "")) == known["records_copied"]
        assert int(cells["lag_records"].replace(",", "")) == known["lag"]
        schema_mode = browser.evaluate("document.querySelector('[data-field=\"schemas.mode\"]').innerText")
        assert schema_mode == status["schemas"]["mode"]
        browser.open(f"{airflow.url}/airmirror/", "!!document.querySelector('a[href=\"flows/a-%3Eb\"]')")
        overview = browser.evaluate(
            "[...document.querySelectorAll('tr[data-flow=\"a->b\"] [data-field]')]"
            ".map(cell => [cell.dataset.field, cell.innerText])"
        )
        browser.screenshot(ARTIFACTS / "replication-overview.png")
        health = next(
            f
            for f in httpx.get(
                f"{airflow.url}/airmirror/api/flows", headers={"Authorization": f"Bearer {token}"}, timeout=60
            ).json()
            if f["flow"] == "a->b"
        )
        figures = dict(overview)
        assert figures["state"].startswith(health["state"])
        assert int(figures["lag_records"].replace(",", "")) == health["lag_records"]
        index = browser.evaluate("document.documentElement.outerHTML")
        assert str(config.parent) not in index and str(airflow.home) not in index
        browser.open(f"{airflow.url}/dags/{dag_id}", "document.body.innerText.includes('Replication')")

    bearer = {"Authorization": f"Bearer {token}"}
    brokers["a"].stop()
    brokers["b"].stop()
    try:
        offline = httpx.get(f"{airflow.url}/airmirror/api/flows/a-%3Eb", headers=bearer, timeout=60)
        assert offline.status_code == 200
        rows = {(p["topic"], p["partition"]): p for p in offline.json()["partitions"]}
        assert rows[(f"{prefix}.live", 0)]["records"] == known["records_copied"]
    finally:
        for alias in ("a", "b"):
            brokers[alias].restart()
