"""Java trust stores made by Java's own keytool, read for librdkafka (``ssl.ca.pem``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from airmirror.config.client_properties import translate
from airmirror.config.properties import Setting
from airmirror.devtools.local_kafka.tls import TlsMaterial
from airmirror.errors import ConfigError

STORE_PASSWORD = "store-Secret-1"


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    material = TlsMaterial(tmp_path_factory.mktemp("ca") / "tls", "trust-Secret-2", "key-Secret-3")
    material.ensure("trust-store-test")
    return material


def keytool_store(ca: TlsMaterial, directory: Path, store_type: str) -> Path:
    store = directory / f"truststore.{store_type.lower()}"
    subprocess.run(
        [
            "keytool",
            "-importcert",
            "-noprompt",
            "-alias",
            "local-ca",
            "-file",
            str(ca.ca_certificate),
            "-keystore",
            str(store),
            "-storetype",
            store_type,
            "-storepass",
            STORE_PASSWORD,
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return store


def settings(mapping: dict[str, str]) -> dict[str, Setting]:
    return {key: Setting(f"b.{key}", value, line) for line, (key, value) in enumerate(mapping.items(), start=1)}


def rejected(mapping: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as error:
        translate(settings(mapping), "admin")
    assert error.value.exit_code == 2
    assert STORE_PASSWORD not in str(error.value)
    return error.value


@pytest.mark.parametrize("declared", ["PKCS12", "JKS", None])
def test_a_keytool_pkcs12_trust_store_becomes_inline_pem(ca: TlsMaterial, tmp_path: Path, declared: str | None) -> None:
    store = keytool_store(ca, tmp_path, "PKCS12")
    mapping = {"ssl.truststore.location": str(store), "ssl.truststore.password": STORE_PASSWORD}
    if declared is not None:
        mapping["ssl.truststore.type"] = declared
    config = translate(settings(mapping), "admin").config
    assert set(config) == {"ssl.ca.pem"}
    trusted = x509.load_pem_x509_certificates(config["ssl.ca.pem"].encode())
    assert [c.public_bytes(Encoding.PEM) for c in trusted] == [ca.ca_certificate.read_bytes()]


def test_the_locally_generated_trust_store_is_read(ca: TlsMaterial) -> None:
    mapping = {
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(ca.truststore),
        "ssl.truststore.password": ca.truststore_password,
    }
    assert translate(settings(mapping), "admin").config["ssl.ca.pem"] == ca.ca_certificate.read_text()


def test_a_true_jks_file_is_rejected_with_how_to_convert_it(ca: TlsMaterial, tmp_path: Path) -> None:
    store = keytool_store(ca, tmp_path, "JKS")
    error = rejected({"ssl.truststore.location": str(store), "ssl.truststore.password": STORE_PASSWORD})
    assert (error.key, error.line) == ("b.ssl.truststore.location", 1)
    assert "JKS" in str(error) and "keytool -importkeystore" in str(error)


def test_a_wrong_password_names_the_password_setting(ca: TlsMaterial, tmp_path: Path) -> None:
    store = keytool_store(ca, tmp_path, "PKCS12")
    error = rejected(
        {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(store), "ssl.truststore.password": "not-it"}
    )
    assert (error.key, error.line) == ("b.ssl.truststore.password", 3)
    assert "not-it" not in str(error)


def test_a_missing_password_names_the_location(ca: TlsMaterial, tmp_path: Path) -> None:
    store = keytool_store(ca, tmp_path, "PKCS12")
    error = rejected({"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(store)})
    assert error.key == "b.ssl.truststore.location" and "without an ssl.truststore.password" in str(error)


@pytest.mark.parametrize(
    ("content", "reason"), [(None, "cannot read trust store"), (b"not a store", "cannot be opened")]
)
def test_an_unreadable_store_names_the_location(tmp_path: Path, content: bytes | None, reason: str) -> None:
    store = tmp_path / "ts.p12"
    if content is not None:
        store.write_bytes(content)
    error = rejected({"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(store)})
    assert error.key == "b.ssl.truststore.location" and reason in str(error)
