"""A metadata DB URL's secrets: found and masked as SQLAlchemy parses the URL.

Contract:

* :func:`masked_db_url` shows a DB URL's password as SQLAlchemy's ``render_as_string(hide_password=True)``
  does (:data:`~airmirror.config.secrets.URL_MASK`), and the values of secret query parameters
  (``?password=``, ``?sslpassword=``, ``?aws_token=`` ...; :func:`~airmirror.config.secrets.is_secret_key`
  decides), which SQLAlchemy leaves in clear, the same way.
* :func:`db_url_secrets` lists a DB URL's secret strings, each decoded and as percent-encoded in the URL,
  so that a secrets masker can hide them wherever they appear.

Apart from :mod:`airmirror.config.secrets` so that what only masks client settings (a Spark copy task) does not
import SQLAlchemy.
"""

from __future__ import annotations

from urllib.parse import quote, quote_plus

from sqlalchemy import URL, make_url
from sqlalchemy.exc import ArgumentError

from airmirror.config.secrets import URL_MASK, is_secret_key


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
