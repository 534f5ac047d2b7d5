"""The ``airmirror`` command as users run it: exit codes, messages, dry runs, status and bounds."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from airmirror.config import load_config
from airmirror.store import MetadataStore
from tests.cli_helpers import airmirror_as_a_user, airmirror_process
from tests.conftest import write_config
from tests.kafka_helpers import create_topic, produce, records_of, sample_records

VALID = """clusters = a, b
a.bootstrap.servers = 127.0.0.1:1
b.bootstrap.servers = 127.0.0.1:2
a->b.enabled = true
"""


airmirror = airmirror_process
FILTER = "org.apache.kafka.connect.transforms.Filter"


@pytest.mark.parametrize(
    ("body", "key", "line"),
    [
        ("a.bootstrap.servers = x:1\na->b.enabled = true\n", "clusters", None),
        ("clusters = a, b\na.bootstrap.servers = x:1\n", "b.bootstrap.servers", None),
        (VALID + "a->c.enabled = true\n", "a->c.enabled", 5),
        (VALID + "topics = orders, (unclosed\n", "topics", 5),
        (VALID + "a->b.replication.factor = two\n", "a->b.replication.factor", 5),
        (VALID + "offset.lag.max = 1O0\n", "offset.lag.max", 5),
        (VALID + "replication.policy.class = com.example.NoSuchPolicy\n", "replication.policy.class", 5),
        (VALID + "a->b.transforms = x\na->b.transforms.x.type = com.nonexistent.Nope\n", "a->b.transforms.x.type", 6),
        (VALID + f"transforms = x\ntransforms.x.type = {FILTER}\n", "transforms", 5),
        (VALID + "a->b.topic.filter.class = com.acme.mm2.DefaultTopicFilter\n", "a->b.topic.filter.class", 5),
    ],
    ids=[
        "missing-clusters",
        "missing-bootstrap",
        "undefined-alias",
        "bad-regex",
        "non-numeric-flow",
        "non-numeric",
        "unknown-policy",
        "unknown-transform",
        "top-level-transform-chain",
        "custom-filter-class",
    ],
)
def test_bad_config_exits_2_naming_key_and_line(tmp_path: Path, body: str, key: str, line: int | None):
    config = tmp_path / "mm2.properties"
    config.write_text(body)
    for verb in (
        ["validate", str(config)],
        ["replicate", str(config), "--flow", "a->b"],
        ["status", str(config), "--flow", "a->b"],
    ):
        result = airmirror(*verb)
        assert result.returncode == 2, result.stderr
        assert f"'{key}'" in result.stderr
        if line is not None:
            assert f"line {line}" in result.stderr
    assert not (tmp_path / "metadata.db").exists()


def test_validate_accepts_a_good_file(tmp_path: Path):
    config = tmp_path / "mm2.properties"
    config.write_text(VALID)
    result = airmirror("validate", str(config))
    assert result.returncode == 0 and "a->b" in result.stdout


def test_validate_names_every_key_nothing_reads(tmp_path: Path):
    config = tmp_path / "mm2.properties"
    unused = ["tasks.max = 4", "a->b.topics.include = orders", "foo.bar = 1", "topics.blacklist = secret.*"]
    config.write_text(VALID + "\n".join(unused) + "\n")
    result = airmirror("validate", str(config))
    assert result.returncode == 0 and "a->b" in result.stdout
    warnings = result.stderr.splitlines()
    for line_number, line in enumerate(unused, 5):
        key = line.split(" = ")[0]
        assert sum(f"key '{key}' (line {line_number})" in w for w in warnings) == 1, result.stderr


def test_unknown_flow_exits_2(tmp_path: Path):
    config = tmp_path / "mm2.properties"
    config.write_text(VALID)
    result = airmirror("replicate", str(config), "--flow", "b->a", "--dry-run")
    assert result.returncode == 2 and "b->a" in result.stderr


def test_unreachable_cluster_is_a_runtime_failure(tmp_path: Path):
    config = tmp_path / "mm2.properties"
    config.write_text(
        VALID
        + "a.admin.request.timeout.ms = 2000\nairmirror.metadata.db.url = sqlite:///"
        + str(tmp_path / "m.db")
        + "\n"
    )
    result = airmirror("status", str(config), "--flow", "a->b")
    assert result.returncode == 1, result.stderr
    assert "airmirror: error: cannot reach cluster 'a' (" in result.stderr, result.stderr[-2000:]


@pytest.mark.integration
def test_dry_run_prints_the_plan_and_changes_nothing(clusters, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    create_topic(a, f"{prefix}.dry", 2)
    produce(a, f"{prefix}.dry", 1, sample_records(7))
    config = write_config(tmp_path / "mm2.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}.*")

    result = airmirror("replicate", str(config), "--flow", "a->b", "--dry-run", "--json")

    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["dry_run"] and plan["created_topics"] == [f"a.{prefix}.dry"]
    assert [(r["partition"], r["start"], r["end"]) for r in plan["ranges"]] == [(0, 0, 0), (1, 0, 7)]
    target_admin = AdminClient({"bootstrap.servers": b})
    assert f"a.{prefix}.dry" not in target_admin.list_topics(timeout=10).topics
    flow = load_config(config).flow("a->b")
    store = MetadataStore.open(flow.metadata_db_url)
    assert store.batches(flow.name) == [] and store.cursors(flow.name) == {}
    store.dispose()


@pytest.mark.integration
def test_until_and_max_records_bound_the_batch_and_status_shows_lag(clusters, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.bounded"
    create_topic(a, topic, 1)
    records = sample_records(30)
    produce(a, topic, 0, records)
    config = write_config(
        tmp_path / "mm2.properties",
        clusters,
        f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.spark.master = local[1]",
    )

    until_ts = datetime.fromtimestamp(records[20].timestamp / 1000, UTC).isoformat()  # records 0-19 precede it
    result = airmirror("replicate", str(config), "--flow", "a->b", "--until", until_ts, "--max-records", "15")
    assert result.returncode == 0, result.stdout + result.stderr
    assert records_of(b, f"a.{topic}", 0) == records[:15]
    assert airmirror("replicate", str(config), "--flow", "a->b", "--until", until_ts).returncode == 0
    assert records_of(b, f"a.{topic}", 0) == records[:20]

    status = json.loads(airmirror("status", str(config), "--flow", "a->b", "--json").stdout)
    (partition,) = status["partitions"]
    assert (partition["cursor"], partition["source_end"], partition["lag"], partition["records_copied"]) == (
        20,
        30,
        10,
        20,
    )
    assert status["total_lag"] == 10


@pytest.mark.integration
def test_spark_that_cannot_start_fails_the_run_and_the_batch_resumes(clusters, prefix, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.nospark"
    create_topic(a, topic, 1)
    records = sample_records(5)
    produce(a, topic, 0, records)
    flow_lines = f"a->b.enabled = true\ntopics = {prefix}.*\nairmirror.spark.master = local[1]"
    broken = write_config(
        tmp_path / "broken.properties",
        clusters,
        flow_lines + "\nairmirror.spark.conf.spark.driver.memory = lots",  # the driver JVM refuses -Xmxlots
    )

    result = airmirror("replicate", str(broken), "--flow", "a->b")

    assert result.returncode == 1, result.stdout + result.stderr
    assert "airmirror: error:" in result.stderr
    assert records_of(b, f"a.{topic}", 0) == []
    flow = load_config(broken).flow("a->b")
    store = MetadataStore.open(flow.metadata_db_url)
    assert store.unfinished_batch(flow.name) is not None
    store.dispose()

    healthy = write_config(tmp_path / "mm2.properties", clusters, flow_lines)  # same metadata DB
    assert airmirror("replicate", str(healthy), "--flow", "a->b").returncode == 0
    assert records_of(b, f"a.{topic}", 0) == records


@pytest.mark.integration
def test_status_without_a_flow_shows_every_flows_health_worst_first_and_runs_say_nothing_else(
    clusters, prefix, tmp_path
):
    """a->b copied a moment ago (healthy), a->c's run failed (cluster c is unreachable), b->a never ran.  The
    runs are made as a user makes them, and say nothing on stderr unless they failed, then one line."""
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.health"
    create_topic(a, topic, 1)
    produce(a, topic, 0, sample_records(10))
    config = tmp_path / "mm2.properties"
    config.write_text(
        "\n".join(
            [
                "clusters = a, b, c",
                f"a.bootstrap.servers = {a}",
                f"b.bootstrap.servers = {b}",
                "c.bootstrap.servers = 127.0.0.1:1",
                "c.admin.request.timeout.ms = 2000",
                f"topics = {prefix}\\..*",
                "replication.factor = 1",
                "heartbeats.topic.replication.factor = 1",
                "checkpoints.topic.replication.factor = 1",
                "offset-syncs.topic.replication.factor = 1",
                "airmirror.batch.log.topic.replication.factor = 1",
                "airmirror.spark.master = local[1]",
                f"airmirror.metadata.db.url = sqlite:///{tmp_path / 'metadata.db'}",
                "a->b.enabled = true",
                "a->c.enabled = true",
                "b->a.enabled = true",
            ]
        )
        + "\n"
    )
    copied = airmirror_as_a_user("replicate", str(config), "--flow", "a->b")
    assert copied.returncode == 0, copied.stderr
    assert copied.stderr == "", "no Spark, JVM, PySpark or librdkafka line reaches the terminal:\n" + copied.stderr
    failed = airmirror_as_a_user("replicate", str(config), "--flow", "a->c")
    assert failed.returncode == 1 and "cannot reach cluster 'c'" in failed.stderr, failed.stderr
    assert failed.stderr.startswith("airmirror: error: ") and failed.stderr.count("\n") == 1, failed.stderr
    unknown = airmirror_as_a_user("replicate", str(config), "--flow", "nowhere")
    assert unknown.returncode == 2 and unknown.stderr.startswith("airmirror: error: ")
    assert unknown.stderr.count("\n") == 1 and "nowhere" in unknown.stderr, unknown.stderr

    shown = airmirror("status", str(config))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert [line.split("  ")[:2] for line in lines] == [
        ["a->c", "failing, not running"],
        ["b->a", "not running"],
        ["a->b", "healthy"],
    ]
    assert "last run failed" in lines[0] and "cannot reach cluster 'c'" in lines[0]
    as_json = {flow["flow"]: flow for flow in json.loads(airmirror("status", str(config), "--json").stdout)}
    assert as_json["a->b"]["state"] == "healthy" and as_json["a->b"]["partitions"] == 1
    assert "which is not enabled" not in as_json["a->b"]["latency_note"]  # b->a brings heartbeats back
    assert as_json["a->c"]["last_failure"]["error"].startswith("cannot reach cluster 'c'")
