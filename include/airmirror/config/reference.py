"""The configuration reference page, ``docs/configuration.md``, generated from the settings registry.

``python -m airmirror.config.reference > docs/configuration.md`` writes it; a unit test fails when the committed page
differs from :func:`render`, so the page, the defaults and the validation cannot drift apart.  Client settings
(``{alias}.consumer.X`` ...) are not registry keys: their rules (:mod:`airmirror.config.client_properties`) are
summed up in the page's last section.
"""

from __future__ import annotations

from airmirror.config.settings_registry import Group, Origin, Scope, SettingKey, SettingPrefix, all_keys, all_prefixes
from airmirror.config.transforms import CLASS_DOCS, PredicateKind, StepKind

HEADER = """# Configuration reference

<!-- Generated from include/airmirror/config/settings_registry.py by
     `python -m airmirror.config.reference > docs/configuration.md`: edit the registry, not this page. -->

Every key airmirror reads from an MM2 properties file, with its default and meaning. An MM2 file works unchanged:
MirrorMaker 2's keys mean what they mean to MM2, and the notes below say where airmirror differs. airmirror's own keys
start with `airmirror.`. *Where* says how a key may be set: top-level `KEY`, per flow `{source}->{target}.KEY` (the
flow's wins), per cluster `{alias}.KEY`, or, for MM2's worker keys, top-level or `{target}.KEY` (top-level wins).
Values may use `${env:NAME}` and `${file:/path/file.properties:key}`. Every value is checked when the file is loaded:
a bad one stops `airmirror validate` and every run with exit code 2, naming the key and its line. An `airmirror.*` key
that is not listed here draws a warning. `airmirror validate CONFIG --explain` prints each flow's effective value of
every key and where it came from. How the file is read is explained in the
[configuration guide](configuration-guide.md).
"""

CLIENT_SETTINGS = """## Client settings

Client settings of cluster `c` come, from lowest to highest precedence, from top-level `bootstrap.servers`,
`security.protocol`, `ssl.*` and `sasl.*`; top-level `consumer.X`, `producer.X` and `admin.X`; `{c}.X`, where per
flow `{source}->{target}.source.cluster.X` (of the source) and `{source}->{target}.target.cluster.X` (of the target)
override `bootstrap.servers`, `security.protocol`, `ssl.*` and `sasl.*`, as in MM2; `{c}.{consumer|producer|admin}.X`;
and per flow `{source}->{target}.{consumer|producer|admin}.X` and
`{source}->{target}.{source|target}.{consumer|producer|admin}.X`, as in MM2's connector configs.
"""
CLIENT_RULES = (
    (
        "`{c}.X`, `{c}.consumer.X`, `{c}.producer.X`, `{c}.admin.X`",
        "Java client keys are translated for librdkafka; keys that mean nothing to a byte copier (serializers, "
        "`buffer.memory`, ...) are dropped with a warning; anything else unknown is an error",
    ),
    (
        "`security.protocol`, `sasl.mechanism`, `sasl.jaas.config` (PLAIN, SCRAM), `ssl.*` with PEM or PKCS12 key "
        "and trust stores",
        "true JKS files and other login modules are rejected with an error naming the key (convert to PKCS12 or PEM)",
    ),
    (
        "source consumer `auto.offset.reset`",
        "`earliest` (default) or `latest` decides where a partition never seen starts; consumers never auto-commit "
        "(`enable.auto.commit` is forced to false, as in MM2) and never create a topic (`allow.auto.create.topics` "
        "is forced to false); `validate` names a file that sets either otherwise",
    ),
    (
        "librdkafka buffer keys (`fetch.max.bytes`, `queue.buffering.max.kbytes`, ...)",
        "lowered to their share of `airmirror.task.max.buffer.bytes`, with a warning; a non-integer value is refused",
    ),
)
"""The rules of client settings (:mod:`airmirror.config.client_properties`), one row per family of keys."""


TRANSFORMS = """## Transforms and predicates (SMTs)

A flow's Kafka Connect transforms are written as for MM2: `{source}->{target}.transforms = t1, t2`,
`{source}->{target}.transforms.t1.type = CLASS` with the class's keys `{source}->{target}.transforms.t1.KEY`, and
optionally `.predicate = p` and `.negate = true`; `{source}->{target}.predicates = p` with
`{source}->{target}.predicates.p.type = CLASS` and its keys. Top-level `transforms` and `predicates` lists are
inherited, but, as in MM2, top-level `transforms.X.*` and `predicates.X.*` keys are not (MM2 drops them), so such a
chain is refused. The steps run in order on each copied record, on raw bytes as MM2's do; transforms never touch
heartbeats, checkpoints or offset syncs. A field transform edits a key or value that is a JSON object; a record whose
key or value it cannot process fails its chunk, naming topic, partition, offset and transform, unless
`errors.tolerance = all`, which skips the record and counts it. A class not listed here is refused (exit 2, naming key
and line); so are a missing `.type` or required key, `negate` without `predicate` and a predicate not listed in
`predicates`. Keys a class does not define are named by `airmirror validate`.
"""


def _class_names(kind: StepKind | PredicateKind) -> str:
    if isinstance(kind, StepKind) and kind.edits_fields:
        return f"`{kind.value}$Key`, `{kind.value}$Value`"
    return f"`{kind.value}`"


def _kind(kind: StepKind | PredicateKind) -> str:
    return "predicate" if isinstance(kind, PredicateKind) else "transform"


def _transforms() -> str:
    rows = [f"| {_class_names(kind)} | {_kind(kind)} | {doc} |" for kind, doc in CLASS_DOCS.items()]
    table = "\n".join(["| class | kind | what it does |", "|---|---|---|", *rows])
    return f"{TRANSFORMS}\n{table}\n"


def _where(scope: Scope) -> str:
    return {
        Scope.FLOW: "top-level, flow",
        Scope.CLUSTER: "cluster",
        Scope.WORKER: "top-level, `{target}.`",
        Scope.FILE: "top-level",
    }[scope]


def _name(key: SettingKey[object] | SettingPrefix) -> str:
    name = f"{key.prefix}X" if isinstance(key, SettingPrefix) else key.name
    return f"`{{alias}}.{name}`" if key.scope is Scope.CLUSTER else f"`{name}`"


def _origin(origin: Origin) -> str:
    return "MM2" if origin is Origin.MM2 else "airmirror"


def _row(key: SettingKey[object] | SettingPrefix) -> str:
    if isinstance(key, SettingPrefix):
        return f"| {_name(key)} | {_origin(key.origin)} | {_where(key.scope)} | | any | {key.doc} |"
    default = key.described_default()
    if key.blank_is_unset and key.default is not None:
        default += " (also when blank)"
    return f"| {_name(key)} | {_origin(key.origin)} | {_where(key.scope)} | {default} | {key.type.name} | {key.doc} |"


def render() -> str:
    """The whole page, from the registry: one table per :class:`~airmirror.config.settings_registry.Group`, in the
    groups' order, keys in declaration order."""
    keys = list(all_keys())
    prefixes = list(all_prefixes())
    sections = [HEADER]
    for group in Group:
        rows = [_row(k) for k in keys if k.group is group] + [_row(p) for p in prefixes if p.group is group]
        if not rows:
            continue
        table = ["| key | from | where | default | value | meaning |", "|---|---|---|---|---|---|", *rows]
        sections.append(f"## {group.value}\n\n" + "\n".join(table) + "\n")
    sections.append(_transforms())
    client_rows = [f"| {keys} | {notes} |" for keys, notes in CLIENT_RULES]
    sections.append(CLIENT_SETTINGS + "\n" + "\n".join(["| keys | notes |", "|---|---|", *client_rows]) + "\n")
    return "\n".join(sections)


def main() -> None:
    print(render(), end="")


if __name__ == "__main__":
    main()
