"""Cluster credentials from Airflow connections: ``{alias}.airflow.conn.id = NAME``.

Contract:
1. The connection must be of type ``kafka``; its extra holds librdkafka client settings (``bootstrap.servers``,
   ``security.protocol``, ``sasl.username``, ...), as the Kafka provider's connection does.  Those settings are
   the lowest layer of every client of that cluster: any client key of the properties file for the cluster
   overrides them.
2. It is resolved only when a client of the cluster is first needed (a task running, a CLI verb talking to
   Kafka), never while a config is loaded or a DAG is parsed, so secrets backends work unchanged.
3. Who resolves: by default the ``AIRFLOW_CONN_{NAME}`` environment variable (Airflow's JSON form, or its URI
   form whose query holds the extra); inside an Airflow task the DAG factory installs Airflow's own lookup
   (:func:`use_resolver`), which also asks the configured secrets backends.
4. A missing connection, another type or an extra that is not a flat object raises :class:`ConfigError`
   naming the connection and the key that asked for it; no message ever contains a connection's values.
5. ``{alias}.schema.registry.airflow.conn.id = NAME`` names a connection of type ``http``: its host (with
   ``schema`` http or https, default http; a host may carry a path, e.g. ``registry.example.com/apis/ccompat/v7``)
   and port make the registry's URL, login and password its basic-auth credentials, and its extra may hold the
   registry's TLS keys (``ssl.ca.location`` ...).  Resolved late, as rule 2.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from airmirror.errors import ConfigError

CONN_ID_KEY = "airflow.conn.id"
KAFKA_CONN_TYPE = "kafka"
HTTP_CONN_TYPE = "http"


@dataclass(frozen=True)
class FoundConnection:
    """What a resolver found: the connection's type and its extra, and for an ``http`` connection (a schema
    registry's, rule 5) its host, port, schema, login and password (values never shown in reprs)."""

    conn_type: str
    extra: Mapping[str, Any] = field(repr=False)
    host: str | None = field(default=None, repr=False)
    port: int | None = None
    schema: str | None = None
    login: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)


Resolver = Callable[[str], FoundConnection | None]


def from_environment(name: str) -> FoundConnection | None:
    """``AIRFLOW_CONN_{NAME}`` (JSON or URI form), or ``None`` when the variable is unset."""
    text = os.environ.get(environment_variable(name))
    if text is None:
        return None
    if text.lstrip().startswith("{"):
        try:
            fields = json.loads(text)
        except json.JSONDecodeError as error:
            raise ConfigError(f"{environment_variable(name)} is not valid JSON (at character {error.pos})") from None
        extra = fields.get("extra") or {}
        if isinstance(extra, str):
            extra = _json_object(extra, name)
        port = fields.get("port")
        return FoundConnection(
            str(fields.get("conn_type", "")),
            extra,
            host=fields.get("host"),
            port=None if port in (None, "") else int(port),
            schema=fields.get("schema"),
            login=fields.get("login"),
            password=fields.get("password"),
        )
    uri = urlsplit(text)
    query = dict(parse_qsl(uri.query, keep_blank_values=True))
    extra = _json_object(query.pop("__extra__"), name) if "__extra__" in query else query
    return FoundConnection(
        uri.scheme.replace("-", "_"),
        extra,
        host=unquote(uri.hostname) if uri.hostname else None,
        port=uri.port,
        schema=unquote(uri.path.lstrip("/")) or None,
        login=unquote(uri.username) if uri.username else None,
        password=unquote(uri.password) if uri.password else None,
    )


def environment_variable(name: str) -> str:
    return f"AIRFLOW_CONN_{name.upper()}"


_resolver: Resolver = from_environment


def use_resolver(resolver: Resolver) -> None:
    """Resolve connections with ``resolver`` from now on in this process (rule 3)."""
    global _resolver
    _resolver = resolver


def kafka_client_settings(name: str, asked_by: str, line: int | None = None) -> dict[str, str]:
    """The client settings in connection ``name``'s extra (rules 1 and 4); ``asked_by`` is the config key."""
    return _flat_extra(_found(name, KAFKA_CONN_TYPE, asked_by, line), name, asked_by, line)


def registry_client_settings(name: str, asked_by: str, line: int | None = None) -> dict[str, str]:
    """A schema registry's client settings from ``http`` connection ``name`` (rules 4 and 5): ``url`` and
    ``basic.auth.user.info`` when the connection has a host and a login, then the TLS keys of its extra."""
    found = _found(name, HTTP_CONN_TYPE, asked_by, line)
    settings = _flat_extra(found, name, asked_by, line)
    if found.host:
        base = urlsplit(found.host if "://" in found.host else f"{found.schema or 'http'}://{found.host}")
        netloc = base.netloc + (f":{found.port}" if found.port and base.port is None else "")
        settings["url"] = urlunsplit(base._replace(netloc=netloc)).rstrip("/")
    if found.login:
        settings["basic.auth.user.info"] = f"{found.login}:{found.password or ''}"
    return settings


def _found(name: str, conn_type: str, asked_by: str, line: int | None) -> FoundConnection:
    try:
        found = _resolver(name)
    except ConfigError as error:
        if error.key is not None:
            raise
        raise ConfigError(str(error), key=asked_by, line=line) from None
    if found is None:
        raise ConfigError(
            f"Airflow connection '{name}' not found (define it in Airflow, or set {environment_variable(name)})",
            key=asked_by,
            line=line,
        )
    if found.conn_type != conn_type:
        raise ConfigError(
            f"Airflow connection '{name}' is of type '{found.conn_type}', expected '{conn_type}'",
            key=asked_by,
            line=line,
        )
    return found


def _flat_extra(found: FoundConnection, name: str, asked_by: str, line: int | None) -> dict[str, str]:
    if not isinstance(found.extra, Mapping) or any(isinstance(value, (dict, list)) for value in found.extra.values()):
        raise ConfigError(
            f"Airflow connection '{name}': its extra must be a flat object of client settings", key=asked_by, line=line
        )
    return {str(key): _setting_text(value) for key, value in found.extra.items() if value is not None}


def _setting_text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _json_object(text: str, name: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"Airflow connection '{name}': its extra is not valid JSON (at character {error.pos})"
        ) from None
