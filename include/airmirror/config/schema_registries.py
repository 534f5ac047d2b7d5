"""Which schema registry each cluster has, and what a flow does with schema ids.

Contract:

1. A cluster has a registry when the file sets ``{alias}.schema.registry.url`` or
   ``{alias}.schema.registry.airflow.conn.id`` (:mod:`airmirror.config.connections`, rule 5: resolved only when a
   task or a CLI verb first talks to the registry, never while a file is loaded).  The file's
   ``{alias}.schema.registry.*`` keys win over the connection's.
2. Client settings carry the names confluent-kafka's ``SchemaRegistryClient`` uses, without the
   ``schema.registry.`` prefix (``url``, ``basic.auth.user.info``, ``basic.auth.credentials.source``,
   ``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``, ``ssl.key.password``); secrets are
   masked in every repr.
3. A flow's mode (``airmirror.schema.ids``): ``translate`` or ``keep`` need a registry on both clusters, refused at
   load naming the key and the cluster otherwise; unset, it is ``translate`` when both clusters have one and ``off``
   otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from airmirror.config.connections import registry_client_settings
from airmirror.config.properties import Setting
from airmirror.config.secrets import MaskedConfig, is_secret_key, url_passwords
from airmirror.config.settings_registry import SCHEMA_IDS, SCHEMA_REGISTRY_CONN_ID, SettingKey, all_keys
from airmirror.errors import ConfigError

PREFIX = "schema.registry."
"""The cluster keys of a registry: ``{alias}.schema.registry.X``."""
_URL_SEPARATOR = re.compile(r",\s*(?=[a-z][a-z0-9+.-]*://)", re.IGNORECASE)


class SchemaIds(str, Enum):
    """What a flow does with schema ids (``airmirror.schema.ids``)."""

    TRANSLATE = "translate"
    KEEP = "keep"
    OFF = "off"


def registry_keys() -> dict[str, SettingKey[object]]:
    """The declared registry keys by client setting name (``url`` -> ``schema.registry.url``), the connection's
    key left out."""
    return {
        key.name[len(PREFIX) :]: key
        for key in all_keys()
        if key.name.startswith(PREFIX) and key is not SCHEMA_REGISTRY_CONN_ID
    }


@dataclass
class RegistryAccess:
    """How to reach cluster ``alias``'s schema registry (rule 1): the file's settings, over those of the Airflow
    connection ``conn_id`` names, read once on first use of :attr:`settings`.  Plain data: it pickles to Spark
    executors (the connection is resolved before that, on the driver)."""

    alias: str
    file_settings: MaskedConfig = field(repr=False)
    conn_id: Setting | None = None
    _resolved: MaskedConfig | None = field(default=None, repr=False)

    @property
    def settings(self) -> MaskedConfig:
        """The client settings (rule 2); ConfigError naming the keys when no URL is given anywhere."""
        if self._resolved is None:
            from_connection: dict[str, str] = {}
            if self.conn_id is not None:
                from_connection = registry_client_settings(
                    self.conn_id.value.strip(), self.conn_id.key, self.conn_id.line
                )
            merged = MaskedConfig({**from_connection, **self.file_settings})
            if not merged.get("url", "").strip():
                raise ConfigError(
                    f"cluster {self.alias!r} names a schema registry but neither the file nor its Airflow connection "
                    "gives the registry's URL",
                    key=f"{self.alias}.{PREFIX}url",
                )
            self._resolved = merged
        return self._resolved

    @property
    def urls(self) -> tuple[str, ...]:
        """The registry's base URLs, in the order given: the value split at each comma that starts another URL
        (``,`` then ``scheme://``), so a comma in a URL's password stays in it."""
        return tuple(url.strip().rstrip("/") for url in _URL_SEPARATOR.split(self.settings["url"]) if url.strip())

    def secret_values(self) -> set[str]:
        """The secrets of these settings: secret keys' values and a URL's password (rule 2); of the file's settings
        only while the connection is not resolved yet (Airflow masks a connection's secrets itself)."""
        settings = self.file_settings if self._resolved is None and self.conn_id is not None else self.settings
        secrets = {value for key, value in settings.items() if value and is_secret_key(key)}
        user_info = settings.get("basic.auth.user.info", "")
        if ":" in user_info and user_info.partition(":")[2]:
            secrets.add(user_info.partition(":")[2])
        return secrets | url_passwords(settings.get("url", ""))

    def resolved(self) -> RegistryAccess:
        """This access with its connection resolved, for a process that cannot resolve connections (an executor)."""
        return RegistryAccess(self.alias, self.settings, None, self.settings)


def registry_access(alias: str, cluster_setting: Callable[[str], Setting | None]) -> RegistryAccess | None:
    """Cluster ``alias``'s registry from its ``{alias}.schema.registry.*`` settings (``cluster_setting(key)``
    returns the file's setting of ``{alias}.key``), validated; ``None`` when it has none (rule 1)."""
    file_settings: dict[str, str] = {}
    for name, key in registry_keys().items():
        setting = key.given(cluster_setting(key.name))
        if setting is not None:
            file_settings[name] = str(key.value(setting))
    conn_id = cluster_setting(SCHEMA_REGISTRY_CONN_ID.name)
    if conn_id is not None:
        SCHEMA_REGISTRY_CONN_ID.value(conn_id)
    if "url" not in file_settings and conn_id is None:
        if file_settings:
            raise ConfigError(
                f"cluster {alias!r} sets {', '.join(PREFIX + k for k in sorted(file_settings))} but no registry URL",
                key=f"{alias}.{PREFIX}url",
            )
        return None
    return RegistryAccess(alias, MaskedConfig(file_settings), conn_id)


def schema_ids_mode(
    setting: Setting | None, registries: Mapping[str, RegistryAccess | None], source: str, target: str
) -> SchemaIds:
    """A flow's mode (rule 3)."""
    asked = SCHEMA_IDS.optional(setting)
    if asked is None:
        both = registries[source] is not None and registries[target] is not None
        return SchemaIds.TRANSLATE if both else SchemaIds.OFF
    mode = SchemaIds(asked)
    if mode is not SchemaIds.OFF:
        for alias in (source, target):
            if registries[alias] is None:
                raise ConfigError(
                    f"{mode.value} needs a schema registry on cluster {alias!r}: set {alias}.{PREFIX}url "
                    f"(or {alias}.{SCHEMA_REGISTRY_CONN_ID.name})",
                    key=setting.key if setting is not None else SCHEMA_IDS.name,
                    line=None if setting is None else setting.line,
                )
    return mode
