"""Secrets never show: key classification, masked reprs, masked DB URLs in store errors, DAG docs and CLI output.

The store tests connect to a real port on which nothing listens (no server is needed to be refused).
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from airmirror.cli import main
from airmirror.config import load_config
from airmirror.config.client_properties import translate
from airmirror.config.db_urls import db_url_secrets, masked_db_url
from airmirror.config.properties import Setting
from airmirror.config.secrets import MASK, MaskedConfig, is_secret_key
from airmirror.dag_factory.doc import flow_doc
from airmirror.devtools.local_kafka import free_port
from airmirror.errors import ReplicationFailure
from airmirror.store import MetadataStore
from airmirror.store.engine import create_store_engine

JAAS_PASSWORD = "jaas-pw-4f1c9e"
KEY_PASSWORD = "key-pw-8d2a7b"
PEM_KEY = "-----BEGIN PRIVATE KEY-----\\nMIIEv-pem-body-77aa\\n-----END PRIVATE KEY-----"
S3_SECRET = "s3-secret-19be4c"
URL_PASSWORD = "url-pw-3c5d0f"
QUERY_PASSWORD = "query-pw-6e7a21"
SSL_PASSWORD = "ssl-pw-0b9f44"
ENV_PASSWORD = "env-pw-5a5a5a"
SECRETS = (
    JAAS_PASSWORD,
    KEY_PASSWORD,
    "MIIEv-pem-body-77aa",
    S3_SECRET,
    URL_PASSWORD,
    QUERY_PASSWORD,
    SSL_PASSWORD,
    ENV_PASSWORD,
)


def db_url(port: int = 5432) -> str:
    return f"postgresql+psycopg://mirror:{URL_PASSWORD}@127.0.0.1:{port}/meta?password={QUERY_PASSWORD}&sslpassword={SSL_PASSWORD}&sslmode=prefer"


def config_text(port: int = 5432) -> str:
    return f"""clusters = a, b
a.bootstrap.servers = 127.0.0.1:1
b.bootstrap.servers = 127.0.0.1:2
a->b.enabled = true
a.security.protocol = SASL_SSL
a.sasl.mechanism = PLAIN
a.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{JAAS_PASSWORD}";
b.ssl.key.password = {KEY_PASSWORD}
b.ssl.keystore.type = PEM
b.ssl.keystore.key = {PEM_KEY}
b.ssl.keystore.certificate.chain = -----BEGIN CERTIFICATE-----\\nMIIC\\n-----END CERTIFICATE-----
a->b.producer.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username="p" password="${{env:AIRMIRROR_TEST_PW}}";
producer.buffer.memory = 1000
airmirror.spark.conf.spark.hadoop.fs.s3a.secret.key = {S3_SECRET}
airmirror.spark.conf.spark.hadoop.fs.s3a.aws.credentials.provider = org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider
airmirror.metadata.db.url = {db_url(port)}
"""  # noqa: E501 (a properties file: one key per line)


def assert_no_secret(text: str) -> None:
    assert [secret for secret in SECRETS if secret in text] == []


@pytest.fixture
def config_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AIRMIRROR_TEST_PW", ENV_PASSWORD)
    path = tmp_path / "mm2.properties"
    path.write_text(config_text(free_port()))
    return path


@pytest.mark.parametrize(
    "key",
    [
        "sasl.jaas.config",
        "a.sasl.jaas.config",
        "a->b.producer.sasl.jaas.config",
        "sasl.password",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "ssl.key.pem",
        "ssl.keystore.key",
        "sasl.oauthbearer.client.secret",
        "airmirror.spark.conf.spark.hadoop.fs.s3a.secret.key",
        "spark.hadoop.fs.s3a.access.key",
        "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net",
        "spark.hadoop.fs.s3a.session.token",
        "spark.ssl.keyStorePassword",
        "password",
        "sslpassword",
        "aws_token",
    ],
)
def test_secret_keys(key: str):
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "bootstrap.servers",
        "sasl.username",
        "sasl.mechanism",
        "security.protocol",
        "ssl.key.location",
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.certificate.pem",
        "key.serializer",
        "transactional.id",
        "airmirror.metadata.db.url",
        "spark.hadoop.fs.s3a.aws.credentials.provider",
        "sslmode",
        "user",
    ],
)
def test_other_keys(key: str):
    assert not is_secret_key(key)


def test_db_url_password_and_query_passwords_are_masked():
    url = f"postgresql+psycopg://u:{URL_PASSWORD}@host/db?password={QUERY_PASSWORD}&sslpassword={SSL_PASSWORD}&sslmode=require"
    assert masked_db_url(url) == "postgresql+psycopg://u:***@host/db?password=***&sslmode=require&sslpassword=***"
    assert masked_db_url("sqlite:////var/lib/airmirror/metadata.db") == "sqlite:////var/lib/airmirror/metadata.db"
    assert masked_db_url(f"not a url {URL_PASSWORD}") == "***"


def test_db_url_secrets_are_every_form_a_secret_takes():
    url = "postgresql+psycopg://u:p%40ss-1@host/db?password=one-pw&password=two-pw&token=a%20b&sslmode=require"
    assert db_url_secrets(url) == {"p@ss-1", "p%40ss-1", "one-pw", "two-pw", "a b", "a%20b", "a+b"}
    assert db_url_secrets("sqlite:///x.db") == set()


def test_store_errors_and_repr_mask_every_url_credential():
    url = db_url(free_port())
    with pytest.raises(ReplicationFailure) as raised:
        MetadataStore.open(url)
    message = str(raised.value)
    assert_no_secret(message)
    assert (
        "postgresql+psycopg://mirror:***@127.0.0.1:" in message
        and "?password=***&sslmode=prefer&sslpassword=***" in message
    )
    store = MetadataStore(create_store_engine(url))
    try:
        assert repr(store) == f"MetadataStore({masked_db_url(url)!r})"
    finally:
        store.dispose()


def test_setting_and_translation_reprs_mask_secret_values():
    jaas = Setting(
        "a.sasl.jaas.config",
        f'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{JAAS_PASSWORD}";',
        3,
    )
    assert repr(jaas) == f"Setting(key='a.sasl.jaas.config', value='{MASK}', line=3)"
    assert repr(Setting("a.bootstrap.servers", "h:1")) == "Setting(key='a.bootstrap.servers', value='h:1', line=None)"
    translation = translate(
        {"sasl.jaas.config": jaas, "ssl.key.password": Setting("ssl.key.password", KEY_PASSWORD)}, "producer"
    )
    assert translation.config["sasl.password"] == JAAS_PASSWORD
    assert_no_secret(repr(translation) + str(translation.config))


def test_masked_config_is_a_dict_that_pickles_and_hides_secrets_in_its_repr():
    config = MaskedConfig({"bootstrap.servers": "h:1", "sasl.password": JAAS_PASSWORD})
    assert config == {"bootstrap.servers": "h:1", "sasl.password": JAAS_PASSWORD}
    assert pickle.loads(pickle.dumps(config)) == config
    assert repr(config) == str(config) == f"{{'bootstrap.servers': 'h:1', 'sasl.password': '{MASK}'}}"


def test_flow_secret_values_hold_every_secret_and_no_repr_shows_one(config_path: Path):
    flow = load_config(config_path).flow("a->b")
    exact = {
        JAAS_PASSWORD,
        KEY_PASSWORD,
        PEM_KEY.replace("\\n", "\n"),
        S3_SECRET,
        URL_PASSWORD,
        QUERY_PASSWORD,
        SSL_PASSWORD,
        ENV_PASSWORD,
    }
    assert exact <= flow.secret_values()
    assert "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider" not in flow.secret_values()
    clients = [flow.client_config(alias, kind) for alias in ("a", "b") for kind in ("consumer", "producer", "admin")]
    assert flow.target_client("producer")["sasl.password"] == ENV_PASSWORD
    assert_no_secret(repr(flow) + repr(flow.spark.conf) + "".join(map(repr, clients)))


def test_dag_doc_masks_client_secrets_and_db_url_credentials(config_path: Path):
    doc = flow_doc(load_config(config_path).flow("a->b"))
    assert_no_secret(doc)
    assert f"| target producer `sasl.password` | `{MASK}` |" in doc
    assert "?password=***&sslmode=prefer&sslpassword=***" in doc


def test_cli_validate_and_status_show_no_secret(config_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["validate", str(config_path)]) == 0
    validated = capsys.readouterr()
    assert "valid" in validated.out and "buffer.memory" in validated.err
    assert main(["status", str(config_path), "--flow", "a->b"]) == 1
    status = capsys.readouterr()
    assert "metadata store postgresql+psycopg://mirror:***@127.0.0.1:" in status.err
    assert_no_secret(validated.out + validated.err + status.out + status.err)


def test_cli_config_errors_about_secret_keys_show_no_secret(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = a, b\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\na->b.enabled = true\n"
        f'a.sasl.jaas.config = com.example.CustomLoginModule required password="{JAAS_PASSWORD}";\n'
    )
    assert main(["validate", str(path)]) == 2
    error = capsys.readouterr().err
    assert "a.sasl.jaas.config" in error
    assert_no_secret(error)
