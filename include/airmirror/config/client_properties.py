"""Translation of Java Kafka client settings to librdkafka (confluent-kafka) settings.

Contract of :func:`translate`: every Java key is either translated, or dropped with a warning naming it
(Java-only settings meaningless for a byte copier, or settings of another client kind), or rejected with
a :class:`ConfigError` naming it (unknown keys and settings librdkafka cannot honour, e.g. JKS files,
OAUTHBEARER/GSSAPI JAAS logins).  No key is ever dropped silently.  Trust and key stores follow the rules
of Java's ``DefaultSslEngineFactory`` (which combinations of type/location/password/inline PEM are valid).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from airmirror.config.properties import Setting
from airmirror.config.secrets import MaskedConfig
from airmirror.config.trust_stores import pkcs12_trusted_pem
from airmirror.errors import ConfigError

CLIENT_KINDS: tuple[str, ...] = ("consumer", "producer", "admin")

_ALL = frozenset(CLIENT_KINDS)
_CONSUMER = frozenset({"consumer"})
_PRODUCER = frozenset({"producer"})
_PRODUCER_ADMIN = frozenset({"producer", "admin"})


class ClientSettings(NamedTuple):
    """librdkafka settings of one client (secrets masked in its repr) plus the warnings about dropped Java keys."""

    config: MaskedConfig
    warnings: list[str]


def _error(message: str, setting: Setting) -> ConfigError:
    return ConfigError(message, key=setting.key, line=setting.line)


def _verbatim(setting: Setting) -> str:
    return setting.value


def _server_list(setting: Setting) -> str:
    return ",".join(server for server in re.split(r"\s*,\s*", setting.value.strip()) if server)


def _buffer_size(setting: Setting) -> str:
    """Java uses -1 for the OS default socket buffer size, librdkafka uses 0."""
    return "0" if setting.value.strip() == "-1" else setting.value


def is_whole_number(text: str) -> bool:
    """True when ``text``, blanks around it aside, is a non-negative integer in ASCII digits."""
    value = text.strip()
    return value.isascii() and value.isdigit()


def _one_of(*allowed: str) -> Callable[[Setting], str]:
    def convert(setting: Setting) -> str:
        value = setting.value.strip().lower()
        if value not in allowed:
            raise _error(f"value {setting.value!r} must be one of {', '.join(allowed)}", setting)
        return value

    return convert


def _endpoint_identification(setting: Setting) -> str:
    value = setting.value.strip().lower()
    if value not in ("", "https"):
        raise _error(f"value {setting.value!r} must be 'https' or empty", setting)
    return value or "none"


@dataclass(frozen=True)
class _Rule:
    """How one Java key maps to librdkafka: for which client kinds, under which name, with which value."""

    kinds: frozenset[str]
    target: str | Mapping[str, str]
    convert: Callable[[Setting], str] = _verbatim

    def target_for(self, kind: str) -> str:
        return self.target if isinstance(self.target, str) else self.target[kind]


def _same_name(kinds: frozenset[str], *keys: str) -> dict[str, _Rule]:
    return {key: _Rule(kinds, key) for key in keys}


_RULES: dict[str, _Rule] = {
    **_same_name(
        _ALL,
        "client.id",
        "metadata.max.age.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "retry.backoff.ms",
        "retry.backoff.max.ms",
        "socket.connection.setup.timeout.ms",
        "connections.max.idle.ms",
        "client.dns.lookup",
        "enable.metrics.push",
        "sasl.kerberos.service.name",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.min.time.before.relogin",
    ),
    **_same_name(
        _CONSUMER,
        "group.id",
        "group.instance.id",
        "group.protocol",
        "group.remote.assignor",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "enable.auto.commit",
        "auto.commit.interval.ms",
        "fetch.min.bytes",
        "fetch.max.bytes",
        "max.partition.fetch.bytes",
        "check.crcs",
        "allow.auto.create.topics",
        "client.rack",
    ),
    **_same_name(
        _PRODUCER,
        "acks",
        "linger.ms",
        "batch.size",
        "enable.idempotence",
        "transactional.id",
        "transaction.timeout.ms",
        "delivery.timeout.ms",
        "max.in.flight.requests.per.connection",
    ),
    "retries": _Rule(_PRODUCER_ADMIN, "retries"),
    "bootstrap.servers": _Rule(_ALL, "bootstrap.servers", _server_list),
    "security.protocol": _Rule(_ALL, "security.protocol", _one_of("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")),
    "sasl.mechanism": _Rule(_ALL, "sasl.mechanisms"),
    "ssl.endpoint.identification.algorithm": _Rule(
        _ALL, "ssl.endpoint.identification.algorithm", _endpoint_identification
    ),
    "send.buffer.bytes": _Rule(_ALL, "socket.send.buffer.bytes", _buffer_size),
    "receive.buffer.bytes": _Rule(_ALL, "socket.receive.buffer.bytes", _buffer_size),
    "request.timeout.ms": _Rule(
        _ALL, {"producer": "request.timeout.ms", "consumer": "socket.timeout.ms", "admin": "socket.timeout.ms"}
    ),
    "auto.offset.reset": _Rule(_CONSUMER, "auto.offset.reset", _one_of("earliest", "latest")),
    "isolation.level": _Rule(_CONSUMER, "isolation.level", _one_of("read_committed", "read_uncommitted")),
    "fetch.max.wait.ms": _Rule(_CONSUMER, "fetch.wait.max.ms"),
    "max.request.size": _Rule(_PRODUCER, "message.max.bytes"),
    "compression.type": _Rule(_PRODUCER, "compression.type", _one_of("none", "gzip", "snappy", "lz4", "zstd")),
}

_JAVA_ONLY: dict[str, str] = {
    **dict.fromkeys(
        ("key.serializer", "value.serializer", "key.deserializer", "value.deserializer"),
        "airmirror copies keys and values as bytes",
    ),
    **dict.fromkeys(
        ("interceptor.classes", "partitioner.class", "metric.reporters", "security.providers"),
        "Java classes cannot be loaded",
    ),
    **dict.fromkeys(
        (
            "partitioner.ignore.keys",
            "partitioner.adaptive.partitioning.enable",
            "partitioner.availability.timeout.ms",
            "partition.assignment.strategy",
            "exclude.internal.topics",
            "internal.leave.group.on.close",
        ),
        "airmirror assigns partitions explicitly",
    ),
    **dict.fromkeys(
        (
            "buffer.memory",
            "max.block.ms",
            "max.poll.records",
            "default.api.timeout.ms",
            "metadata.max.idle.ms",
            "socket.connection.setup.timeout.max.ms",
            "metrics.num.samples",
            "metrics.sample.window.ms",
            "metrics.recording.level",
            "auto.include.jmx.reporter",
        ),
        "Java client tuning without a librdkafka equivalent",
    ),
    **dict.fromkeys(
        (
            "ssl.protocol",
            "ssl.enabled.protocols",
            "ssl.keymanager.algorithm",
            "ssl.trustmanager.algorithm",
            "ssl.secure.random.implementation",
            "ssl.provider",
            "sasl.kerberos.ticket.renew.window.factor",
            "sasl.kerberos.ticket.renew.jitter",
            "sasl.login.refresh.window.factor",
            "sasl.login.refresh.window.jitter",
            "sasl.login.refresh.min.period.seconds",
            "sasl.login.refresh.buffer.seconds",
            "sasl.login.connect.timeout.ms",
            "sasl.login.read.timeout.ms",
            "sasl.login.retry.backoff.ms",
            "sasl.login.retry.backoff.max.ms",
        ),
        "JVM security tuning; OpenSSL/librdkafka negotiate these themselves",
    ),
}

_UNSUPPORTED: dict[str, str] = {
    "ssl.cipher.suites": "Java cipher suite names cannot be translated to OpenSSL names; remove it",
    "ssl.engine.factory.class": "Java SSL engine factories cannot be used by librdkafka",
    "sasl.login.class": "Java login classes cannot be used by librdkafka",
    "sasl.login.callback.handler.class": "Java callback handlers cannot be used by librdkafka",
    "sasl.client.callback.handler.class": "Java callback handlers cannot be used by librdkafka",
}

_TRUST_STORE_KEYS = (
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
)
_PKCS12_READABLE = frozenset({"PKCS12", "JKS"})
"""Trust store types read as PKCS12 (Java reads PKCS12 files under its default type name JKS too)."""
_KEY_STORE_KEYS = (
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.key.password",
)
_COMPRESSION_LEVEL_KEYS = {
    "compression.gzip.level": "gzip",
    "compression.lz4.level": "lz4",
    "compression.zstd.level": "zstd",
}
_JAAS_KEY = "sasl.jaas.config"
_COMBINED_KEYS = frozenset((*_TRUST_STORE_KEYS, *_KEY_STORE_KEYS, *_COMPRESSION_LEVEL_KEYS, _JAAS_KEY))


def is_client_key(key: str) -> bool:
    """True when ``key`` is a Java client setting this module knows (translated, dropped or rejected)."""
    return key in _RULES or key in _JAVA_ONLY or key in _UNSUPPORTED or key in _COMBINED_KEYS


def applies_to(key: str, kind: str) -> bool:
    """False only for a known setting of other client kinds (e.g. ``linger.ms`` for a consumer).

    Settings given for every kind of client (``{cluster}.X``) are passed to :func:`translate` only for the
    kinds they apply to; unknown keys apply everywhere so that :func:`translate` rejects them.
    """
    if key in _RULES:
        return kind in _RULES[key].kinds
    if key in _COMPRESSION_LEVEL_KEYS:
        return kind == "producer"
    return True


def translate(settings: Mapping[str, Setting], kind: str, whole_numbers: Collection[str] = ()) -> ClientSettings:
    """Translate the effective Java settings of one client (Java key -> setting) for client ``kind``; a setting
    that becomes one of the librdkafka keys ``whole_numbers`` must be a non-negative integer (else ConfigError)."""
    if kind not in CLIENT_KINDS:
        raise ValueError(f"unknown client kind {kind!r}")
    config = MaskedConfig()
    warnings: list[str] = []
    for key, setting in settings.items():
        if key in _COMBINED_KEYS:
            continue
        if key in _UNSUPPORTED:
            raise _error(_UNSUPPORTED[key], setting)
        if key in _JAVA_ONLY:
            warnings.append(f"{setting.describe()}: dropped, {_JAVA_ONLY[key]}")
            continue
        rule = _RULES.get(key)
        if rule is None:
            raise _error(f"unknown or untranslatable Kafka client setting {key!r}", setting)
        if kind not in rule.kinds:
            warnings.append(f"{setting.describe()}: dropped, {key!r} is not a {kind} setting")
            continue
        target = rule.target_for(kind)
        if target in whole_numbers and not is_whole_number(setting.value):
            raise _error(f"value {setting.value!r} is not a non-negative integer", setting)
        config[target] = rule.convert(setting)
    config.update(_trust_store(settings))
    config.update(_key_store(settings))
    config.update(_jaas(settings))
    config.update(_compression_level(settings, kind, warnings))
    return ClientSettings(config, warnings)


def _store_type(settings: Mapping[str, Setting], key: str) -> str:
    """Effective store type: Java's default is JKS."""
    setting = settings.get(key)
    return setting.value.strip().upper() if setting is not None else "JKS"


def _convert_to_pem(kind_of_store: str, store_type: str, culprit: Setting) -> ConfigError:
    return _error(
        f"{store_type} {kind_of_store}s are not supported by librdkafka; convert the {kind_of_store} to PEM "
        f"(keytool -importkeystore / openssl pkcs12) and set ssl.{kind_of_store}.type=PEM",
        culprit,
    )


def _trust_store(settings: Mapping[str, Setting]) -> dict[str, str]:
    type_setting, location, password, certificates = (settings.get(key) for key in _TRUST_STORE_KEYS)
    store_type = _store_type(settings, "ssl.truststore.type")
    store = location or certificates
    if store is None:
        if password is not None:
            raise _error("a trust store password is set but no trust store", password)
        return {}
    if store_type in _PKCS12_READABLE and location is not None and certificates is None:
        return {"ssl.ca.pem": pkcs12_trusted_pem(location, password)}
    if store_type != "PEM":
        raise _convert_to_pem("truststore", store_type, type_setting or store)
    if password is not None:
        raise _error("a PEM trust store takes no password", password)
    if location is not None and certificates is not None:
        raise _error("both ssl.truststore.location and ssl.truststore.certificates are set", certificates)
    if location is not None:
        return {"ssl.ca.location": location.value}
    return {"ssl.ca.pem": store.value}


def _key_store(settings: Mapping[str, Setting]) -> dict[str, str]:
    type_setting, location, password, chain, key, key_password = (settings.get(k) for k in _KEY_STORE_KEYS)
    store_type = _store_type(settings, "ssl.keystore.type")
    config = {"ssl.key.password": key_password.value} if key_password is not None else {}
    inline = key or chain
    if inline is not None:
        if store_type != "PEM":
            raise _error(f"an inline PEM key requires ssl.keystore.type=PEM, not {store_type}", inline)
        if key is None or chain is None:
            raise _error("ssl.keystore.key and ssl.keystore.certificate.chain must be set together", inline)
        if location is not None:
            raise _error("both ssl.keystore.location and ssl.keystore.key are set", location)
        if password is not None:
            raise _error("a PEM key store takes no password (use ssl.key.password)", password)
        return config | {"ssl.certificate.pem": chain.value, "ssl.key.pem": key.value}
    if location is None:
        if password is not None:
            raise _error("a key store password is set but no key store", password)
        return config
    if store_type == "PEM":
        if password is not None:
            raise _error("a PEM key store takes no password (use ssl.key.password)", password)
        return config | {"ssl.certificate.location": location.value, "ssl.key.location": location.value}
    if store_type != "PKCS12":
        raise _convert_to_pem("keystore", store_type, type_setting or location)
    if password is None:
        raise _error("a PKCS12 key store requires ssl.keystore.password", location)
    return config | {"ssl.keystore.location": location.value, "ssl.keystore.password": password.value}


_JAAS_TOKEN = re.compile(r'\s*(?:"(?P<string>(?:[^"\\]|\\.)*)"|(?P<word>[^\s=;"]+)|(?P<symbol>[=;]))', re.DOTALL)
_LOGIN_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule",
    "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_JAAS_FLAGS = {"required", "requisite", "sufficient", "optional"}


def _jaas(settings: Mapping[str, Setting]) -> dict[str, str]:
    """Translate a PLAIN or SCRAM ``sasl.jaas.config`` into ``sasl.username``/``sasl.password``.

    Grammar: ``<LoginModule> <flag> (name=value)* ;`` with values bare words or double-quoted strings in
    which a backslash escapes the next character.  Exactly one entry is accepted.
    """
    setting = settings.get(_JAAS_KEY)
    if setting is None:
        return {}
    tokens = _jaas_tokens(setting)
    shape = "".join(kind for kind, _ in tokens)
    if not re.fullmatch(r"ww(w=[ws])*;", shape) or tokens[1][1] not in _JAAS_FLAGS:
        raise _error("expected one entry '<LoginModule> required name=\"value\" ... ;'", setting)
    if tokens[0][1] not in _LOGIN_MODULES:
        raise _error(
            f"login module {tokens[0][1]!r} is not supported; only PlainLoginModule and ScramLoginModule "
            "(username/password) can be translated to librdkafka",
            setting,
        )
    options = {tokens[index][1]: tokens[index + 2][1] for index in range(2, len(tokens) - 1, 3)}
    if "username" not in options or "password" not in options:
        raise _error("the JAAS entry must set both username and password", setting)
    return {"sasl.username": options["username"], "sasl.password": options["password"]}


def _jaas_tokens(setting: Setting) -> list[tuple[str, str]]:
    """Split a JAAS entry into ``(kind, text)`` tokens; kind is ``w`` (word), ``s`` (string), ``=`` or ``;``."""
    text = setting.value.rstrip()
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        match = _JAAS_TOKEN.match(text, position)
        if match is None:
            raise _error(f"cannot parse the JAAS configuration at character {position}", setting)
        if match["string"] is not None:
            tokens.append(("s", re.sub(r"\\(.)", r"\1", match["string"], flags=re.DOTALL)))
        elif match["word"] is not None:
            tokens.append(("w", match["word"]))
        else:
            tokens.append((match["symbol"], match["symbol"]))
        position = match.end()
    return tokens


def _compression_level(settings: Mapping[str, Setting], kind: str, warnings: list[str]) -> dict[str, str]:
    """``compression.<codec>.level`` becomes ``compression.level`` when ``<codec>`` is the one in use."""
    codec_setting = settings.get("compression.type")
    codec = codec_setting.value.strip().lower() if codec_setting is not None else "none"
    config: dict[str, str] = {}
    for key, level_codec in _COMPRESSION_LEVEL_KEYS.items():
        setting = settings.get(key)
        if setting is None:
            continue
        if kind != "producer":
            warnings.append(f"{setting.describe()}: dropped, {key!r} is not a {kind} setting")
        elif level_codec != codec:
            warnings.append(f"{setting.describe()}: dropped, compression.type is {codec!r}")
        else:
            config["compression.level"] = setting.value
    return config
