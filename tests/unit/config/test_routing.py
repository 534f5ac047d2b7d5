"""RegexRouter: a rename of the remote topic, read with Java's syntax (rule 7 of airmirror.config.transforms)."""

from __future__ import annotations

import pytest

from airmirror.config.routes import route, routed_back
from airmirror.replication.spark.record_transforms import RecordTransforms
from airmirror.schemas.subject_copy import SubjectNames, TopicNaming
from tests.unit.config.test_mirror_config import BASE, flow, line_of, load, rejection

T = "org.apache.kafka.connect.transforms."
ROUTER = f"""\
a->b.transforms = route
a->b.transforms.route.type = {T}RegexRouter
a->b.transforms.route.regex = a\\.(.*)
a->b.transforms.route.replacement = restricted.$1
"""


def test_a_router_renames_the_remote_topic_and_leaves_heartbeats_alone(tmp_path):
    f = flow(tmp_path, ROUTER)
    assert f.remote_topic("payments") == "restricted.payments"
    assert f.remote_topic("heartbeats") == "a.heartbeats", "transforms never touch heartbeats"
    assert f.transform_steps("payments") == (), "a router acts on the topic, not on its records"


def test_a_router_renames_only_where_its_regex_matches_the_whole_name(tmp_path):
    text = ROUTER.replace("a\\.(.*)", "a\\.pay(.*)")
    f = flow(tmp_path, text)
    assert f.remote_topic("payments") == "restricted.ments"
    assert f.remote_topic("orders") == "a.orders"


@pytest.mark.parametrize(
    ("regex", "replacement", "remote"),
    [
        ("a\\.(?<rest>.*)", "x-${rest}", "x-payments"),
        ("(a)\\.(.*)", "$2\\\\$$12", "payments$a2"),
        ("(a)\\.(x)?(.*)", "[$2]$3", "[]payments"),
    ],
)
def test_the_replacement_is_read_as_java_reads_it(tmp_path, regex, replacement, remote):
    """(A properties file reads ``\\\\`` as one backslash.)"""
    text = ROUTER.replace("a\\.(.*)", regex).replace("restricted.$1", replacement)
    assert flow(tmp_path, text).remote_topic("payments") == remote


def test_steps_after_a_router_see_the_routed_name(tmp_path):
    text = ROUTER.replace("transforms = route", "transforms = before, route, after, tagged") + (
        f"a->b.transforms.before.type = {T}InsertField$Value\na->b.transforms.before.topic.field = t\n"
        f"a->b.transforms.after.type = {T}InsertField$Value\na->b.transforms.after.topic.field = u\n"
        f"a->b.transforms.tagged.type = {T}InsertHeader\na->b.transforms.tagged.header = restricted\n"
        "a->b.transforms.tagged.value.literal = yes\na->b.transforms.tagged.predicate = isRestricted\n"
        f"a->b.predicates = isRestricted\na->b.predicates.isRestricted.type = {T}predicates.TopicNameMatches\n"
        "a->b.predicates.isRestricted.pattern = restricted\\..*\n"
    )
    f = flow(tmp_path, text)
    steps = f.transform_steps("payments")
    assert [(s.alias, s.topic) for s in steps] == [
        ("before", "a.payments"),
        ("after", "restricted.payments"),
        ("tagged", "restricted.payments"),
    ]
    chain = RecordTransforms(steps, f.remote_topic("payments"))
    assert chain.apply(None, b'{"v": 1}', None) == (
        None,
        b'{"v":1,"t":"a.payments","u":"restricted.payments"}',
        [("restricted", b"yes")],
    )


def test_a_topic_predicate_gates_a_router_and_routers_chain(tmp_path):
    text = ROUTER.replace("transforms = route", "transforms = route, again") + (
        "a->b.transforms.route.predicate = isPayments\n"
        f"a->b.transforms.again.type = {T}RegexRouter\na->b.transforms.again.regex = restricted\\.(.*)\n"
        "a->b.transforms.again.replacement = vault.$1\n"
        f"a->b.predicates = isPayments\na->b.predicates.isPayments.type = {T}predicates.TopicNameMatches\n"
        "a->b.predicates.isPayments.pattern = a\\.payments\n"
    )
    f = flow(tmp_path, text)
    assert f.remote_topic("payments") == "vault.payments"
    assert f.remote_topic("orders") == "a.orders"


def test_subjects_follow_the_routed_name(tmp_path):
    f = flow(tmp_path, ROUTER)
    naming = TopicNaming(f.policy, f.topics, f.source, f.target, True, f.transforms)
    assert SubjectNames({}, naming).target("payments-value") == "restricted.payments-value"


@pytest.mark.parametrize(
    ("extra", "key", "message"),
    [
        (
            f"a->b.transforms.route.predicate = tomb\na->b.predicates = tomb\n"
            f"a->b.predicates.tomb.type = {T}predicates.RecordIsTombstone\n",
            "a->b.transforms.route.predicate",
            "airmirror routes whole topics",
        ),
        ("", "a->b.transforms.route.type", "needs 'a->b.transforms.route.regex'"),
    ],
)
def test_what_a_router_cannot_do_is_refused_naming_key_and_line(tmp_path, extra, key, message):
    text = BASE + ROUTER + extra
    if not extra:
        text = text.replace("a->b.transforms.route.regex = a\\.(.*)\n", "")
    error = rejection(tmp_path, text)
    assert (error.key, error.line) == (key, line_of(text, key))
    assert message in str(error)


@pytest.mark.parametrize(
    ("replacement", "message"),
    [
        ("x.$2", "no group 2 in the regex (it has 1)"),
        ("x.${name}", "no group 'name'"),
        ("x.$", "neither names a group"),
        ("x.\\\\", "neither names a group"),
    ],
)
def test_a_replacement_java_refuses_is_refused(tmp_path, replacement, message):
    text = BASE + ROUTER.replace("restricted.$1", replacement)
    error = rejection(tmp_path, text)
    key = "a->b.transforms.route.replacement"
    assert (error.key, error.line) == (key, line_of(text, key))
    assert message in str(error)


def test_a_router_with_the_reverse_flow_enabled_is_warned_about(tmp_path):
    config = load(tmp_path, BASE + ROUTER + "b->a.enabled = true\n")
    [warning] = [w for w in config.warnings if "router" in w]
    assert "'route' renames the topics of a->b" in warning and "b->a copies them back" in warning


def test_the_reverse_flow_fails_back_the_topics_the_router_named(tmp_path):
    config = load(tmp_path, BASE + ROUTER + "b->a.enabled = true\nb->a.topics.exclude = restricted\\..*\n")
    back = config.flow("b->a")
    assert back.reverse_flow() is config.flow("a->b")
    routed = routed_back(config.flow("a->b"), ["payments", "orders"])
    assert routed == {"restricted.payments": "payments", "restricted.orders": "orders"}
    found = route(back, "restricted.payments", routed)
    assert found is not None and (found.target_topic, found.runs_flow, found.failback) == ("payments", "a->b", True)
    assert flow(tmp_path, ROUTER).reverse_flow() is None, "no reverse flow, nothing to fail back"
