"""Each flow's effective value of every declared setting and where it came from (``airmirror validate --explain``).

Sources, as the lookup rules give them: a flow key ``{source}->{target}.KEY`` beats top-level ``KEY``; a worker key's
top-level ``KEY`` beats ``{target}.KEY``; a cluster key is ``{alias}.KEY`` of the flow's source or target, and a
cluster's client settings may come from its Airflow connection, which is resolved only when a task runs (so it is
named, never read, here).  Values of secret keys and the credentials of the metadata DB URL are masked.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from airmirror.config.db_urls import masked_db_url
from airmirror.config.mirror_config import FlowConfig, MirrorConfig
from airmirror.config.properties import Setting
from airmirror.config.schema_registries import PREFIX as REGISTRY_PREFIX
from airmirror.config.schema_registries import SchemaIds
from airmirror.config.secrets import mask_value
from airmirror.config.settings_registry import METADATA_DB_URL, SCHEMA_IDS, SPARK_CONF, Scope, SettingKey, all_keys


@dataclass(frozen=True, kw_only=True)
class EffectiveSetting:
    """One key of one flow (or of one of its clusters): the value in effect, as text, and its source."""

    key: str
    value: str
    source: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)


def _source(setting: Setting | None, default: str | None) -> str:
    if setting is not None:
        return f"line {setting.line} ({setting.key})" if setting.line is not None else setting.key
    return "default" if default is not None else "unset"


def _shown(key: SettingKey[object], text: str | None) -> str:
    if text is None:
        return ""
    return masked_db_url(text) if key is METADATA_DB_URL else str(mask_value(key.name, text))


def _flow_key(flow: FlowConfig, key: SettingKey[object]) -> EffectiveSetting:
    setting = key.given(flow.setting(key.name))
    text = setting.value if setting is not None else key.default
    if key is METADATA_DB_URL and text is None:
        text = flow.metadata_db_url
        return EffectiveSetting(key=key.name, value=_shown(key, text), source="default (AIRMIRROR_HOME)")
    if key is SCHEMA_IDS and setting is None:
        why = "both clusters have" if flow.schema_ids is SchemaIds.TRANSLATE else "not both clusters have"
        return EffectiveSetting(key=key.name, value=flow.schema_ids.value, source=f"default ({why} a schema registry)")
    return EffectiveSetting(key=key.name, value=_shown(key, text), source=_source(setting, key.default))


def _worker_key(config: MirrorConfig, flow: FlowConfig, key: SettingKey[object]) -> EffectiveSetting:
    setting = config.worker_setting(flow.target, key.name)
    text = setting.value if setting is not None else key.default
    return EffectiveSetting(key=key.name, value=_shown(key, text), source=_source(setting, key.default))


def _cluster_keys(config: MirrorConfig, alias: str, key: SettingKey[object]) -> EffectiveSetting:
    name = f"{alias}.{key.name}"
    setting = config.cluster_setting(alias, key.name)
    registry_key = key.name.startswith(REGISTRY_PREFIX)
    connection = config.registry_connection_id(alias) if registry_key else config.connection_id(alias)
    if setting is not None:
        return EffectiveSetting(key=name, value=_shown(key, setting.value), source=_source(setting, None))
    if connection is not None and not key.name.endswith("airflow.conn.id"):
        return EffectiveSetting(key=name, value="", source=f"Airflow connection '{connection}' (read when a task runs)")
    return EffectiveSetting(key=name, value="", source="unset")


def explain_flow(config: MirrorConfig, flow: FlowConfig) -> list[EffectiveSetting]:
    """Every declared key as flow ``flow`` sees it, in the registry's order (file-level and cluster keys included)."""
    rows: list[EffectiveSetting] = []
    for key in all_keys():
        if key.scope is Scope.FLOW:
            rows.append(_flow_key(flow, key))
        elif key.scope is Scope.WORKER:
            rows.append(_worker_key(config, flow, key))
        elif key.scope is Scope.CLUSTER:
            rows.extend(_cluster_keys(config, alias, key) for alias in (flow.source, flow.target))
        else:
            setting = config.top_level_settings().get(key.name)
            text = setting.value if setting is not None else key.default
            rows.append(EffectiveSetting(key=key.name, value=_shown(key, text), source=_source(setting, key.default)))
    for name, value in sorted(flow.spark.conf.items()):
        key_name = SPARK_CONF.prefix + name
        source = _source(flow.setting(key_name), None)
        rows.append(EffectiveSetting(key=key_name, value=str(mask_value(name, value)), source=source))
    return rows
