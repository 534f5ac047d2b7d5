"""A flow's SMT chain read as MM2 reads it (config/transforms.py), and what it does to records
(replication/spark/record_transforms.py)."""

from __future__ import annotations

import pytest

from airmirror.config.transforms import PredicateKind, StepKind
from airmirror.replication.spark.record_transforms import RecordTransforms
from tests.unit.config.test_mirror_config import BASE, flow, line_of, load, rejection

T = "org.apache.kafka.connect.transforms."
CHAIN = f"""\
a->b.transforms = dropPII, tag, strip
a->b.transforms.dropPII.type = {T}Filter
a->b.transforms.dropPII.predicate = isPII
a->b.transforms.tag.type = {T}InsertHeader
a->b.transforms.tag.header = mirrored-by
a->b.transforms.tag.value.literal = airmirror
a->b.transforms.strip.type = {T}DropHeaders
a->b.transforms.strip.headers = authorization, x-user-email
a->b.predicates = isPII, onlyPayments
a->b.predicates.isPII.type = {T}predicates.HasHeaderKey
a->b.predicates.isPII.name = pii
a->b.predicates.onlyPayments.type = {T}predicates.TopicNameMatches
a->b.predicates.onlyPayments.pattern = a\\.payments
"""


def test_chain_steps_and_predicates(tmp_path):
    f = flow(tmp_path, CHAIN)
    steps = f.transforms.steps
    assert [(s.alias, s.kind) for s in steps] == [
        ("dropPII", StepKind.FILTER),
        ("tag", StepKind.INSERT_HEADER),
        ("strip", StepKind.DROP_HEADERS),
    ]
    assert steps[0].predicate is not None and steps[0].predicate.kind is PredicateKind.HAS_HEADER_KEY
    assert (steps[1].header, steps[1].literal) == ("mirrored-by", b"airmirror")
    assert steps[2].headers == {"authorization", "x-user-email"}
    assert f.transform_steps("heartbeats") == (), "transforms never touch heartbeats"
    assert f.transform_steps("orders") == steps


def test_the_chain_drops_tags_and_strips_records(tmp_path):
    chain = RecordTransforms(flow(tmp_path, CHAIN).transform_steps("orders"))
    assert chain.apply(b"k", b"v", [("pii", b"1")]) is None
    assert chain.apply(b"k", None, [("authorization", b"secret"), ("h", None), ("x-user-email", b"e")]) == (
        b"k",
        None,
        [("h", None), ("mirrored-by", b"airmirror")],
    )
    assert chain.apply(None, b"v", None) == (None, b"v", [("mirrored-by", b"airmirror")])


def test_topic_predicates_are_decided_per_remote_topic_and_negate_inverts(tmp_path):
    text = CHAIN + "a->b.transforms.tag.predicate = onlyPayments\na->b.transforms.strip.predicate = onlyPayments\n"
    text += "a->b.transforms.strip.negate = true\n"
    f = flow(tmp_path, text)
    assert [s.alias for s in f.transform_steps("payments")] == ["dropPII", "tag"]
    assert [s.alias for s in f.transform_steps("orders")] == ["dropPII", "strip"]
    assert all(s.predicate is None for s in f.transform_steps("payments")[1:])


def test_tombstones_and_negated_header_predicates(tmp_path):
    text = BASE + (
        f"a->b.transforms = keepOnlyTraced, dropTombstones\n"
        f"a->b.transforms.keepOnlyTraced.type = {T}Filter\n"
        "a->b.transforms.keepOnlyTraced.predicate = traced\na->b.transforms.keepOnlyTraced.negate = true\n"
        f"a->b.transforms.dropTombstones.type = {T}Filter\na->b.transforms.dropTombstones.predicate = tomb\n"
        f"a->b.predicates = traced, tomb\na->b.predicates.traced.type = {T}predicates.HasHeaderKey\n"
        f"a->b.predicates.traced.name = trace\na->b.predicates.tomb.type = {T}predicates.RecordIsTombstone\n"
    )
    chain = RecordTransforms(load(tmp_path, text).flow("a->b").transform_steps("orders"))
    assert chain.apply(b"k", b"v", None) is None
    assert chain.apply(b"k", None, [("trace", b"t")]) is None
    assert chain.apply(b"k", b"v", [("trace", b"t")]) == (b"k", b"v", [("trace", b"t")])


@pytest.mark.parametrize(
    ("extra", "key", "message"),
    [
        (
            f"a->b.transforms = x\na->b.transforms.x.type = {T}MaskField$Value\n",
            "a->b.transforms.x.type",
            "does not run MaskField yet",
        ),
        (
            "a->b.transforms = x\na->b.transforms.x.type = com.nonexistent.Nope\n",
            "a->b.transforms.x.type",
            "'com.nonexistent.Nope' is not a transform airmirror runs",
        ),
        ("a->b.transforms = x\n", "a->b.transforms", "has no 'transforms.x.type'"),
        (f"a->b.transforms = x, x\na->b.transforms.x.type = {T}Filter\n", "a->b.transforms", "lists 'x' twice"),
        (
            f"a->b.transforms = x\na->b.transforms.x.type = {T}InsertHeader\na->b.transforms.x.header = h\n",
            "a->b.transforms.x.type",
            "needs 'a->b.transforms.x.value.literal'",
        ),
        (
            f"a->b.transforms = x\na->b.transforms.x.type = {T}Filter\na->b.transforms.x.negate = true\n",
            "a->b.transforms.x.negate",
            "no 'transforms.x.predicate'",
        ),
        (
            f"a->b.transforms = x\na->b.transforms.x.type = {T}Filter\na->b.transforms.x.predicate = p\n",
            "a->b.transforms.x.predicate",
            "predicate 'p' is not listed",
        ),
        (
            f"a->b.predicates = p\na->b.predicates.p.type = {T}predicates.TopicNameMatches\n",
            "a->b.predicates.p.type",
            "needs 'a->b.predicates.p.pattern'",
        ),
        (
            f"a->b.predicates = p\na->b.predicates.p.type = {T}predicates.TopicNameMatches\n"
            "a->b.predicates.p.pattern = [\n",
            "a->b.predicates.p.pattern",
            "invalid regular expression",
        ),
    ],
)
def test_what_connect_refuses_is_refused_naming_key_and_line(tmp_path, extra, key, message):
    text = BASE + extra
    error = rejection(tmp_path, text)
    assert (error.key, error.line) == (key, line_of(text, key))
    assert message in str(error)


def test_a_top_level_chain_is_refused_as_mm2_drops_its_step_keys(tmp_path):
    text = BASE + f"transforms = x\ntransforms.x.type = {T}Filter\n"
    error = rejection(tmp_path, text)
    assert (error.key, error.line) == ("transforms", 5)
    assert "MM2 drops top-level transform keys" in str(error)
    inherited = BASE + f"transforms = x\na->b.transforms.x.type = {T}Filter\n"
    assert [s.alias for s in load(tmp_path, inherited).flow("a->b").transforms.steps] == ["x"]


def test_keys_no_step_reads_are_named(tmp_path):
    text = CHAIN + "a->b.transforms.tag.colour = red\na->b.transforms.gone.type = x\n"
    config = load(tmp_path, BASE + text)
    named = [w for w in config.warnings if "transforms." in w]
    assert any("'a->b.transforms.tag.colour'" in w and "InsertHeader has no setting 'colour'" in w for w in named)
    assert any("'a->b.transforms.gone.type'" in w and "does not list 'gone'" in w for w in named)
