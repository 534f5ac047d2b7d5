"""Security of a local cluster's client listener: PLAINTEXT, SASL_PLAINTEXT, SSL or SASL_SSL.

Chosen when a cluster is first started (``--security``, ``--sasl-mechanism``, ``--user NAME:PASSWORD``) and
recorded in its ``meta.json`` with the secrets generated then; a later start with other settings is refused.

* One listener per node serves clients *and* inter-broker traffic, named after its protocol (``SASL_SSL://``);
  the KRaft controller listener stays PLAINTEXT on 127.0.0.1.  So no port is added: inter-broker requests use
  the client listener with the broker's own user, ``airmirror-broker``, whose password is random and recorded.
* SASL: ``PLAIN`` users are listed in the listener's JAAS configuration; ``SCRAM-SHA-512`` users are written
  into the metadata log when the storage is formatted (``kafka-storage format --add-scram``), so they exist
  before any client connects.  With SASL and no ``--user``, one user ``airmirror`` (password
  ``airmirror-secret``) is created.  The default mechanism is SCRAM-SHA-512.
* SSL: the cluster's own CA and broker certificate (see :mod:`~airmirror.devtools.local_kafka.tls`); clients
  are not asked for certificates (``ssl.client.auth=none``).
* ``--authorizer`` (SASL only): KRaft's ``StandardAuthorizer`` with ACLs, and no ACL means no access.  The super
  users are the brokers' own user, the users named with ``--super-user`` and ``ANONYMOUS``, the principal of
  the PLAINTEXT controller listener on 127.0.0.1 that the nodes use among themselves.  Every other user gets
  only what ACLs grant it (created by a super user, e.g. with ``AdminClient.create_acls``).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airmirror.devtools.local_kafka.tls import TlsMaterial
from airmirror.errors import InputError

PLAINTEXT = "PLAINTEXT"
PROTOCOLS = (PLAINTEXT, "SASL_PLAINTEXT", "SSL", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-512")
DEFAULT_SASL_MECHANISM = "SCRAM-SHA-512"
BROKER_USER = "airmirror-broker"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
CONTROLLER_LISTENER = "CONTROLLER"

_USER_NAME = re.compile(r"[A-Za-z0-9._-]+")
# Printable ASCII but for what the JAAS, SCRAM (--add-scram) and properties syntaxes would need escaped.
_PASSWORD = re.compile(r"[!#%&()*+./0-9:;<=>?@A-Z^_a-z{|}~-]+")
_PASSWORD_RULE = "printable ASCII without spaces, quotes, backquotes, backslashes, commas, brackets or '$'"
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# Server settings airmirror derives from the security settings, which --broker-config may not override.
MANAGED_KEYS = frozenset(
    {
        "sasl.enabled.mechanisms",
        "sasl.mechanism.inter.broker.protocol",
        "sasl.mechanism.controller.protocol",
        "sasl.jaas.config",
        "ssl.client.auth",
        "ssl.key.password",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "authorizer.class.name",
        "super.users",
        "allow.everyone.if.no.acl.found",
    }
)
MANAGED_PREFIX = "listener.name."


@dataclass(frozen=True)
class User:
    """A SASL user; the password is left out of the repr."""

    name: str
    password: str = field(repr=False)

    @classmethod
    def parse(cls, text: str) -> User:
        """``NAME:PASSWORD`` (split at the first ``:``); ``InputError`` naming ``--user`` if malformed."""
        if not isinstance(text, str):
            raise InputError(f"invalid --user {type(text).__name__}: expected NAME:PASSWORD")
        name, colon, password = text.partition(":")
        if not colon:
            raise InputError(f"invalid --user '{text}': expected NAME:PASSWORD")
        return cls.checked(name, password)

    @classmethod
    def checked(cls, name: str, password: str) -> User:
        """The user ``name`` with ``password``; ``InputError`` naming ``--user`` (never echoing the password)."""
        if not isinstance(name, str) or not _USER_NAME.fullmatch(name):
            raise InputError(f"invalid --user name {name!r}: use only letters, digits, '.', '_' and '-'")
        if name == BROKER_USER:
            raise InputError(f"invalid --user name '{name}': it is the brokers' own user")
        if not isinstance(password, str) or not _PASSWORD.fullmatch(password):
            raise InputError(f"invalid --user password of '{name}': use one or more characters, {_PASSWORD_RULE}")
        return cls(name, password)


DEFAULT_USER = User("airmirror", "airmirror-secret")


@dataclass(frozen=True)
class BrokerSecurity:
    """How clients reach a local cluster: protocol, SASL mechanism and users, TLS files (``None`` without SSL).

    Passwords never appear in its repr.  :meth:`client_properties` gives Java/MM2 client keys,
    :meth:`librdkafka_config` confluent-kafka settings, for one of :attr:`users` (the first by default).
    """

    protocol: str = PLAINTEXT
    sasl_mechanism: str | None = None
    users: tuple[User, ...] = ()
    tls: TlsMaterial | None = None
    authorizer: bool = False
    super_users: tuple[str, ...] = ()

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.protocol.endswith("SSL")

    def settings(self) -> BrokerSecurity:
        """The chosen settings alone (without the TLS files): what must match between starts."""
        return BrokerSecurity(
            self.protocol, self.sasl_mechanism, self.users, authorizer=self.authorizer, super_users=self.super_users
        )

    def describe(self) -> str:
        """The settings as flags, passwords replaced by ``***``."""
        flags = [f"--security {self.protocol}"]
        if self.sasl_mechanism is not None:
            flags.append(f"--sasl-mechanism {self.sasl_mechanism}")
        flags += [f"--user {user.name}:***" for user in self.users]
        if self.authorizer:
            flags.append("--authorizer")
        flags += [f"--super-user {name}" for name in self.super_users]
        return " ".join(flags)

    def user(self, name: str | None = None) -> User:
        """User ``name`` (the first user if ``None``); ``KeyError`` if there is none such."""
        for user in self.users:
            if name is None or user.name == name:
                return user
        raise KeyError(f"no SASL user {name!r}" if name is not None else "no SASL user (the protocol has no SASL)")

    def jaas_config(self, user: User) -> str:
        """Java's ``sasl.jaas.config`` logging in as ``user`` with this cluster's mechanism."""
        return jaas_login(self.sasl_mechanism or DEFAULT_SASL_MECHANISM, user)

    def client_properties(self, user: str | User | None = None, *, truststore_type: str = "PEM") -> dict[str, str]:
        """Java (MM2) client keys for this cluster: ``security.protocol``, then ``sasl.mechanism`` and
        ``sasl.jaas.config`` as ``user``, then the trust store, ``PEM`` (``ca.pem``, the only kind librdkafka and
        so airmirror read) or ``PKCS12`` (``truststore.p12`` with its password)."""
        properties = {"security.protocol": self.protocol}
        if self.uses_sasl:
            login = user if isinstance(user, User) else self.user(user)
            properties["sasl.mechanism"] = self.sasl_mechanism or DEFAULT_SASL_MECHANISM
            properties["sasl.jaas.config"] = self.jaas_config(login)
        if self.tls is not None:
            if truststore_type == "PEM":
                properties |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.tls.ca_certificate)}
            elif truststore_type == "PKCS12":
                properties |= {
                    "ssl.truststore.type": "PKCS12",
                    "ssl.truststore.location": str(self.tls.truststore),
                    "ssl.truststore.password": self.tls.truststore_password,
                }
            else:
                raise ValueError(f"truststore_type must be 'PEM' or 'PKCS12', not {truststore_type!r}")
        return properties

    def librdkafka_config(self, user: str | User | None = None) -> dict[str, str]:
        """confluent-kafka settings for this cluster as ``user`` (bootstrap servers not included)."""
        config = {"security.protocol": self.protocol.lower()}
        if self.uses_sasl:
            login = user if isinstance(user, User) else self.user(user)
            config |= {
                "sasl.mechanisms": self.sasl_mechanism or DEFAULT_SASL_MECHANISM,
                "sasl.username": login.name,
                "sasl.password": login.password,
            }
        if self.tls is not None:
            config["ssl.ca.location"] = str(self.tls.ca_certificate)
        return config


def jaas_login(mechanism: str, user: User) -> str:
    """The JAAS entry of Kafka's login module for ``mechanism`` with ``user``'s name and password."""
    return f'{_LOGIN_MODULES[mechanism]} required username="{user.name}" password="{user.password}";'


def checked_security(
    protocol: str = PLAINTEXT,
    sasl_mechanism: str | None = None,
    users: Iterable[str | tuple[str, str] | User] | None = None,
    authorizer: bool = False,
    super_users: Iterable[str] | None = None,
) -> BrokerSecurity:
    """Validated settings; ``InputError`` naming ``--security``, ``--sasl-mechanism``, ``--user``,
    ``--authorizer`` or ``--super-user``.

    ``users`` are ``NAME:PASSWORD`` strings, ``(name, password)`` pairs or :class:`User`; with SASL and no
    user, :data:`DEFAULT_USER`.  Protocol and mechanism are case-insensitive.  ``authorizer`` needs SASL (ACLs
    name SASL users); ``super_users`` need ``authorizer`` and must be among the users.
    """
    if not isinstance(protocol, str) or protocol.upper() not in PROTOCOLS:
        raise InputError(f"invalid --security {protocol!r}: expected one of {', '.join(PROTOCOLS)}")
    protocol = protocol.upper()
    sasl = protocol.startswith("SASL_")
    if sasl_mechanism is not None:
        if not isinstance(sasl_mechanism, str) or sasl_mechanism.upper() not in SASL_MECHANISMS:
            raise InputError(
                f"invalid --sasl-mechanism {sasl_mechanism!r}: expected one of {', '.join(SASL_MECHANISMS)}"
            )
        if not sasl:
            raise InputError(f"--sasl-mechanism needs --security SASL_PLAINTEXT or SASL_SSL, not {protocol}")
        sasl_mechanism = sasl_mechanism.upper()
    checked_users = tuple(_user(user) for user in users or ())
    if checked_users and not sasl:
        raise InputError(f"--user needs --security SASL_PLAINTEXT or SASL_SSL, not {protocol}")
    names = [user.name for user in checked_users]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise InputError(f"--user '{duplicates[0]}' is given twice")
    checked_users = checked_users or ((DEFAULT_USER,) if sasl else ())
    supers = _super_users(protocol, checked_users, authorizer, tuple(super_users or ()))
    if not sasl:
        return BrokerSecurity(protocol)
    mechanism = sasl_mechanism or DEFAULT_SASL_MECHANISM
    return BrokerSecurity(protocol, mechanism, checked_users, authorizer=authorizer, super_users=supers)


def _super_users(protocol: str, users: tuple[User, ...], authorizer: bool, names: tuple[str, ...]) -> tuple[str, ...]:
    """``names`` checked against the other settings (``InputError`` naming ``--authorizer`` or ``--super-user``)."""
    if authorizer and not protocol.startswith("SASL_"):
        raise InputError(
            f"--authorizer needs --security SASL_PLAINTEXT or SASL_SSL (ACLs name SASL users), not {protocol}"
        )
    if names and not authorizer:
        raise InputError("--super-user needs --authorizer")
    known = {user.name for user in users}
    for name in names:
        if name not in known:
            raise InputError(f"--super-user '{name}' is not one of the --user names ({', '.join(sorted(known))})")
        if names.count(name) > 1:
            raise InputError(f"--super-user '{name}' is given twice")
    return names


def _user(user: str | tuple[str, str] | User) -> User:
    if isinstance(user, User):
        return User.checked(user.name, user.password)
    if isinstance(user, tuple) and len(user) == 2:
        return User.checked(*user)
    return User.parse(user)


@dataclass(frozen=True)
class SecurityRecord:
    """The ``security`` entry of ``meta.json``: the settings plus the secrets generated at the first start."""

    settings: BrokerSecurity = field(default_factory=BrokerSecurity)
    broker_password: str | None = field(default=None, repr=False)
    truststore_password: str | None = field(default=None, repr=False)
    keystore_password: str | None = field(default=None, repr=False)

    @classmethod
    def new(cls, settings: BrokerSecurity) -> SecurityRecord:
        """The record of a new cluster with ``settings``: fresh random passwords where needed."""
        settings = settings.settings()
        broker_password = _new_password() if settings.uses_sasl else None
        tls = settings.uses_tls
        return cls(settings, broker_password, _new_password() if tls else None, _new_password() if tls else None)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any] | None) -> SecurityRecord:
        """Read what :meth:`to_json` wrote; ``None`` (a ``meta.json`` from before security) is PLAINTEXT."""
        if raw is None:
            return cls()
        users = tuple(User(user["name"], user["password"]) for user in raw.get("users", ()))
        tls = raw.get("tls") or {}
        authorizer = raw.get("authorizer") or {}
        settings = BrokerSecurity(
            raw["protocol"],
            raw.get("sasl_mechanism"),
            users,
            authorizer=bool(authorizer),
            super_users=tuple(authorizer.get("super_users", ())),
        )
        return cls(
            settings,
            raw.get("broker_password"),
            tls.get("truststore_password"),
            tls.get("keystore_password"),
        )

    def to_json(self) -> dict[str, Any]:
        raw: dict[str, Any] = {"protocol": self.settings.protocol}
        if self.settings.uses_sasl:
            raw["sasl_mechanism"] = self.settings.sasl_mechanism
            raw["users"] = [{"name": user.name, "password": user.password} for user in self.settings.users]
            raw["broker_password"] = self.broker_password
        if self.settings.authorizer:
            raw["authorizer"] = {"super_users": list(self.settings.super_users)}
        if self.settings.uses_tls:
            raw["tls"] = {"truststore_password": self.truststore_password, "keystore_password": self.keystore_password}
        return raw

    @property
    def broker_user(self) -> User:
        """The brokers' own user (inter-broker requests, airmirror's readiness probe); SASL only."""
        if self.broker_password is None:
            raise ValueError("the cluster has no SASL")
        return User(BROKER_USER, self.broker_password)

    def tls_material(self, cluster_root: Path) -> TlsMaterial | None:
        """The TLS files of the cluster at ``cluster_root`` (``None`` without SSL); not generated here."""
        if not self.settings.uses_tls:
            return None
        assert self.truststore_password is not None and self.keystore_password is not None
        return TlsMaterial(cluster_root / "tls", self.truststore_password, self.keystore_password)

    def security(self, cluster_root: Path) -> BrokerSecurity:
        """The public view for a :class:`~airmirror.devtools.local_kafka.LocalBroker` handle."""
        settings = self.settings
        return BrokerSecurity(
            settings.protocol,
            settings.sasl_mechanism,
            settings.users,
            self.tls_material(cluster_root),
            authorizer=settings.authorizer,
            super_users=settings.super_users,
        )

    def probe_config(self, cluster_root: Path) -> dict[str, str]:
        """confluent-kafka settings of the broker's own user, for readiness probes."""
        security = self.security(cluster_root)
        return security.librdkafka_config(self.broker_user if security.uses_sasl else None)

    def scram_credentials(self) -> list[str]:
        """``kafka-storage format --add-scram`` arguments: the broker's user and every user (SCRAM only)."""
        settings = self.settings
        if not settings.uses_sasl or settings.sasl_mechanism == "PLAIN":
            return []
        return [
            f"{settings.sasl_mechanism}=[name={user.name},password={user.password}]"
            for user in (self.broker_user, *settings.users)
        ]

    def listener_properties(self, client: str, controller: str, cluster_root: Path) -> dict[str, str]:
        """The listener settings of a node's ``server.properties`` serving clients on ``client`` (host:port)
        and the controller quorum on ``controller``."""
        protocol = self.settings.protocol
        properties = {
            "listeners": f"{protocol}://{client},{CONTROLLER_LISTENER}://{controller}",
            "advertised.listeners": f"{protocol}://{client}",
            "controller.listener.names": CONTROLLER_LISTENER,
            "inter.broker.listener.name": protocol,
            "listener.security.protocol.map": f"{protocol}:{protocol},{CONTROLLER_LISTENER}:PLAINTEXT",
        }
        if self.settings.uses_sasl:
            mechanism = self.settings.sasl_mechanism or DEFAULT_SASL_MECHANISM
            jaas = jaas_login(mechanism, self.broker_user)
            if mechanism == "PLAIN":
                accounts = " ".join(
                    f'user_{user.name}="{user.password}"' for user in (self.broker_user, *self.settings.users)
                )
                jaas = f"{jaas[:-1]} {accounts};"
            properties |= {
                "sasl.enabled.mechanisms": mechanism,
                "sasl.mechanism.inter.broker.protocol": mechanism,
                f"{MANAGED_PREFIX}{protocol.lower()}.{mechanism.lower()}.sasl.jaas.config": jaas,
            }
        if self.settings.authorizer:
            supers = (BROKER_USER, *self.settings.super_users, "ANONYMOUS")
            properties |= {
                "authorizer.class.name": STANDARD_AUTHORIZER,
                "super.users": ";".join(f"User:{name}" for name in supers),
                "allow.everyone.if.no.acl.found": "false",
            }
        tls = self.tls_material(cluster_root)
        if tls is not None:
            properties |= {
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": str(tls.keystore),
                "ssl.keystore.password": tls.keystore_password,
                "ssl.key.password": tls.keystore_password,
                "ssl.truststore.type": "PKCS12",
                "ssl.truststore.location": str(tls.truststore),
                "ssl.truststore.password": tls.truststore_password,
                "ssl.client.auth": "none",
            }
        return properties


def _new_password() -> str:
    return secrets.token_urlsafe(18)
