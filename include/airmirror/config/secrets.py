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
  :func:`masked_db_url` shows a DB URL's password as SQLAlchemy's
  ``render_as_string(hide_password=True)`` does (:data:`URL_MASK`), and the values of secret query
  parameters (``?password=``, ``?sslpassword=``, ``?aws_token=`` ...), which SQLAlchemy leaves in clear, the
  same way.
* :func:`db_url_secrets` lists a DB URL's secret strings, each decoded and as percent-encoded in the URL,
  so that a secrets masker can hide them wherever they appear.

Nothing here imports Airflow or Spark.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeVar
from urllib.parse import quote, quote_plus, unquote

from sqlalchemy import URL, make_url
from sqlalchemy.exc import ArgumentError

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


def _query_values(value: str | tuple[str, ...]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else value


def db_url_secrets(url: str | URL) -> set[str]:
    """The password and secret query-parameter values of ``url``, decoded and percent-encoded; an
    unparseable URL (which SQLAlchemy rejects without quoting it) has none."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return set()
    decoded = [parsed.password or ""] + [
        value for name, values in parsed.query.items() if is_secret_key(name) for value in _query_values(values)
    ]
    return {form for value in decoded if value for form in (value, quote(value, safe=""), quote_plus(value))}


def masked_db_url(url: str | URL) -> str:
    """``url`` rendered with its password and the values of its secret query parameters as :data:`URL_MASK`;
    an unparseable URL is shown as :data:`URL_MASK` altogether."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return URL_MASK
    hidden = parsed.update_query_dict({name: URL_MASK for name in parsed.query if is_secret_key(name)})
    return hidden.render_as_string(hide_password=True).replace(quote_plus(URL_MASK), URL_MASK)
