"""A flow's Kafka Connect transforms (SMTs) and predicates, read from the MM2 file as MM2 reads them.

Syntax (Kafka Connect's ``ConnectorConfig``): ``transforms = t1, t2`` lists the chain in order, each with
``transforms.t1.type = CLASS``, the class's own keys ``transforms.t1.KEY``, and optionally
``transforms.t1.predicate = p`` (the step runs only on records for which predicate ``p`` holds) and
``transforms.t1.negate = true`` (only where it does not); ``predicates = p`` lists the predicates, each with
``predicates.p.type = CLASS`` and its keys.  Rules:

1. **Where.** As in MM2's ``MirrorMakerConfig.connectorBaseConfig``, a flow's chain comes from its own keys
   (``{source}->{target}.transforms...``) over the top-level ``transforms`` and ``predicates`` lists; top-level
   ``transforms.X.*`` and ``predicates.X.*`` keys are dropped (MM2 keeps only the names its connectors define), so a
   top-level chain leaves its steps without a ``.type`` and is refused, as MM2 refuses the connector, and such keys
   are named as unused (:func:`top_level_warnings`).
2. **Refused** (:class:`~airmirror.errors.ConfigError`, exit 2, naming key and line), as Connect refuses them: an
   alias listed twice; a step or predicate without ``.type``; a class airmirror does not run (it is named); a
   required key missing or invalid; ``negate`` without ``predicate``; a ``predicate`` not listed in ``predicates``.
3. **Named**: keys of a step or predicate that its class does not define, and keys of aliases the lists do not name
   (MM2 logs them as unused).
4. **What runs.** The classes of :data:`TRANSFORM_CLASSES` and :data:`PREDICATE_CLASSES`, with Connect's meaning on
   records whose key, value and header values are raw bytes (MM2 hands its SMTs ``Schema.BYTES`` records).  The
   topic a predicate sees is the remote topic, as in MM2 (its SMTs run on the renamed record).  Transforms never
   touch heartbeats (nor checkpoints and offset syncs, which airmirror writes itself): MM2's do, since one
   connector config reaches its three connectors.  The copy path applies the chain
   (:mod:`airmirror.replication.spark.record_transforms`); a dropped record takes its source offset and no target
   offset, so translation across it is exact (:mod:`airmirror.checkpoints.translation` rule 3).
5. **Field transforms** (``MaskField``, ``ReplaceField``, ``InsertField``, ``HeaderFrom``, each ``$Key`` or
   ``$Value``) read or edit a key or value that is a JSON object, with Connect's meaning for a schemaless ``Map``
   (MM2 itself fails them on its bytes: it has no JSON), or an Avro record framed with a registry id, with Connect's
   meaning for a ``Struct``, written with the schema the steps derive, registered on the target's registry
   (:mod:`airmirror.schemas.avro_fields`; a flow whose schema ids are ``off`` reads no Avro).  A key or value that
   is neither (not JSON, another JSON type, null for all but InsertField... as Connect's ``requireMap``) cannot be
   processed: the record fails its chunk, named, unless ``errors.tolerance = all`` skips it (counted, never
   written).  InsertField's ``offset.field`` is refused: it applies to sink connectors only, and MM2 fails every
   record with it.  HeaderFrom's
   headers need a byte encoding Connect leaves to the header converter (MM2's default one fails on them): a string
   is its UTF-8 bytes, as Connect's ``SimpleHeaderConverter`` writes it, null is a null header, any other value its
   compact JSON.
6. **airmirror's own**, for what the standard classes cannot say: the transform ``airmirror.transforms.Python``
   (``function = module:callable``, imported when the chain is read, so a function that is not there is refused
   like a missing class, and again on the Spark executors) and the predicate ``airmirror.predicates.Condition``
   (``expression``, a JMESPath expression, parsed when the chain is read).  What they do to a record is
   :mod:`airmirror.replication.spark.own_transforms`.  A Python step may drop records (as a ``Filter``), so
   translation and verify treat it as one.
7. **Routing.** ``RegexRouter`` renames the remote topic, with Connect's meaning: where ``regex`` matches the whole
   name the step sees, the name becomes ``replacement`` (Java's syntax: ``$1`` and ``${name}`` name groups, ``\\``
   escapes), else it stays.  Routing is a property of the topic, never of a record, so a router is decided once per
   topic (:meth:`TransformChain.routed`): one gated by a record predicate (``HasHeaderKey``, ``RecordIsTombstone``,
   ``Condition``), which would split a partition over two topics and so its offsets, is refused.  The steps after
   a router see the routed name (a ``TopicNameMatches`` predicate, ``InsertField``'s topic); the remote topic is the
   name after the last router, and everything that names the remote topic follows it (topic and ACL sync,
   subjects, checkpoints, group sync, ``translate``, the failover client, the UI).  Heartbeats topics are never
   routed.  Where two source topics would route to one remote topic, the run refuses them
   (:func:`airmirror.kafka.topics.replicated_topics`); where a topic's route changes, it starts afresh in its new
   remote topic (:mod:`airmirror.replication.incarnations`).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, cast

import jmespath

from airmirror.config.properties import Setting
from airmirror.config.setting_types import REGEX
from airmirror.errors import ConfigError
from airmirror.mm2.policy import ReplicationPolicy

TRANSFORMS = "transforms"
PREDICATES = "predicates"
_CONNECT = "org.apache.kafka.connect.transforms."
_LIST_SEPARATOR = re.compile(r"\s*,\s*")


class StepKind(Enum):
    """The transforms airmirror runs, by their Connect class (the field transforms with ``$Key`` or ``$Value``)."""

    FILTER = _CONNECT + "Filter"
    INSERT_HEADER = _CONNECT + "InsertHeader"
    DROP_HEADERS = _CONNECT + "DropHeaders"
    MASK_FIELD = _CONNECT + "MaskField"
    REPLACE_FIELD = _CONNECT + "ReplaceField"
    INSERT_FIELD = _CONNECT + "InsertField"
    HEADER_FROM = _CONNECT + "HeaderFrom"
    REGEX_ROUTER = _CONNECT + "RegexRouter"
    PYTHON = "airmirror.transforms.Python"

    @property
    def edits_fields(self) -> bool:
        """True for the field transforms, which read the record's key or value as a JSON object (rule 5)."""
        return self in (StepKind.MASK_FIELD, StepKind.REPLACE_FIELD, StepKind.INSERT_FIELD, StepKind.HEADER_FROM)


class Side(Enum):
    """Which part of a record a field transform edits: ``$Key`` or ``$Value``."""

    KEY = "Key"
    VALUE = "Value"


class PredicateKind(Enum):
    """The predicates airmirror runs, by their Connect class."""

    TOPIC_NAME_MATCHES = _CONNECT + "predicates.TopicNameMatches"
    HAS_HEADER_KEY = _CONNECT + "predicates.HasHeaderKey"
    RECORD_IS_TOMBSTONE = _CONNECT + "predicates.RecordIsTombstone"
    CONDITION = "airmirror.predicates.Condition"


TRANSFORM_CLASSES: Mapping[str, tuple[StepKind, Side | None]] = {
    **{kind.value: (kind, None) for kind in StepKind if not kind.edits_fields},
    **{f"{kind.value}${side.value}": (kind, side) for kind in StepKind if kind.edits_fields for side in Side},
}
PREDICATE_CLASSES: Mapping[str, PredicateKind] = {kind.value: kind for kind in PredicateKind}
_STEP_KEYS: Mapping[StepKind, tuple[str, ...]] = {
    StepKind.FILTER: (),
    StepKind.INSERT_HEADER: ("header", "value.literal"),
    StepKind.DROP_HEADERS: ("headers",),
    StepKind.MASK_FIELD: ("fields",),
    StepKind.REPLACE_FIELD: (),
    StepKind.INSERT_FIELD: (),
    StepKind.HEADER_FROM: ("fields", "headers", "operation"),
    StepKind.REGEX_ROUTER: ("regex", "replacement"),
    StepKind.PYTHON: ("function",),
}
"""Each class's required keys (Connect defines them without a default)."""
_OPTIONAL_KEYS: Mapping[StepKind, tuple[str, ...]] = {
    StepKind.MASK_FIELD: ("replacement", "replace.null.with.default"),
    StepKind.REPLACE_FIELD: ("exclude", "include", "renames", "blacklist", "whitelist", "replace.null.with.default"),
    StepKind.INSERT_FIELD: (
        "topic.field",
        "partition.field",
        "offset.field",
        "timestamp.field",
        "static.field",
        "static.value",
        "replace.null.with.default",
    ),
    StepKind.HEADER_FROM: ("replace.null.with.default",),
}
"""Each class's keys with a default (``replace.null.with.default`` concerns records with a schema only: a JSON value
has none, so it changes nothing)."""
_PREDICATE_KEYS: Mapping[PredicateKind, tuple[str, ...]] = {
    PredicateKind.TOPIC_NAME_MATCHES: ("pattern",),
    PredicateKind.HAS_HEADER_KEY: ("name",),
    PredicateKind.RECORD_IS_TOMBSTONE: (),
    PredicateKind.CONDITION: ("expression",),
}
CLASS_DOCS: Mapping[StepKind | PredicateKind, str] = {
    StepKind.FILTER: "drops the record (use it with a predicate): the target gets nothing for it, translation skips it",
    StepKind.INSERT_HEADER: "appends header `header` with value `value.literal` (its UTF-8 bytes)",
    StepKind.DROP_HEADERS: "removes every header named in `headers` (comma-separated)",
    StepKind.MASK_FIELD: (
        "on a key or value that is a JSON object or an Avro record (framed with a registry id, written with the schema "
        "the steps derive, registered on the target's registry): sets each of `fields` to its type's empty value "
        '(`""`, 0, false, `[]`, `{}`; null stays null; a missing JSON field is added as null, as in Connect) or to '
        "`replacement`"
    ),
    StepKind.REPLACE_FIELD: (
        "on a JSON object or an Avro record: keeps the fields of `include` (all when empty), drops those of "
        "`exclude`, renames per `renames` (`old:new`, comma-separated); MM2's `blacklist`/`whitelist` are read as "
        "aliases"
    ),
    StepKind.INSERT_FIELD: (
        "on a JSON object or an Avro record: adds `topic.field` (the remote topic), `partition.field`, "
        "`timestamp.field` (the record's timestamp in ms) and `static.field` = `static.value` (optional fields of an "
        "Avro record); a null key or value stays null"
    ),
    StepKind.HEADER_FROM: (
        "on a JSON object or an Avro record: appends, for each of `fields`, a header named by the entry of `headers` "
        "at the same place, holding the field's value (a string as its UTF-8 bytes, null or a missing field as a "
        "null header, any other value as compact JSON); `operation` `move` also removes the fields, `copy` keeps the "
        "key or value as it is"
    ),
    StepKind.REGEX_ROUTER: (
        "renames the remote topic to `replacement` (`$1`, `${name}`: the groups of `regex`) where `regex` matches "
        "its whole name; topic and ACL sync, subjects, checkpoints, group sync, translate and the failover client "
        "follow the new name (not with a record predicate: routing is per topic)"
    ),
    StepKind.PYTHON: (
        "airmirror's own: calls `function` (`module:callable`, importable where the flow is loaded and on the Spark "
        "executors) with each record (`airmirror.model.MirroredRecord`); it returns the record, changed in key, "
        "value or headers, or None to drop it"
    ),
    PredicateKind.TOPIC_NAME_MATCHES: "the remote topic name (as MM2's SMTs see it) matches the regex `pattern`",
    PredicateKind.HAS_HEADER_KEY: "the record has a header named `name`",
    PredicateKind.RECORD_IS_TOMBSTONE: "the record's value is null",
    PredicateKind.CONDITION: (
        "airmirror's own: the JMESPath `expression` is true (not false, null or empty) of "
        "`{key, value, headers, topic, partition, timestamp}`: key and value as JSON (as text when not JSON), "
        "headers by name as text, the remote topic"
    ),
}
"""What each class does, for the configuration reference (:mod:`airmirror.config.reference`)."""
_STEP_CONTROL_KEYS = ("type", "predicate", "negate")


@dataclass(frozen=True)
class Predicate:
    """One predicate of ``predicates``: ``pattern`` for TopicNameMatches, ``header`` for HasHeaderKey,
    ``expression`` (JMESPath, checked) for Condition."""

    alias: str
    kind: PredicateKind
    pattern: re.Pattern[str] | None = None
    header: str | None = None
    expression: str | None = None

    def topic_only(self) -> bool:
        """True when the predicate depends on the topic alone (decided once per partition, not per record)."""
        return self.kind is PredicateKind.TOPIC_NAME_MATCHES

    def holds_for_topic(self, topic: str) -> bool:
        """TopicNameMatches: the pattern matches the whole remote topic name (Java's ``Matcher.matches``)."""
        assert self.pattern is not None
        return self.pattern.fullmatch(topic) is not None


@dataclass(frozen=True)
class FieldEdit:
    """What a field transform does to the JSON object of a record's ``side`` (see :data:`CLASS_DOCS`): MaskField's
    ``masked`` fields and ``replacement``; ReplaceField's ``include``, ``exclude`` and ``renames``; InsertField's
    ``inserted`` fields, ``(field, what)`` with ``what`` one of ``topic``, ``partition``, ``timestamp`` or
    ``static``, and its ``static_value``; HeaderFrom's ``to_headers``, ``(field, header)``, and ``move``."""

    side: Side
    masked: tuple[str, ...] = ()
    replacement: str | None = None
    include: frozenset[str] = frozenset()
    exclude: frozenset[str] = frozenset()
    renames: tuple[tuple[str, str], ...] = ()
    inserted: tuple[tuple[str, str], ...] = ()
    static_value: str | None = None
    to_headers: tuple[tuple[str, str], ...] = ()
    move: bool = False


@dataclass(frozen=True)
class TopicRoute:
    """A RegexRouter's rename (rule 7): ``pattern`` (Python syntax) and ``replacement`` as parts, each a literal text
    or a group (its number or name)."""

    pattern: re.Pattern[str]
    parts: tuple[str | int | tuple[str], ...]

    @property
    def literal_prefix(self) -> str:
        """The text every name this route gives starts with (before its first group)."""
        prefix = ""
        for part in self.parts:
            if not isinstance(part, str):
                break
            prefix += part
        return prefix

    def apply(self, topic: str) -> str:
        """``topic`` renamed where the pattern matches all of it (Java's ``matches`` then ``replaceFirst``), else
        ``topic``; a group that took no part in the match is empty, as in Java."""
        match = self.pattern.fullmatch(topic)
        if match is None:
            return topic
        return "".join(
            part if isinstance(part, str) else match.group(part if isinstance(part, int) else part[0]) or ""
            for part in self.parts
        )


@dataclass(frozen=True)
class Step:
    """One step of a chain: a Connect transform, its keys, and the predicate (maybe negated) that gates it.

    ``header`` and ``literal`` are InsertHeader's header name and value (the literal's UTF-8 bytes), ``headers``
    DropHeaders' names, ``fields`` what a field transform does, ``function`` a Python transform's
    ``module:callable`` (checked importable when the chain was read), ``route`` a RegexRouter's rename.  ``topic``
    is the remote topic name the step sees, set by :meth:`TransformChain.for_topic` (rule 7)."""

    alias: str
    kind: StepKind
    predicate: Predicate | None = None
    negate: bool = False
    header: str | None = None
    literal: bytes | None = None
    headers: frozenset[str] = frozenset()
    fields: FieldEdit | None = None
    function: str | None = None
    route: TopicRoute | None = None
    topic: str | None = None

    @property
    def class_name(self) -> str:
        """The Connect class, as the file names it (``MaskField$Value``)."""
        simple = self.kind.value.rsplit(".", 1)[-1]
        return simple if self.fields is None else f"{simple}${self.fields.side.value}"


@dataclass(frozen=True)
class TransformChain:
    """A flow's transforms in order; empty when the flow has none.  Plain data: it pickles to Spark executors."""

    steps: tuple[Step, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.steps)

    def for_topic(self, remote_topic: str) -> tuple[Step, ...]:
        """The steps that can act on the records of the topic the replication policy names ``remote_topic``, each
        with the name it sees (:attr:`Step.topic`, rule 7): a step gated by a topic predicate is kept, ungated, where
        the predicate (negated or not) holds for that name, and dropped where it does not; routers are left out
        (they act on the topic, :meth:`routed`); the other steps are kept as they are (their predicates are tested
        per record)."""
        return self._walk(remote_topic)[1]

    def routed(self, remote_topic: str) -> str:
        """The remote topic after the chain's routers (rule 7) of the topic the replication policy names
        ``remote_topic``."""
        if not any(step.route is not None for step in self.steps):
            return remote_topic  # no router: nothing to walk, nothing to copy
        return self._walk(remote_topic)[0]

    def _walk(self, topic: str) -> tuple[str, tuple[Step, ...]]:
        kept = []
        for step in self.steps:
            predicate = step.predicate
            if predicate is not None and predicate.topic_only():
                if predicate.holds_for_topic(topic) == step.negate:
                    continue
                step = replace(step, predicate=None, negate=False)
            if step.route is not None:
                topic = step.route.apply(topic)
            else:
                kept.append(replace(step, topic=topic))
        return topic, tuple(kept)


def routed_remote_topic(policy: ReplicationPolicy, chain: TransformChain, source: str, topic: str) -> str:
    """The remote topic of source ``topic`` of a flow from cluster ``source``: the policy's name after ``chain``'s
    routers (rule 7); a heartbeats topic's is the policy's."""
    remote = policy.format_remote_topic(source, topic)
    return remote if policy.is_heartbeats_topic(topic) else chain.routed(remote)


def may_drop(steps: Sequence[Step], skip_failed_records: bool) -> bool:
    """Whether these steps can leave a record unwritten: a ``Filter`` or a Python transform, or a field transform
    whose failures ``errors.tolerance = all`` skips."""
    return any(
        step.kind in (StepKind.FILTER, StepKind.PYTHON) or (skip_failed_records and step.fields is not None)
        for step in steps
    )


RESCHEMAING = (StepKind.REPLACE_FIELD, StepKind.INSERT_FIELD)
"""The field transforms that change an Avro record's schema (so does ``HeaderFrom`` with ``move``)."""


def reschemaed_sides(steps: Sequence[Step]) -> frozenset[Side]:
    """The sides of a topic (its :meth:`TransformChain.for_topic` steps) whose every record a schema-changing field
    step rewrites: one without a record predicate (:mod:`airmirror.schemas.avro_fields` rule 5)."""
    return frozenset(
        step.fields.side
        for step in steps
        if step.fields is not None
        and step.predicate is None
        and (step.kind in RESCHEMAING or (step.kind is StepKind.HEADER_FROM and step.fields.move))
    )


def is_transform_key(key: str) -> bool:
    """True for the keys this module reads: ``transforms``, ``predicates`` and their ``.ALIAS.KEY`` keys."""
    return key in (TRANSFORMS, PREDICATES) or key.startswith((f"{TRANSFORMS}.", f"{PREDICATES}."))


def top_level_warnings(top: Mapping[str, Setting]) -> list[str]:
    """Rule 1: top-level ``transforms.X.*`` and ``predicates.X.*`` keys, which MM2 drops."""
    return [
        f"{setting.describe()}: ignored, MM2 reads a transform's or predicate's keys per flow only "
        f"('{{source}}->{{target}}.{key}')"
        for key, setting in top.items()
        if key.startswith((f"{TRANSFORMS}.", f"{PREDICATES}."))
    ]


def transform_keys(top: Mapping[str, Setting], flow: Mapping[str, Setting]) -> dict[str, Setting]:
    """Rule 1: the keys a flow's chain is read from, its own (``flow``, prefix removed) over the top-level lists."""
    merged = {key: top[key] for key in (TRANSFORMS, PREDICATES) if key in top}
    merged.update((key, setting) for key, setting in flow.items() if is_transform_key(key))
    return merged


def flow_chain(merged: Mapping[str, Setting], top: Mapping[str, Setting]) -> tuple[TransformChain, list[str]]:
    """The flow's chain from its :func:`transform_keys` (``merged``) and the warnings of rule 3; raises
    :class:`~airmirror.errors.ConfigError` for rule 2, naming a top-level key of ``top`` that MM2 dropped."""
    reader = _ChainReader(merged, top)
    predicates = {alias: reader.predicate(alias) for alias in reader.aliases(PREDICATES)}
    steps = tuple(reader.step(alias, predicates) for alias in reader.aliases(TRANSFORMS))
    return TransformChain(steps), reader.unused()


class _ChainReader:
    """Reads one flow's merged transform keys, remembering which it read (rule 3 names the rest)."""

    def __init__(self, merged: Mapping[str, Setting], top: Mapping[str, Setting]) -> None:
        self.merged, self.top = merged, top
        self.read: set[str] = set()

    def aliases(self, family: str) -> list[str]:
        setting = self.merged.get(family)
        if setting is None:
            return []
        self.read.add(family)
        aliases = _names(setting)
        duplicates = sorted({alias for alias in aliases if aliases.count(alias) > 1})
        if duplicates:
            raise ConfigError(f"lists {', '.join(map(repr, duplicates))} twice", key=setting.key, line=setting.line)
        return aliases

    def type_of(self, family: str, alias: str) -> Setting:
        key = f"{family}.{alias}.type"
        setting = self.merged.get(key)
        if setting is None or not setting.value.strip():
            listing = self.merged[family]
            dropped = " (MM2 drops top-level transform keys: write them per flow)" if key in self.top else ""
            raise ConfigError(
                f"{alias!r} has no '{key}'{dropped}: MM2 refuses a connector with a transform or predicate "
                "without a class",
                key=listing.key,
                line=listing.line,
            )
        self.read.add(key)
        return setting

    def required(self, family: str, alias: str, name: str, type_setting: Setting) -> Setting:
        key = f"{family}.{alias}.{name}"
        setting = self.merged.get(key)
        if setting is None:
            missing = type_setting.key[: -len("type")] + name
            raise ConfigError(
                f"{type_setting.value.strip()} needs '{missing}'", key=type_setting.key, line=type_setting.line
            )
        self.read.add(key)
        return setting

    def predicate(self, alias: str) -> Predicate:
        type_setting = self.type_of(PREDICATES, alias)
        kind = PREDICATE_CLASSES.get(type_setting.value.strip())
        if kind is None:
            raise _unsupported(type_setting, "predicate", PREDICATE_CLASSES)
        values = {name: self.required(PREDICATES, alias, name, type_setting) for name in _PREDICATE_KEYS[kind]}
        if kind is PredicateKind.TOPIC_NAME_MATCHES:
            return Predicate(alias, kind, pattern=REGEX.parse(values["pattern"]))
        if kind is PredicateKind.HAS_HEADER_KEY:
            return Predicate(alias, kind, header=_non_empty(values["name"]))
        if kind is PredicateKind.CONDITION:
            return Predicate(alias, kind, expression=_expression(values["expression"]))
        return Predicate(alias, kind)

    def optional(self, family: str, alias: str, name: str) -> Setting | None:
        key = f"{family}.{alias}.{name}"
        setting = self.merged.get(key)
        if setting is not None:
            self.read.add(key)
        return setting

    def step(self, alias: str, predicates: Mapping[str, Predicate]) -> Step:
        type_setting = self.type_of(TRANSFORMS, alias)
        found = TRANSFORM_CLASSES.get(type_setting.value.strip())
        if found is None:
            raise _unsupported(type_setting, "transform", TRANSFORM_CLASSES)
        kind, side = found
        values = {name: self.required(TRANSFORMS, alias, name, type_setting) for name in _STEP_KEYS[kind]}
        predicate, negate = self.gate(alias, predicates)
        if side is not None:
            options = {name: self.optional(TRANSFORMS, alias, name) for name in _OPTIONAL_KEYS[kind]}
            edit = _field_edit(kind, side, {**values, **options}, type_setting)
            return Step(alias, kind, predicate, negate, fields=edit)
        if kind is StepKind.INSERT_HEADER:
            return Step(
                alias,
                kind,
                predicate,
                negate,
                header=_non_empty(values["header"]),
                literal=values["value.literal"].value.strip().encode("utf-8"),
            )
        if kind is StepKind.PYTHON:
            return Step(alias, kind, predicate, negate, function=_function(values["function"]))
        if kind is StepKind.REGEX_ROUTER:
            if predicate is not None and not predicate.topic_only():
                setting = self.merged[f"{TRANSFORMS}.{alias}.predicate"]
                raise ConfigError(
                    f"RegexRouter {alias!r} is gated by {predicate.kind.value.rsplit('.', 1)[-1]} {predicate.alias!r}, "
                    "which is decided per record: airmirror routes whole topics (a partition's records stay in one "
                    "remote partition, with their offsets), so a router takes TopicNameMatches only",
                    key=setting.key,
                    line=setting.line,
                )
            return Step(alias, kind, predicate, negate, route=_route(values["regex"], values["replacement"]))
        if kind is StepKind.DROP_HEADERS:
            names = _names(values["headers"])
            if not names:
                setting = values["headers"]
                raise ConfigError("lists no header", key=setting.key, line=setting.line)
            return Step(alias, kind, predicate, negate, headers=frozenset(names))
        return Step(alias, kind, predicate, negate)

    def gate(self, alias: str, predicates: Mapping[str, Predicate]) -> tuple[Predicate | None, bool]:
        """The step's ``predicate`` and ``negate`` (rule 2)."""
        predicate_setting = self.merged.get(f"{TRANSFORMS}.{alias}.predicate")
        negate_setting = self.merged.get(f"{TRANSFORMS}.{alias}.negate")
        negate = False
        if negate_setting is not None:
            self.read.add(f"{TRANSFORMS}.{alias}.negate")
            value = negate_setting.value.strip().lower()
            if value not in ("true", "false"):
                raise ConfigError(
                    f"value {negate_setting.value!r} is not true or false",
                    key=negate_setting.key,
                    line=negate_setting.line,
                )
            if predicate_setting is None:
                raise ConfigError(
                    f"there is no '{TRANSFORMS}.{alias}.predicate' defining a predicate to be negated",
                    key=negate_setting.key,
                    line=negate_setting.line,
                )
            negate = value == "true"
        if predicate_setting is None:
            return None, False
        self.read.add(f"{TRANSFORMS}.{alias}.predicate")
        name = predicate_setting.value.strip()
        if name not in predicates:
            listed = ", ".join(predicates) or "none"
            raise ConfigError(
                f"predicate {name!r} is not listed in '{PREDICATES}' (listed: {listed})",
                key=predicate_setting.key,
                line=predicate_setting.line,
            )
        return predicates[name], negate

    def unused(self) -> list[str]:
        """Rule 3: the merged keys nothing read."""
        return [
            f"{setting.describe()}: not used, {_why_unused(key, self.merged)}"
            for key, setting in self.merged.items()
            if key not in self.read
        ]


def _why_unused(key: str, merged: Mapping[str, Setting]) -> str:
    family, _, rest = key.partition(".")
    alias, _, name = rest.partition(".")
    listed = merged.get(family)
    names = [] if listed is None else _LIST_SEPARATOR.split(listed.value.strip())
    if alias not in names:
        return f"'{family}' does not list {alias!r}"
    if name in _STEP_CONTROL_KEYS:
        return "Kafka Connect reads it for transforms only"
    type_setting = merged.get(f"{family}.{alias}.type")
    class_name = "its class" if type_setting is None else type_setting.value.strip().rsplit(".", 1)[-1]
    return f"{class_name} has no setting {name!r}"


def _names(setting: Setting | None) -> list[str]:
    """A Connect LIST value's entries (none when unset)."""
    return [] if setting is None else [name for name in _LIST_SEPARATOR.split(setting.value.strip()) if name]


def _field_edit(kind: StepKind, side: Side, values: Mapping[str, Setting | None], type_setting: Setting) -> FieldEdit:
    """A field transform's keys, checked as Connect checks them (rule 2)."""
    if kind is StepKind.MASK_FIELD:
        fields = values["fields"]
        assert fields is not None
        if not _names(fields):
            raise ConfigError("lists no field", key=fields.key, line=fields.line)
        replacement = values["replacement"]
        if replacement is not None and not replacement.value.strip():
            raise ConfigError("is empty", key=replacement.key, line=replacement.line)
        return FieldEdit(
            side, masked=tuple(_names(fields)), replacement=None if replacement is None else replacement.value.strip()
        )
    if kind is StepKind.REPLACE_FIELD:
        renames = []
        for entry in _names(values["renames"]):
            old, colon, new = entry.partition(":")
            if not colon or not old or not new or ":" in new:
                setting = values["renames"]
                assert setting is not None
                raise ConfigError(
                    f"invalid rename mapping {entry!r} (write old:new)", key=setting.key, line=setting.line
                )
            renames.append((old, new))
        exclude = values["exclude"] if values["exclude"] is not None else values["blacklist"]
        include = values["include"] if values["include"] is not None else values["whitelist"]
        return FieldEdit(
            side, include=frozenset(_names(include)), exclude=frozenset(_names(exclude)), renames=tuple(renames)
        )
    if kind is StepKind.HEADER_FROM:
        return _header_from(side, values)
    offset = values["offset.field"]
    if offset is not None:
        raise ConfigError(
            "InsertField's offset field is only applicable to sink connectors: MM2 fails every record with it",
            key=offset.key,
            line=offset.line,
        )
    inserted = [
        (setting.value.strip().rstrip("!?"), what)
        for what in ("topic", "partition", "timestamp", "static")
        if (setting := values[f"{what}.field"]) is not None and setting.value.strip()
    ]
    if not inserted:
        raise ConfigError("InsertField inserts no field", key=type_setting.key, line=type_setting.line)
    static = values["static.value"]
    if any(what == "static" for _, what in inserted) and static is None:
        raise ConfigError(
            f"no 'static.value' for the static field of {type_setting.value.strip()}",
            key=type_setting.key,
            line=type_setting.line,
        )
    return FieldEdit(side, inserted=tuple(inserted), static_value=None if static is None else static.value.strip())


def _header_from(side: Side, values: Mapping[str, Setting | None]) -> FieldEdit:
    """HeaderFrom's keys, checked as Connect checks them: as many ``headers`` as ``fields``, ``operation`` one of
    ``move`` and ``copy``."""
    fields, headers, operation = values["fields"], values["headers"], values["operation"]
    assert fields is not None and headers is not None and operation is not None
    if len(_names(fields)) != len(_names(headers)):
        raise ConfigError(
            "'fields' config must have the same number of elements as 'headers' config",
            key=headers.key,
            line=headers.line,
        )
    if not _names(fields):
        raise ConfigError("lists no field", key=fields.key, line=fields.line)
    how = operation.value.strip()
    if how not in ("move", "copy"):
        raise ConfigError(f"value {how!r} is not one of move, copy", key=operation.key, line=operation.line)
    return FieldEdit(side, to_headers=tuple(zip(_names(fields), _names(headers), strict=True)), move=how == "move")


def _unsupported(setting: Setting, what: str, supported: Mapping[str, object]) -> ConfigError:
    name = setting.value.strip()
    runs = ", ".join(sorted(cls.rsplit(".", 1)[-1] for cls in supported))
    return ConfigError(f"{name!r} is not a {what} airmirror runs (it runs {runs})", key=setting.key, line=setting.line)


_JAVA_NAMED_GROUP = re.compile(r"\(\?<(?=[A-Za-z])")
_REPLACEMENT_PART = re.compile(r"\\(.)|\$\{([A-Za-z][A-Za-z0-9]*)\}|\$([0-9]+)|([\\$])|([^\\$]+)", re.DOTALL)


def _route(regex: Setting, replacement: Setting) -> TopicRoute:
    """A RegexRouter's keys read with Java's syntax (rule 7): named groups ``(?<name>...)`` and a replacement's
    ``$n``, ``${name}`` and ``\\c``, checked as Java checks them (a group the regex does not have is refused)."""
    try:
        pattern = re.compile(_JAVA_NAMED_GROUP.sub("(?P<", regex.value.strip()))
    except re.error as exc:
        raise ConfigError(f"invalid regular expression {regex.value!r}: {exc}", key=regex.key, line=regex.line) from exc
    text = replacement.value.strip()
    parts: list[str | int | tuple[str]] = []
    for escaped, name, number, stray, literal in _REPLACEMENT_PART.findall(text):
        if stray:
            raise ConfigError(
                f"{text!r}: a {stray!r} that neither names a group ('$1', '${{name}}') nor escapes a character",
                key=replacement.key,
                line=replacement.line,
            )
        if name:
            if name not in pattern.groupindex:
                raise ConfigError(
                    f"no group {name!r} in {regex.value.strip()!r}", key=replacement.key, line=replacement.line
                )
            parts.append((name,))
        elif number:
            parts.extend(_group_reference(number, pattern.groups, replacement))
        else:
            parts.append(escaped or literal)
    return TopicRoute(pattern, tuple(parts))


def _group_reference(digits: str, groups: int, replacement: Setting) -> list[str | int]:
    """Java's reading of ``$`` then ``digits``: the first digit names a group, each next one joins it while the
    number stays a group of the regex; the digits left over are text."""
    number, used = int(digits[0]), 1
    if number > groups:
        raise ConfigError(
            f"no group {number} in the regex (it has {groups})", key=replacement.key, line=replacement.line
        )
    while used < len(digits) and int(digits[: used + 1]) <= groups:
        number, used = int(digits[: used + 1]), used + 1
    return [number] if used == len(digits) else [number, digits[used:]]


def _expression(setting: Setting) -> str:
    """A Condition's JMESPath expression, compiled once to refuse one that does not parse."""
    expression = _non_empty(setting)
    try:
        jmespath.compile(expression)
    except jmespath.exceptions.JMESPathError as error:
        raise ConfigError(f"is not a JMESPath expression: {error}", key=setting.key, line=setting.line) from error
    return expression


def _function(setting: Setting) -> str:
    """A Python transform's ``module:callable``, imported once to refuse one that is not there."""
    target = _non_empty(setting)
    try:
        imported_function(target)
    except (ImportError, AttributeError, TypeError, ValueError) as error:
        raise ConfigError(str(error), key=setting.key, line=setting.line) from error
    return target


def imported_function(target: str) -> Callable[..., Any]:
    """The callable ``module:name`` names (``name`` may be dotted), imported; raises ValueError for another form,
    ImportError or AttributeError when it is not there, TypeError when it is not callable."""
    module_name, colon, name = target.partition(":")
    if not colon or not module_name or not name:
        raise ValueError(f"{target!r} is not module:callable")
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise ImportError(f"cannot import module {module_name!r} of {target!r}: {error}") from error
    for part in name.split("."):
        if not hasattr(found, part):
            raise AttributeError(f"module {module_name!r} has no {name!r}")
        found = getattr(found, part)
    if not callable(found):
        raise TypeError(f"{target!r} is not callable")
    return cast(Callable[..., Any], found)


def _non_empty(setting: Setting) -> str:
    value = setting.value.strip()
    if not value:
        raise ConfigError("is empty", key=setting.key, line=setting.line)
    return value
