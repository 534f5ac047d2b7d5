"""A flow's SMT chain read as MM2 reads it (config/transforms.py), and what it does to records
(replication/spark/record_transforms.py)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from airmirror.config.transforms import PredicateKind, StepKind
from airmirror.replication.spark.record_transforms import RecordTransforms, TransformFailure
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
    assert f.transform_steps("orders") == tuple(replace(step, topic="a.orders") for step in steps)


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


FIELDS = f"""\
a->b.transforms = mask, cut, add
a->b.transforms.mask.type = {T}MaskField$Value
a->b.transforms.mask.fields = password, pin, tags, card
a->b.transforms.cut.type = {T}ReplaceField$Value
a->b.transforms.cut.exclude = internal
a->b.transforms.cut.renames = user:login
a->b.transforms.add.type = {T}InsertField$Value
a->b.transforms.add.topic.field = origin!
a->b.transforms.add.partition.field = part
a->b.transforms.add.timestamp.field = ts?
a->b.transforms.add.static.field = mirror
a->b.transforms.add.static.value = dr
"""


def test_field_transforms_edit_a_json_value_as_connect_edits_a_schemaless_map(tmp_path):
    steps = flow(tmp_path, FIELDS).transform_steps("orders")
    chain = RecordTransforms(steps, "a.orders", 3)
    value = b'{"user":"ann","password":"x","pin":1234,"tags":["a"],"internal":true,"n":12345678901234567890123}'
    key, out, headers = chain.apply(b"k", value, None, 1700)
    assert (key, headers) == (b"k", None)
    assert out == (
        b'{"login":"ann","password":"","pin":0,"tags":[],"n":12345678901234567890123,"card":null,'
        b'"origin":"a.orders","part":3,"ts":1700,"mirror":"dr"}'
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"not json", "needs a JSON object, the value is not JSON"),
        (b"[1, 2]", "needs a JSON object, the value is JSON list"),
        (None, "needs a JSON object, the value is null"),
    ],
)
def test_a_value_a_field_transform_cannot_process_fails_naming_the_step(tmp_path, value, message):
    chain = RecordTransforms(flow(tmp_path, FIELDS).transform_steps("orders"))
    with pytest.raises(TransformFailure, match=re.escape(f"transform 'mask' (MaskField$Value) {message}")):
        chain.apply(b"k", value, None)


def test_mask_replacement_keeps_the_fields_type_and_refuses_what_connect_refuses(tmp_path):
    text = FIELDS.replace("a->b.transforms = mask, cut, add", "a->b.transforms = mask")
    chain = RecordTransforms(flow(tmp_path, text + "a->b.transforms.mask.replacement = 42\n").transform_steps("o"))
    assert chain.apply(None, b'{"password":"x","pin":7,"card":1.5}', None) == (
        None,
        b'{"password":"42","pin":42,"card":42.0,"tags":null}',
        None,
    )
    with pytest.raises(TransformFailure, match="cannot mask a JSON list with a replacement"):
        chain.apply(None, b'{"tags":[1]}', None)
    words = RecordTransforms(flow(tmp_path, text + "a->b.transforms.mask.replacement = secret\n").transform_steps("o"))
    with pytest.raises(TransformFailure, match="cannot convert replacement 'secret' to a number"):
        words.apply(None, b'{"pin":7}', None)


def test_insert_field_leaves_a_tombstone_and_key_fields_edit_the_key(tmp_path):
    text = (
        f"a->b.transforms = add, maskKey\na->b.transforms.add.type = {T}InsertField$Value\n"
        "a->b.transforms.add.static.field = s\na->b.transforms.add.static.value = v\n"
        f"a->b.transforms.maskKey.type = {T}MaskField$Key\na->b.transforms.maskKey.fields = id\n"
    )
    chain = RecordTransforms(flow(tmp_path, text).transform_steps("orders"))
    assert chain.apply(b'{"id":"u1","k":1}', None, None) == (b'{"id":"","k":1}', None, None)


HEADER_FROM = f"""\
a->b.transforms = lift
a->b.transforms.lift.type = {T}HeaderFrom$Value
a->b.transforms.lift.fields = user, id, meta, gone
a->b.transforms.lift.headers = x-user, x-id, x-meta, x-gone
"""
OPERATION = "a->b.transforms.lift.operation = "


def test_header_from_copies_fields_to_headers_and_move_removes_them(tmp_path):
    value = b'{"user": "\xc3\xa9va", "id": 12345678901234567890123, "meta": {"a": [1, true]}, "keep": 1}'
    headers = [("trace", b"t")]
    copy = RecordTransforms(
        flow(tmp_path, HEADER_FROM + "a->b.transforms.lift.operation = copy\n").transform_steps("o")
    )
    lifted = [
        ("trace", b"t"),
        ("x-user", "\u00e9va".encode()),
        ("x-id", b"12345678901234567890123"),
        ("x-meta", b'{"a":[1,true]}'),
        ("x-gone", None),
    ]
    assert copy.apply(b"k", value, headers) == (b"k", value, lifted)  # a copy keeps the value's bytes
    move = RecordTransforms(
        flow(tmp_path, HEADER_FROM + "a->b.transforms.lift.operation = move\n").transform_steps("o")
    )
    assert move.apply(b"k", value, headers) == (b"k", b'{"keep":1}', lifted)
    with pytest.raises(
        TransformFailure, match=r"transform 'lift' \(HeaderFrom\$Value\) needs a JSON object, the value is null"
    ):
        move.apply(b"k", None, headers)


def test_header_from_on_the_key_then_a_mask_writes_the_masked_key(tmp_path):
    text = (
        f"a->b.transforms = lift, mask\na->b.transforms.lift.type = {T}HeaderFrom$Key\n"
        "a->b.transforms.lift.fields = id\na->b.transforms.lift.headers = key-id\n"
        "a->b.transforms.lift.operation = copy\n"
        f"a->b.transforms.mask.type = {T}MaskField$Key\na->b.transforms.mask.fields = id\n"
    )
    chain = RecordTransforms(flow(tmp_path, text).transform_steps("orders"))
    assert chain.apply(b'{"id": "u1"}', b"v", None) == (b'{"id":""}', b"v", [("key-id", b"u1")])


@pytest.mark.parametrize(
    ("extra", "key", "message"),
    [
        (
            HEADER_FROM.replace("x-gone", "") + "a->b.transforms.lift.operation = copy\n",
            "a->b.transforms.lift.headers",
            "'fields' config must have the same number of elements as 'headers' config",
        ),
        (
            HEADER_FROM + "a->b.transforms.lift.operation = swap\n",
            "a->b.transforms.lift.operation",
            "value 'swap' is not one of move, copy",
        ),
        (HEADER_FROM, "a->b.transforms.lift.type", "needs 'a->b.transforms.lift.operation'"),
        (
            f"a->b.transforms = x\na->b.transforms.x.type = {T}InsertField$Value\na->b.transforms.x.offset.field = o\n",
            "a->b.transforms.x.offset.field",
            "only applicable to sink connectors",
        ),
        (
            f"a->b.transforms = x\na->b.transforms.x.type = {T}InsertField$Value\n",
            "a->b.transforms.x.type",
            "inserts no field",
        ),
        (
            f"a->b.transforms = x\na->b.transforms.x.type = {T}InsertField$Value\na->b.transforms.x.static.field = s\n",
            "a->b.transforms.x.type",
            "no 'static.value'",
        ),
        (
            f"a->b.transforms = x\na->b.transforms.x.type = {T}ReplaceField$Value\na->b.transforms.x.renames = a-b\n",
            "a->b.transforms.x.renames",
            "invalid rename mapping 'a-b'",
        ),
        (
            f"a->b.transforms = x\na->b.transforms.x.type = {T}MaskField$Value\n",
            "a->b.transforms.x.type",
            "needs 'a->b.transforms.x.fields'",
        ),
        (
            f"a->b.transforms = x\na->b.transforms.x.type = {T}MaskField\na->b.transforms.x.fields = f\n",
            "a->b.transforms.x.type",
            "is not a transform airmirror runs",
        ),
        ("errors.tolerance = some\n", "errors.tolerance", "must be one of none, all"),
    ],
)
def test_bad_field_transform_keys_are_refused(tmp_path, extra, key, message):
    text = BASE + extra
    error = rejection(tmp_path, text)
    assert (error.key, error.line) == (key, line_of(text, key))
    assert message in str(error)


def test_replace_field_reads_mm2s_blacklist_and_whitelist(tmp_path):
    text = (
        f"a->b.transforms = x\na->b.transforms.x.type = {T}ReplaceField$Value\n"
        "a->b.transforms.x.whitelist = a, b\na->b.transforms.x.blacklist = b\n"
    )
    chain = RecordTransforms(flow(tmp_path, text).transform_steps("orders"))
    assert chain.apply(None, b'{"a":1,"b":2,"c":3}', None) == (None, b'{"a":1}', None)
    assert flow(tmp_path, "errors.tolerance = all\n").copy.skip_failed_records


def test_a_batch_stores_the_settings_its_chain_is_read_again_from(tmp_path):
    f = flow(tmp_path, CHAIN)
    assert f.transform_settings["transforms"] == "dropPII, tag, strip"
    assert f.stored_chain(f.transform_settings) == f.transforms
    assert f.stored_chain(None) == f.transforms, "a batch stored without settings applies the flow's chain"
    assert not f.stored_chain({}), "a batch planned without a chain applies none"


OWN = f"""\
a->b.transforms = redact, dropTests
a->b.transforms.redact.type = airmirror.transforms.Python
a->b.transforms.redact.function = tests.transform_functions:redact_card
a->b.transforms.dropTests.type = {T}Filter
a->b.transforms.dropTests.predicate = isTest
a->b.predicates = isTest
a->b.predicates.isTest.type = airmirror.predicates.Condition
a->b.predicates.isTest.expression = value.kind == 'test' || headers."x-env" == 'staging'
"""


def test_a_python_transform_and_a_condition_run_airmirrors_own_steps(tmp_path):
    chain = RecordTransforms(flow(tmp_path, OWN).transform_steps("orders"), "a.orders", 3)
    assert chain.apply(b"k", b"card 4111", [("h", b"1")], 7) == (b"k", b"card ####", [("h", b"1"), ("seen-on", b"3")])
    assert chain.apply(b"drop", b"x", None) is None
    assert chain.apply(b"k", b'{"kind":"test"}', None) is None
    assert chain.apply(b"k", b"plain", [("x-env", b"staging")]) is None
    assert chain.apply(b"k", None, [("x-env", b"prod")]) == (b"k", None, [("x-env", b"prod"), ("seen-on", b"3")])


def test_a_condition_sees_the_record_as_the_field_steps_before_it_left_it(tmp_path):
    text = (
        f"a->b.transforms = mask, drop\na->b.transforms.mask.type = {T}MaskField$Value\n"
        "a->b.transforms.mask.fields = n\n"
        f"a->b.transforms.drop.type = {T}Filter\na->b.transforms.drop.predicate = zero\n"
        "a->b.predicates = zero\na->b.predicates.zero.type = airmirror.predicates.Condition\n"
        "a->b.predicates.zero.expression = value.n == `0` && topic == 'a.orders'\n"
    )
    chain = RecordTransforms(flow(tmp_path, text).transform_steps("orders"), "a.orders")
    assert chain.apply(None, b'{"n": 5}', None) is None
    assert chain.apply(None, b'{"n": "5"}', None) == (None, b'{"n":""}', None)


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("moves_the_timestamp", "changed the record's topic, partition or timestamp"),
        ("raises", "raised KeyError: 'no such customer'"),
        ("returns_text", "returned a str, not a MirroredRecord or None"),
    ],
)
def test_a_python_transform_that_misbehaves_fails_the_record_naming_the_step(tmp_path, function, message):
    text = (
        "a->b.transforms = py\na->b.transforms.py.type = airmirror.transforms.Python\n"
        f"a->b.transforms.py.function = tests.transform_functions:{function}\n"
    )
    chain = RecordTransforms(flow(tmp_path, text).transform_steps("orders"))
    with pytest.raises(TransformFailure, match=re.escape(f"transform 'py' (Python) {message}")):
        chain.apply(b"k", b"v", None, 1)


@pytest.mark.parametrize(
    ("extra", "key", "message"),
    [
        ("tests.transform_functions", "function", "'tests.transform_functions' is not module:callable"),
        ("tests.no_such_module:f", "function", "cannot import module 'tests.no_such_module'"),
        ("tests.transform_functions:absent", "function", "module 'tests.transform_functions' has no 'absent'"),
        ("tests.transform_functions:NOT_CALLABLE", "function", "is not callable"),
    ],
)
def test_a_python_transform_that_is_not_there_is_refused_naming_key_and_line(tmp_path, extra, key, message):
    text = (
        BASE + "a->b.transforms = py\na->b.transforms.py.type = airmirror.transforms.Python\n"
        f"a->b.transforms.py.{key} = {extra}\n"
    )
    error = rejection(tmp_path, text)
    assert (error.key, error.line) == (f"a->b.transforms.py.{key}", line_of(text, f"a->b.transforms.py.{key}"))
    assert message in str(error)


def test_a_condition_that_does_not_parse_is_refused_naming_key_and_line(tmp_path):
    text = (
        BASE + "a->b.predicates = p\na->b.predicates.p.type = airmirror.predicates.Condition\n"
        "a->b.predicates.p.expression = value.kind ==\n"
    )
    error = rejection(tmp_path, text)
    key = "a->b.predicates.p.expression"
    assert (error.key, error.line) == (key, line_of(text, key)) and "is not a JMESPath expression" in str(error)
