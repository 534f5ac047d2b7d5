"""TLS material of a local cluster: a CA of its own and one broker certificate, as PEM and PKCS12 files.

Everything lives in ``{cluster}/tls/`` and is generated (with the ``cryptography`` package) the first time a
cluster using SSL or SASL_SSL starts, or again when a file of it is missing:

* ``ca.pem``          the CA certificate (PEM): what a librdkafka client trusts (``ssl.ca.location``)
* ``ca-key.pem``      the CA's private key (PEM, unencrypted, readable by the owner only)
* ``truststore.p12``  the CA certificate as a PKCS12 trust store (Java's trusted-certificate entry), password
                      ``truststore_password``: what the broker and Java clients trust
* ``broker.p12``      the broker's key, certificate and the CA certificate as a PKCS12 key store, password
                      ``keystore_password`` (also the key's password), used by every node of the cluster
* ``broker.pem``      the broker's certificate followed by the CA certificate (PEM), for inspection

The broker certificate names ``localhost`` and ``127.0.0.1`` (subject alternative names), so clients may keep
hostname verification on.  Keys are ECDSA P-256; certificates are valid for ten years from a day ago.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALID_DAYS = 3650
_PKCS12_KDF_ROUNDS = 10_000


@dataclass(frozen=True)
class TlsMaterial:
    """Where a cluster's TLS files are and their passwords (left out of the repr)."""

    directory: Path
    truststore_password: str = field(repr=False)
    keystore_password: str = field(repr=False)

    @property
    def ca_certificate(self) -> Path:
        """The CA certificate, PEM."""
        return self.directory / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca-key.pem"

    @property
    def truststore(self) -> Path:
        """The CA certificate as a PKCS12 trust store (``truststore_password``)."""
        return self.directory / "truststore.p12"

    @property
    def keystore(self) -> Path:
        """The broker's key and certificate chain as a PKCS12 key store (``keystore_password``)."""
        return self.directory / "broker.p12"

    @property
    def broker_certificate(self) -> Path:
        """The broker's certificate chain, PEM."""
        return self.directory / "broker.pem"

    @property
    def files(self) -> tuple[Path, ...]:
        return (self.ca_certificate, self.ca_key, self.truststore, self.keystore, self.broker_certificate)

    def ensure(self, cluster_name: str) -> None:
        """Generate every file, unless all of them exist (a partial set is replaced as a whole)."""
        if all(path.is_file() for path in self.files):
            return
        self.directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".tls-", dir=self.directory.parent))
        try:
            _write_material(replace(self, directory=staging), cluster_name)
            if self.directory.exists():
                shutil.rmtree(self.directory)
            staging.rename(self.directory)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _write_material(material: TlsMaterial, cluster_name: str) -> None:
    now = datetime.now(UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "airmirror local kafka"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"airmirror local CA of {cluster_name}"),
        ]
    )
    ca_certificate = (
        _builder(ca_name, ca_name, ca_key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(certificates=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    broker_key = ec.generate_private_key(ec.SECP256R1())
    broker_name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "airmirror local kafka"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"broker {cluster_name} on localhost"),
        ]
    )
    broker_certificate = (
        _builder(broker_name, ca_name, broker_key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(certificates=False), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(broker_key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    material.ca_certificate.write_bytes(ca_certificate.public_bytes(pem))
    _write_private(
        material.ca_key,
        ca_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )
    material.truststore.write_bytes(
        pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(ca_certificate, b"airmirror-local-ca")],
            _pkcs12_encryption(material.truststore_password),
        )
    )
    _write_private(
        material.keystore,
        pkcs12.serialize_key_and_certificates(
            b"broker",
            broker_key,
            broker_certificate,
            [ca_certificate],
            _pkcs12_encryption(material.keystore_password),
        ),
    )
    material.broker_certificate.write_bytes(broker_certificate.public_bytes(pem) + ca_certificate.public_bytes(pem))


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, now: datetime
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=_VALID_DAYS))
    )


def _key_usage(*, certificates: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=certificates,
        crl_sign=certificates,
        encipher_only=False,
        decipher_only=False,
    )


def _pkcs12_encryption(password: str) -> serialization.KeySerializationEncryption:
    """PBES2 (PBKDF2-SHA256, AES-256-CBC) with an HMAC-SHA256 MAC: what Java 17's PKCS12 key stores read."""
    return (
        serialization.PrivateFormat.PKCS12.encryption_builder()
        .kdf_rounds(_PKCS12_KDF_ROUNDS)
        .key_cert_algorithm(pkcs12.PBES.PBESv2SHA256AndAES256CBC)
        .hmac_hash(hashes.SHA256())
        .build(password.encode())
    )


def _write_private(path: Path, data: bytes) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
