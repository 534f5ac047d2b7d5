"""The one place that decides what is a secret, and how secrets are shown: masked.

Contract:

* :func:`is_secret_key` classifies a configuration key - a Java or librdkafka client key, an MM2 key
  (with any ``{cluster}.``/``{flow}.`` prefix), an ``airmirror.spark.conf.X`` key, or a DB URL query
  parameter - as secret when it names a password, passphrase, secret, token, credential (not a
  ``credentials.provider`` class or a ``credentials.source``), JAAS login, private key, API key, a schema
  registry's ``basic.auth.user.info``, or a cloud-storage access/account key.
  Matching is case-insensitive.
* Secret values are shown as :data:`MASK` by :func:`mask_value`, :func:`masked` and the repr/str of
  :class:`MaskedConfig`; the password of a URL in any value (``https://user:password@host``) as :data:`URL_MASK`.
  A DB URL's secrets are found and masked by :mod:`airmirror.config.db_urls`, with SQLAlchemy's parsing.

Nothing here imports Airflow, Spark or SQLAlchemy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeVar
from urllib.parse import unquote

MASK = "********"
URL_MASK = "***"
"""SQLAlchemy's mask of a URL's password."""

_SECRET_KEY = re.compile(
    r"password|passwd|passphrase|secret|token|credential(?!s?\.(?:provider|source))|jaas|private|api[._-]?key|user\.info"
    r"|\bkey\.pem$|keystore\.key$|(?:access|account)\.key\b",
    re.IGNORECASE,
)

V = TypeVar("V")


def is_secret_key(key: str) -> bool:
    """True when the value of configuration key ``key`` is a secret (see the module docstring)."""
    return _SECRET_KEY.search(key) is not None


_URL_PASSWORD = re.compile(
    r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)(?P<user>[^:@/\s,]*):(?P<password>[^/\s]*?)@(?![^/\s]*@)",
    re.IGNORECASE,
)
"""``scheme://user:password@`` where the user info ends at the authority's last ``@`` (RFC 3986), so a password
holding a raw ``@``, ``:`` or ``,`` is matched whole."""


def mask_value(key: str, value: V) -> V | str:
    """``value``, or :data:`MASK` when ``key`` is a secret key; the password of every URL in a text value (e.g. a
    schema registry's ``https://user:password@host``) is :data:`URL_MASK` whatever the key."""
    if is_secret_key(key):
        return MASK
    if isinstance(value, str) and "://" in value:
        return masked_url_passwords(value)
    return value


def masked_url_passwords(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@`` in it replaced by :data:`URL_MASK`."""
    return _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:{URL_MASK}@", text)


def url_passwords(text: str) -> set[str]:
    """The passwords of every ``scheme://user:password@`` in ``text`` (comma-separated URLs included), each as written
    and percent-decoded, as a client sends it."""
    found = {m["password"] for m in _URL_PASSWORD.finditer(text) if m["password"]}
    return found | {unquote(password) for password in found}


def masked(config: Mapping[str, V]) -> dict[str, V | str]:
    """A copy of ``config`` with the values of secret keys replaced by :data:`MASK`."""
    return {key: mask_value(key, value) for key, value in config.items()}


def secret_values(config: Mapping[str, str]) -> set[str]:
    """The non-empty values of the secret keys of ``config``."""
    return {value for key, value in config.items() if value and is_secret_key(key)}


class MaskedConfig(dict[str, str]):
    """A plain ``dict`` of configuration settings (it pickles and passes to confluent-kafka as one) whose
    repr and str show the values of secret keys as :data:`MASK`."""

    def __repr__(self) -> str:
        return repr(masked(self))

    __str__ = __repr__
