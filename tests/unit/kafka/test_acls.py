"""The ACL list derived from a flow's config (``airmirror acls``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airmirror.cli import main
from airmirror.config import FlowConfig, load_config
from airmirror.kafka.acls import named_source_topics, plain_names, required_acls, resource_patterns, takeover_acls
from airmirror.kafka.authorization import access_scope
from airmirror.mm2.policy import PatternList

BASE = """clusters = us, dr
us.bootstrap.servers = 127.0.0.1:9092
dr.bootstrap.servers = 127.0.0.1:9093
us->dr.enabled = true
"""


def flow(tmp_path: Path, extra: str = "") -> FlowConfig:
    path = tmp_path / "mm2.properties"
    path.write_text(BASE + extra)
    return load_config(path, env={}).flow("us->dr")


@pytest.mark.parametrize(
    ("patterns", "covered"),
    [
        ("orders", [("LITERAL", "orders")]),
        ("orders, payments.v1", [("LITERAL", "orders"), ("LITERAL", "payments.v1")]),
        (r"orders\.v1, sales.*", [("LITERAL", "orders.v1"), ("PREFIXED", "sales")]),
        (".*", [("LITERAL", "*")]),
        ("orders, (eu|us)-sales", [("LITERAL", "*")]),
        ("orders, orders", [("LITERAL", "orders")]),
    ],
)
def test_topic_and_group_regexes_become_literal_or_prefixed_resources(patterns: str, covered: list) -> None:
    assert resource_patterns(PatternList.parse(patterns, key="topics")) == covered


def test_a_flow_names_its_own_resources_and_needs_cluster_acls_only_for_acl_sync(tmp_path: Path) -> None:
    acls = required_acls(flow(tmp_path, "topics = sales.*\nsync.group.offsets.enabled = true\n"))
    table = {(a.cluster, a.resource_type, a.pattern_type, a.name): a.operations for a in acls}
    assert table[("us", "CLUSTER", "LITERAL", "kafka-cluster")] == ("DESCRIBE",)  # topic ACL sync, on by default
    assert table[("dr", "CLUSTER", "LITERAL", "kafka-cluster")] == ("ALTER",)
    assert table[("us", "TOPIC", "LITERAL", "mm2-offset-syncs.dr.internal")] == ("CREATE", "DESCRIBE", "WRITE")
    assert table[("us", "TOPIC", "PREFIXED", "sales")] == ("DESCRIBE", "READ", "DESCRIBE_CONFIGS")
    assert table[("us", "GROUP", "LITERAL", "airmirror-us-dr")] == ("DESCRIBE", "READ")
    assert table[("dr", "TOPIC", "PREFIXED", "us.")][:4] == ("CREATE", "DESCRIBE", "READ", "WRITE")
    assert table[("dr", "TRANSACTIONAL_ID", "PREFIXED", "airmirror-us-dr-")] == ("DESCRIBE", "WRITE")
    assert table[("dr", "GROUP", "LITERAL", "airmirror-eos-us-dr")] == ("DESCRIBE", "READ")
    assert table[("dr", "GROUP", "LITERAL", "*")] == ("DESCRIBE", "READ")
    assert ("dr", "TOPIC", "LITERAL", "airmirror-batches.us.internal") in table
    assert not any(a.name.endswith("-reader") for a in acls), "readers never commit: their groups need no ACL"


def test_plainly_named_topics_and_heartbeats_are_looked_up_by_name(tmp_path: Path) -> None:
    assert named_source_topics(flow(tmp_path, "topics = orders, sales.*\n")) == ["orders", "heartbeats"]
    assert named_source_topics(flow(tmp_path, "topics = .*\nheartbeats.replication.enabled = false\n")) == []
    assert plain_names(PatternList.parse("billing, ops-.*", key="groups")) == ["billing"]


def test_disabled_features_need_nothing(tmp_path: Path) -> None:
    acls = required_acls(
        flow(
            tmp_path,
            "topics = sales\nemit.heartbeats.enabled = false\nemit.checkpoints.enabled = false\n"
            "heartbeats.replication.enabled = false\nsync.topic.acls.enabled = false\n"
            "emit.offset-syncs.enabled = false\n",
        )
    )
    assert not any(a.name in ("heartbeats", "*") for a in acls)
    assert not any(a.resource_type == "CLUSTER" for a in acls), "without ACL sync no Cluster ACL is needed"
    assert not any(a.name.startswith("mm2-offset-syncs") for a in acls)


def test_features_turned_off_by_negative_intervals_need_nothing_either(tmp_path: Path) -> None:
    off = "".join(
        f"{task}.interval.seconds = -1\n" for task in ("emit.heartbeats", "emit.checkpoints", "sync.topic.acls")
    )
    acls = required_acls(flow(tmp_path, f"topics = sales\nheartbeats.replication.enabled = false\n{off}"))
    assert not any(a.name in ("heartbeats", "*") or a.resource_type == "CLUSTER" for a in acls)


def test_the_offset_syncs_topic_is_needed_where_its_location_puts_it(tmp_path: Path) -> None:
    acls = required_acls(flow(tmp_path, "topics = sales\noffset-syncs.topic.location = target\n"))
    assert [(a.cluster, a.operations) for a in acls if a.name == "mm2-offset-syncs.us.internal"] == [
        ("dr", ("CREATE", "DESCRIBE", "WRITE"))
    ]


def test_a_takeover_needs_mm2s_worker_group_and_topics_named_as_mm2s_file_names_them(tmp_path: Path) -> None:
    taken = flow(
        tmp_path,
        "dr.group.id = mm2-workers\noffset.storage.topic = mm2-offsets\noffset-syncs.topic.location = target\n",
    )
    assert [(a.cluster, a.resource_type, a.pattern_type, a.name, a.operations) for a in takeover_acls(taken)] == [
        ("dr", "GROUP", "LITERAL", "mm2-workers", ("DESCRIBE",)),
        ("dr", "TOPIC", "LITERAL", "mm2-offsets", ("DESCRIBE", "READ")),
        ("dr", "TOPIC", "LITERAL", "mm2-offset-syncs.us.internal", ("DESCRIBE", "READ")),
        ("dr", "TOPIC", "LITERAL", "us.checkpoints.internal", ("DESCRIBE", "READ")),
    ]
    assert not any(a.purpose.startswith("takeover") for a in required_acls(taken))


def test_a_takeovers_refusal_of_mm2s_topics_names_the_takeover_entry(tmp_path: Path) -> None:
    """The offset-syncs topic (written by replicate) and the checkpoints topic (under the remote prefix) are covered
    by the flow's entries too, which grant no READ or are broader: the takeover's come first."""
    taken = flow(tmp_path, "topics = sales\n")
    scope = access_scope(taken, "us", takeover=True)
    assert scope.covering("TOPIC", "mm2-offset-syncs.dr.internal").operations == ("DESCRIBE", "READ")
    assert access_scope(taken, "us").covering("TOPIC", "mm2-offset-syncs.dr.internal").operations == (
        "CREATE",
        "DESCRIBE",
        "WRITE",
    )
    assert (
        access_scope(taken, "dr", takeover=True).covering("TOPIC", "us.checkpoints.internal").pattern_type == "LITERAL"
    )


def test_acls_verb_lists_the_takeovers_entries_with_takeover(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(BASE)
    assert main(["acls", str(path), "--flow", "us->dr", "--json"]) == 0
    flow_only = json.loads(capsys.readouterr().out)["acls"]
    assert main(["acls", str(path), "--flow", "us->dr", "--takeover", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["acls"]
    assert listed[: len(flow_only)] == flow_only and {a["purpose"].split(":")[0] for a in listed[len(flow_only) :]} == {
        "takeover"
    }


def test_the_transactional_id_prefix_covers_every_copy_producer(tmp_path: Path) -> None:
    from airmirror import names

    assert names.transactional_id("us-east", "dr", "orders", 3).startswith(
        names.transactional_id_prefix("us-east", "dr")
    )
    assert not names.transactional_id("us", "east-dr", "o", 0).startswith(
        names.transactional_id_prefix("us-east", "dr")
    )


def test_acls_verb_prints_json_with_the_sasl_principal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    login = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="mirror" password="pw-Secret";'
    path = tmp_path / "mm2.properties"
    path.write_text(
        BASE + f"dr.security.protocol = SASL_SSL\ndr.sasl.mechanism = PLAIN\ndr.sasl.jaas.config = {login}\n"
    )
    assert main(["acls", str(path), "--flow", "us->dr", "--json"]) == 0
    out = capsys.readouterr().out
    listed = json.loads(out)
    assert listed["principals"] == {"us": "User:<principal>", "dr": "User:mirror"}
    assert {acl["cluster"] for acl in listed["acls"]} == {"us", "dr"} and "pw-Secret" not in out


def test_acls_verb_rejects_an_unknown_flow_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(BASE)
    assert main(["acls", str(path), "--flow", "dr->us"]) == 2
    assert "dr->us" in capsys.readouterr().err


def test_a_dead_letter_queue_needs_its_topic_on_the_target_only_when_records_can_go_there(tmp_path: Path) -> None:
    dlq = "us->dr.errors.deadletterqueue.topic.name = dr.dlq\n"
    table = {(a.cluster, a.name): a.operations for a in required_acls(flow(tmp_path, dlq + "errors.tolerance = all\n"))}
    assert table[("dr", "dr.dlq")] == ("CREATE", "DESCRIBE", "WRITE")
    assert all(a.name != "dr.dlq" for a in required_acls(flow(tmp_path, dlq)))


@pytest.mark.parametrize(
    ("replacement", "pattern_type", "name"), [("restricted.$1", "PREFIXED", "restricted."), ("$1-dr", "LITERAL", "*")]
)
def test_a_router_needs_the_topics_its_replacement_names(
    tmp_path: Path, replacement: str, pattern_type: str, name: str
) -> None:
    t = "org.apache.kafka.connect.transforms."
    routed = flow(
        tmp_path,
        f"us->dr.transforms = route\nus->dr.transforms.route.type = {t}RegexRouter\n"
        f"us->dr.transforms.route.regex = us\\\\.(.*)\nus->dr.transforms.route.replacement = {replacement}\n",
    )
    table = {(a.cluster, a.resource_type, a.pattern_type, a.name): a.operations for a in required_acls(routed)}
    assert table[("dr", "TOPIC", pattern_type, name)][:4] == ("CREATE", "DESCRIBE", "READ", "WRITE")
