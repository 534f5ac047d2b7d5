"""Which keys of an MM2 file does nothing read, and why: every key is honoured, refused, or named here.

Contract: :func:`audit_top_level` and :func:`audit_flow` look at every top-level key and every key of one flow
(``{source}->{target}.KEY``, the prefix removed) and return one warning per key that no part of airmirror reads,
each naming the key, its line and the reason, so ``airmirror validate`` lists it (MM2 logs such keys as unused).
A key MM2 would act on and airmirror cannot honour raises :class:`~airmirror.config.errors.ConfigError` instead
(exit 2, naming key and line).  A key is read, and so not named, when:

* the settings registry declares it (or it is a deprecated alias of a declared key), except the keys of
  :attr:`~airmirror.config.settings_registry.Group.ACCEPTED`, which MM2 defines and airmirror does not need: those
  are named with the registry's reason;
* it belongs to a family another module reads whole: ``transforms``/``predicates``
  (:mod:`airmirror.config.transforms`), ``replication.policy.*`` (the policy), top-level ``config.providers*``
  (:mod:`airmirror.config.providers`), client settings ``{consumer|producer|admin}.X`` and per flow
  ``{source|target}.{consumer|producer|admin}.X`` (:mod:`airmirror.config.client_properties`, which refuses unknown
  client keys), and per flow ``{source|target}.cluster.X`` for MM2's client keys (``bootstrap.servers``,
  ``security.protocol``, ``ssl.*``, ``sasl.*``: MM2's ``MirrorClientConfig.CLIENT_CONFIG_DEF``).

Kafka Connect converters are refused unless they are MM2's ``ByteArrayConverter``: any other would change the bytes
MM2 writes.  Cluster keys (``{alias}.X``) are checked where they are classified
(:class:`~airmirror.config.mirror_config.MirrorConfig`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping

from airmirror.config.client_properties import CLIENT_KINDS, is_client_key
from airmirror.config.properties import Setting
from airmirror.config.settings_registry import Group, Scope, alias_target, all_keys, declared, is_declared
from airmirror.config.transforms import is_transform_key
from airmirror.errors import ConfigError

AIRMIRROR_PREFIX = "airmirror."
SIDES = ("source", "target")
BYTE_ARRAY_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"
CONVERTER_KEYS = ("key.converter", "value.converter", "header.converter")
WORKER_KEYS_READ = frozenset({"group.id", "offset.storage.topic", "offset.storage.replication.factor"})
"""Worker keys of a flow's target cluster that airmirror reads (:meth:`FlowConfig.mm2_worker`, the batch log's
replication factor)."""
WORKER_KEYS = frozenset(
    {
        "group.id",
        "plugin.path",
        "listeners",
        "connect.protocol",
        "scheduled.rebalance.max.delay.ms",
        "exactly.once.source.support",
        "offset.flush.interval.ms",
        "offset.flush.timeout.ms",
        "task.shutdown.graceful.timeout.ms",
    }
)
WORKER_PREFIXES = (
    "offset.storage.",
    "config.storage.",
    "status.storage.",
    "key.converter",
    "value.converter",
    "header.converter",
    "worker.",
    "rest.",
    "config.providers.",
)
_CONNECT_FAMILIES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("topic.creation.",), "Kafka Connect's topic creation: remote topics are created by the flow"),
    (
        ("task.assigned.", "task.index", "metrics.", "offset-syncs-"),
        "MM2 sets it for its own tasks, metrics or internal clients",
    ),
)
"""Key families of Kafka Connect and MM2's own machinery (``task.assigned.partitions``, metrics tuning, its internal
clients' roles), and why airmirror does not need them."""


def is_worker_key(key: str) -> bool:
    """True for a Kafka Connect worker setting of MM2's dedicated mode."""
    return key in WORKER_KEYS or key.startswith(WORKER_PREFIXES)


def is_inherited_client_key(key: str) -> bool:
    """MM2's client keys (its ``CLIENT_CONFIG_DEF``): passed from top level to every client, and per flow through
    ``{source|target}.cluster.``."""
    return key in ("bootstrap.servers", "security.protocol") or key.startswith(("ssl.", "sasl."))


def is_client_kind_key(key: str) -> bool:
    """True for ``{consumer|producer|admin}.X``."""
    return key.startswith(tuple(f"{kind}." for kind in CLIENT_KINDS))


def audit_top_level(settings: Mapping[str, Setting]) -> list[str]:
    """The warnings for the top-level keys that nothing reads (see the module docstring)."""
    return [warning for key, setting in settings.items() for warning in _top_level(key, setting)]


def audit_flow(settings: Mapping[str, Setting]) -> list[str]:
    """The warnings for the keys of one flow (prefix removed) that nothing reads (see the module docstring)."""
    return [warning for key, setting in settings.items() for warning in _flow(key, setting)]


def _top_level(key: str, setting: Setting) -> Iterator[str]:
    if key.startswith("config.providers") or key.startswith("replication.policy."):
        return
    if is_client_key(key) and not (is_inherited_client_key(key) or is_worker_key(key)):
        yield (
            f"{setting.describe()}: ignored, top-level client settings other than security ones "
            f"need a prefix (e.g. 'producer.{key}' or '{{cluster}}.{key}')"
        )
        return
    if is_inherited_client_key(key) or is_client_kind_key(key):
        return
    if key.startswith(tuple(f"{side}." for side in SIDES)) and not is_declared(key):
        yield f"{setting.describe()}: ignored, MM2 reads '{key.split('.', 1)[0]}.' keys per flow only"
        return
    yield from _connector_key(key, setting, flow_level=False)


def _flow(key: str, setting: Setting) -> Iterator[str]:
    if key.startswith("replication.policy."):
        return
    if key.startswith("config.providers"):
        yield f"{setting.describe()}: ignored, config providers are read at top level"
        return
    if is_client_key(key):
        yield (
            f"{setting.describe()}: ignored, flow-level client settings need a "
            "'consumer.', 'producer.' or 'admin.' prefix"
        )
        return
    if is_client_kind_key(key):
        return
    side, _, rest = key.partition(".")
    if side in SIDES and not is_declared(key):
        if is_client_kind_key(rest):
            return
        if rest.startswith("cluster."):
            if not is_inherited_client_key(rest[len("cluster.") :]):
                yield (
                    f"{setting.describe()}: ignored, MM2 passes only bootstrap.servers, security.protocol, ssl.* "
                    f"and sasl.* from '{side}.cluster.' to its clients"
                )
            return
    yield from _connector_key(key, setting, flow_level=True)


def _connector_key(key: str, setting: Setting, *, flow_level: bool) -> Iterator[str]:
    """A key at a connector level (top level or one flow's) that is no client setting."""
    if is_transform_key(key):
        return
    if key in CONVERTER_KEYS and setting.value.strip() != BYTE_ARRAY_CONVERTER:
        raise ConfigError(
            f"{setting.value.strip()!r} is not supported: airmirror copies keys, values and headers as bytes, as "
            f"MM2's {BYTE_ARRAY_CONVERTER} does",
            key=setting.key,
            line=setting.line,
        )
    if is_worker_key(key):
        if key not in WORKER_KEYS_READ or flow_level:
            yield f"{setting.describe()}: not used, a Kafka Connect worker setting (airmirror runs no Connect worker)"
        return
    family = next((why for prefixes, why in _CONNECT_FAMILIES if key.startswith(prefixes)), None)
    if family is not None:
        yield f"{setting.describe()}: not used, {family}"
        return
    declaration = declared(key) or alias_target(key)
    if declaration is not None:
        if declaration.group is Group.ACCEPTED:
            yield f"{setting.describe()}: not used, {declaration.doc}"
        elif declaration.scope is Scope.CLUSTER:
            yield f"{setting.describe()}: ignored, a cluster setting: write it as '{{alias}}.{key}'"
        elif declaration.scope is Scope.FILE and flow_level:
            yield f"{setting.describe()}: ignored, read at top level only"
        return
    if is_declared(key):  # a declared family, e.g. airmirror.spark.conf.X
        return
    names = [k.name for k in all_keys() if k.name.startswith(AIRMIRROR_PREFIX) == key.startswith(AIRMIRROR_PREFIX)]
    close = difflib.get_close_matches(key, names, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    if key.startswith(AIRMIRROR_PREFIX):
        yield f"{setting.describe()}: ignored, airmirror has no such setting{hint}"
    else:
        yield f"{setting.describe()}: ignored, neither MM2 nor airmirror defines this key{hint}"
