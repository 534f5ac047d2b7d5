"""The replication view from a real SQLite metadata DB: figures, SKIPPED_ACTIVE standing out, the chart, escaping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from airmirror.config import load_config
from airmirror.model import GroupSyncOutcome, GroupSyncRecord, HeartbeatLatency, LagSample, SyncedSubject
from airmirror.store import MetadataStore
from airmirror.ui.flow_view import flow_view
from airmirror.ui.page import flow_page

NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def opened(tmp_path: Path):
    config = tmp_path / "mm2.properties"
    config.write_text("clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n")
    flow = load_config(config, env={}).flow("a->b")
    store = MetadataStore.open(f"sqlite:///{tmp_path / 'metadata.db'}")
    yield flow, store
    store.dispose()


def test_the_view_shows_the_newest_lag_latency_and_group_outcomes(opened):
    flow, store = opened
    store.record_lag_samples(
        flow.name,
        [
            LagSample("orders", 0, NOW - timedelta(minutes=20), 40, 9_000, 800),
            LagSample("orders", 0, NOW - timedelta(minutes=1), 7, 1_500, 650),
            LagSample("<script>", 1, NOW - timedelta(minutes=1), 3, None, 650),
        ],
    )
    store.record_heartbeat_latency(flow.name, HeartbeatLatency("a", "b", NOW - timedelta(seconds=2), NOW, 650))
    store.record_group_sync(
        flow.name, GroupSyncRecord("busy-readers", GroupSyncOutcome.SKIPPED_ACTIVE, "Stable", 0, "3 members", NOW)
    )
    store.record_group_sync(flow.name, GroupSyncRecord("idle-readers", GroupSyncOutcome.SYNCED, "Empty", 2, "", NOW))

    view = flow_view(flow, "airmirror__a__b", store, now=NOW)

    rows = {(p.topic, p.partition): p for p in view.partitions}
    assert (rows[("orders", 0)].lag_records, rows[("orders", 0)].record_age_ms) == (7, 1_500)
    assert rows[("orders", 0)].remote_topic == "a.orders"
    assert view.heartbeat_latency_ms == 650
    assert [point.lag_records for point in view.series] == [40, 10]
    assert {g.group: g.skipped_active for g in view.groups} == {"busy-readers": True, "idle-readers": False}
    assert view.as_json()["groups"][0]["skipped_active"] is True

    page = flow_page(view)
    assert '<tr data-group="busy-readers" class="skipped-active">' in page
    assert "<polyline" in page
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_an_empty_flow_still_renders(opened):
    flow, store = opened
    page = flow_page(flow_view(flow, "airmirror__a__b", store, now=NOW))
    assert "none yet" in page and "Not enough samples yet" in page


def test_the_view_shows_the_schema_figures(tmp_path: Path):
    config = tmp_path / "registries.properties"
    config.write_text(
        "clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n"
        "a.schema.registry.url = http://source:8081\nb.schema.registry.url = http://target:8081\n"
    )
    flow = load_config(config, env={}).flow("a->b")
    store = MetadataStore.open(f"sqlite:///{tmp_path / 'registries.db'}")
    try:
        store.record_schema_subjects(flow.name, [SyncedSubject("orders-value", "a.orders-value", 2, NOW)])
        store.record_schema_ids(flow.name, {1: 1001, 2: 1002})
        view = flow_view(flow, "airmirror__a__b", store, now=NOW)
    finally:
        store.dispose()

    assert view.as_json()["schemas"] == {"mode": "translate", "subjects": 1, "ids_mapped": 2, "records_passed": 0}
    page = flow_page(view)
    for field, shown in [("mode", "translate"), ("subjects", "1"), ("ids_mapped", "2"), ("records_passed", "0")]:
        assert f'<b data-field="schemas.{field}">{shown}</b>' in page


def test_a_flow_without_schema_ids_shows_only_the_mode(opened):
    flow, store = opened
    page = flow_page(flow_view(flow, "airmirror__a__b", store, now=NOW))
    assert '<b data-field="schemas.mode">off</b>' in page
    assert 'data-field="schemas.subjects"' not in page


def test_the_view_names_the_remote_topic_a_router_gives(tmp_path: Path) -> None:
    config = tmp_path / "mm2.properties"
    t = "org.apache.kafka.connect.transforms."
    config.write_text(
        "clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\na->b.enabled = true\n"
        f"a->b.transforms = route\na->b.transforms.route.type = {t}RegexRouter\n"
        "a->b.transforms.route.regex = a\\\\.(.*)\na->b.transforms.route.replacement = restricted.$1\n"
    )
    flow = load_config(config, env={}).flow("a->b")
    store = MetadataStore.open(f"sqlite:///{tmp_path / 'metadata.db'}")
    try:
        store.record_lag_samples(flow.name, [LagSample("payments", 0, NOW, 0, None, None)])
        [row] = flow_view(flow, "airmirror__a__b", store, now=NOW).partitions
    finally:
        store.dispose()
    assert row.remote_topic == "restricted.payments"


def test_every_partition_of_a_gone_source_topic_is_shown_stopped_saying_since_when(opened):
    flow, store = opened
    store.record_lag_samples(flow.name, [LagSample("orders", p, NOW, 0, None, None) for p in (0, 1)])
    store.record_lag_samples(flow.name, [LagSample("payments", 0, NOW, 0, None, None)])
    store.record_gone_topics(flow.name, ["orders", "payments"], ["orders"])

    view = flow_view(flow, "airmirror__a__b", store, now=NOW)

    stopped = {(p.topic, p.partition): p.stopped for p in view.partitions}
    since = store.gone_topics(flow.name)["orders"].strftime("%Y-%m-%dT%H:%M:%S")
    assert stopped[("payments", 0)] is None
    assert all(f"source topic orders is gone from cluster a since {since}" in stopped[("orders", p)] for p in (0, 1))
