"""Java PKCS12 trust stores, read for librdkafka, which takes trusted CA certificates as PEM only.

Contract of :func:`pkcs12_trusted_pem`:

* The store is read where the MM2 file is parsed (the CLI, the DAG task, the Spark driver).  Its certificates
  are handed to librdkafka inline (``ssl.ca.pem``), so Spark executors and other machines need no copy of it.
* Java reads PKCS12 files under its default store type name JKS too, so a file declared JKS is read as PKCS12
  unless it is a true JKS file (magic ``FEEDFEED``): that one is rejected with how to convert it.
* Every failure is a :class:`~airmirror.errors.ConfigError` naming the setting at fault: the location (missing,
  unreadable, not a trust store, no certificate in it) or the password (wrong, or missing where one is needed).
  The password never appears in an error.
"""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

from airmirror.config.properties import Setting
from airmirror.errors import ConfigError

JKS_MAGIC = bytes.fromhex("feedfeed")
"""The first bytes of a true (Sun) JKS key store, which only Java can read."""


def pkcs12_trusted_pem(location: Setting, password: Setting | None) -> str:
    """The certificates of the PKCS12 trust store at ``location`` (opened with ``password``), PEM-encoded."""
    data = _read(location)
    if data.startswith(JKS_MAGIC):
        raise ConfigError(
            f"{location.value} is a JKS trust store, which librdkafka cannot read; convert it to PKCS12 "
            "(keytool -importkeystore -deststoretype PKCS12) or PEM and set ssl.truststore.type accordingly",
            key=location.key,
            line=location.line,
        )
    secret = password.value.encode() if password is not None else None
    try:
        store = pkcs12.load_pkcs12(data, secret)
    except ValueError as error:
        culprit = password or location
        given = "with the given" if password is not None else "without an"
        raise ConfigError(
            f"PKCS12 trust store {location.value} cannot be opened {given} ssl.truststore.password ({_cause(error)})",
            key=culprit.key,
            line=culprit.line,
        ) from None
    certificates = [entry.certificate for entry in store.additional_certs]
    if store.cert is not None:
        certificates.insert(0, store.cert.certificate)
    if not certificates:
        raise ConfigError(
            f"PKCS12 trust store {location.value} holds no certificate", key=location.key, line=location.line
        )
    return "".join(certificate.public_bytes(Encoding.PEM).decode("ascii") for certificate in certificates)


def _read(location: Setting) -> bytes:
    try:
        return Path(location.value.strip()).read_bytes()
    except OSError as error:
        raise ConfigError(
            f"cannot read trust store {location.value}: {error.strerror}", key=location.key, line=location.line
        ) from None


def _cause(error: ValueError) -> str:
    """cryptography's reason, which says whether the password or the data is wrong, and never holds the password."""
    return str(error).rstrip(".") or type(error).__name__
