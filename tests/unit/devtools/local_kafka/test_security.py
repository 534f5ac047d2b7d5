"""Secured local clusters without a broker: flags, users, recorded settings, server.properties lines, TLS files."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import pkcs12

from airmirror.cli import main
from airmirror.config.client_properties import translate
from airmirror.config.properties import Setting
from airmirror.devtools.local_kafka import BrokerSecurity, TlsMaterial, User, broker_status
from airmirror.devtools.local_kafka import broker as broker_module
from airmirror.devtools.local_kafka import cli as cli_module
from airmirror.devtools.local_kafka import nodes as nodes_module
from airmirror.devtools.local_kafka.security import (
    DEFAULT_USER,
    SecurityRecord,
    checked_security,
)
from airmirror.errors import InputError

CLIENT, CONTROLLER = "127.0.0.1:9092", "127.0.0.1:19092"


# --- users and settings -------------------------------------------------------------------------------------


def test_user_is_name_colon_password_split_at_the_first_colon() -> None:
    assert User.parse("alice:s3cret:with=colon") == User("alice", "s3cret:with=colon")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("alice", "invalid --user 'alice': expected NAME:PASSWORD"),
        (":secret", "invalid --user name ''"),
        ("al ice:secret", "invalid --user name 'al ice'"),
        ("alice:", "invalid --user password of 'alice'"),
        ("alice:has space", "invalid --user password of 'alice'"),
        ('alice:quo"te', "invalid --user password of 'alice'"),
        ("alice:quo'te", "invalid --user password of 'alice': use one or more characters, printable ASCII without"),
        ("alice:com,ma", "invalid --user password of 'alice'"),
        ("alice:${env:X}", "invalid --user password of 'alice'"),
        ("airmirror-broker:secret", "invalid --user name 'airmirror-broker': it is the brokers' own user"),
    ],
)
def test_bad_user_is_input_error_naming_the_flag(text: str, message: str) -> None:
    with pytest.raises(InputError, match="--user") as raised:
        User.parse(text)
    assert message in str(raised.value)
    password = text.partition(":")[2]
    if password and "password" in message:
        assert password not in str(raised.value)


def test_defaults_are_plaintext_and_sasl_gets_scram_and_a_default_user() -> None:
    assert checked_security() == BrokerSecurity("PLAINTEXT")
    sasl = checked_security("sasl_ssl")
    assert (sasl.protocol, sasl.sasl_mechanism, sasl.users) == ("SASL_SSL", "SCRAM-SHA-512", (DEFAULT_USER,))
    plain = checked_security("SASL_PLAINTEXT", "plain", ["alice:a-pw", ("bob", "b-pw"), User("carol", "c-pw")])
    assert plain.sasl_mechanism == "PLAIN"
    assert plain.users == (User("alice", "a-pw"), User("bob", "b-pw"), User("carol", "c-pw"))
    assert checked_security("ssl") == BrokerSecurity("SSL")


@pytest.mark.parametrize(
    ("protocol", "mechanism", "users", "message"),
    [
        ("TLS", None, None, "invalid --security 'TLS': expected one of PLAINTEXT, SASL_PLAINTEXT, SSL, SASL_SSL"),
        ("SASL_SSL", "GSSAPI", None, "invalid --sasl-mechanism 'GSSAPI': expected one of PLAIN, SCRAM-SHA-512"),
        ("SSL", "PLAIN", None, "--sasl-mechanism needs --security SASL_PLAINTEXT or SASL_SSL, not SSL"),
        ("PLAINTEXT", None, ["a:b"], "--user needs --security SASL_PLAINTEXT or SASL_SSL, not PLAINTEXT"),
        ("SASL_SSL", None, ["a:b", "a:c"], "--user 'a' is given twice"),
    ],
)
def test_bad_security_is_input_error_naming_the_flag(protocol, mechanism, users, message) -> None:
    with pytest.raises(InputError) as raised:
        checked_security(protocol, mechanism, users)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("protocol", "authorizer", "supers", "message"),
    [
        ("SSL", True, [], "--authorizer needs --security SASL_PLAINTEXT or SASL_SSL (ACLs name SASL users), not SSL"),
        ("SASL_SSL", False, ["admin"], "--super-user needs --authorizer"),
        ("SASL_SSL", True, ["carol"], "--super-user 'carol' is not one of the --user names (admin, mirror)"),
        ("SASL_SSL", True, ["admin", "admin"], "--super-user 'admin' is given twice"),
    ],
)
def test_bad_authorizer_settings_name_the_flag(protocol, authorizer, supers, message) -> None:
    users = ["admin:a-pw", "mirror:m-pw"] if protocol.startswith("SASL") else None
    with pytest.raises(InputError) as raised:
        checked_security(protocol, users=users, authorizer=authorizer, super_users=supers)
    assert str(raised.value) == message


def test_the_authorizer_denies_by_default_and_trusts_brokers_super_users_and_the_controller_listener() -> None:
    settings = checked_security(
        "SASL_SSL", "PLAIN", ["admin:a-pw", "mirror:m-pw"], authorizer=True, super_users=["admin"]
    )
    record = SecurityRecord.new(settings)
    properties = record.listener_properties(CLIENT, CONTROLLER, Path("/c"))
    assert properties["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert properties["super.users"] == "User:airmirror-broker;User:admin;User:ANONYMOUS"
    assert properties["allow.everyone.if.no.acl.found"] == "false"
    assert SecurityRecord.from_json(json.loads(json.dumps(record.to_json()))) == record
    assert settings.describe().endswith("--user admin:*** --user mirror:*** --authorizer --super-user admin")
    assert "authorizer.class.name" not in listener_lines("SASL_SSL")[1]


def test_no_repr_shows_a_password(tmp_path: Path) -> None:
    record = SecurityRecord.new(checked_security("SASL_SSL", users=["alice:alice-password"]))
    security = record.security(tmp_path)
    assert security.tls is not None
    shown = " ".join(repr(thing) for thing in (record, security, security.tls, security.users[0]))
    for secret in ("alice-password", record.broker_password, record.truststore_password, record.keystore_password):
        assert secret and secret not in shown
    assert "alice" in shown and str(tmp_path / "tls") in shown
    assert security.describe() == "--security SASL_SSL --sasl-mechanism SCRAM-SHA-512 --user alice:***"


def test_passwords_are_generated_only_where_needed_and_survive_meta_json() -> None:
    for protocol, sasl, tls in (
        ("PLAINTEXT", False, False),
        ("SASL_PLAINTEXT", True, False),
        ("SSL", False, True),
        ("SASL_SSL", True, True),
    ):
        record = SecurityRecord.new(checked_security(protocol))
        assert (record.broker_password is not None, record.truststore_password is not None) == (sasl, tls)
        assert SecurityRecord.from_json(json.loads(json.dumps(record.to_json()))) == record
    assert SecurityRecord.from_json(None) == SecurityRecord()
    assert (
        SecurityRecord.new(checked_security("SSL")).truststore_password
        != SecurityRecord.new(checked_security("SSL")).truststore_password
    )


# --- server.properties --------------------------------------------------------------------------------------


def listener_lines(protocol: str, mechanism: str | None = None, users=None, root: Path = Path("/c")):
    record = SecurityRecord.new(checked_security(protocol, mechanism, users))
    return record, record.listener_properties(CLIENT, CONTROLLER, root)


def test_plaintext_listeners_are_those_of_clusters_before_security() -> None:
    _, properties = listener_lines("PLAINTEXT")
    assert properties == {
        "listeners": f"PLAINTEXT://{CLIENT},CONTROLLER://{CONTROLLER}",
        "advertised.listeners": f"PLAINTEXT://{CLIENT}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    }


def test_sasl_plaintext_scram_listener_logs_brokers_in_as_their_own_user() -> None:
    record, properties = listener_lines("SASL_PLAINTEXT", users=["alice:a-pw"])
    broker = record.broker_password
    assert properties == {
        "listeners": f"SASL_PLAINTEXT://{CLIENT},CONTROLLER://{CONTROLLER}",
        "advertised.listeners": f"SASL_PLAINTEXT://{CLIENT}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="airmirror-broker" password="{broker}";'
        ),
    }
    assert record.scram_credentials() == [
        f"SCRAM-SHA-512=[name=airmirror-broker,password={broker}]",
        "SCRAM-SHA-512=[name=alice,password=a-pw]",
    ]


def test_sasl_ssl_plain_listener_lists_its_users_and_uses_the_pkcs12_stores() -> None:
    record, properties = listener_lines("SASL_SSL", "PLAIN", ["alice:a-pw", "bob:b-pw"])
    broker, tls = record.broker_password, record.tls_material(Path("/c"))
    assert properties["listeners"] == f"SASL_SSL://{CLIENT},CONTROLLER://{CONTROLLER}"
    assert properties["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT"
    assert properties["sasl.enabled.mechanisms"] == properties["sasl.mechanism.inter.broker.protocol"] == "PLAIN"
    assert properties["listener.name.sasl_ssl.plain.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="airmirror-broker" password="{broker}" '
        f'user_airmirror-broker="{broker}" user_alice="a-pw" user_bob="b-pw";'
    )
    assert record.scram_credentials() == []
    assert {key: value for key, value in properties.items() if key.startswith("ssl.")} == {
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": "/c/tls/broker.p12",
        "ssl.keystore.password": tls.keystore_password,
        "ssl.key.password": tls.keystore_password,
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": "/c/tls/truststore.p12",
        "ssl.truststore.password": tls.truststore_password,
        "ssl.client.auth": "none",
    }


def test_ssl_listener_has_no_sasl() -> None:
    record, properties = listener_lines("SSL")
    assert properties["inter.broker.listener.name"] == "SSL"
    assert not [key for key in properties if "sasl" in key]
    assert properties["ssl.keystore.location"] == "/c/tls/broker.p12"
    assert record.broker_password is None and record.scram_credentials() == []


def node_properties(tmp_path: Path, protocol: str, broker_config=None) -> dict[str, str]:
    meta = broker_module._Meta(
        "c", 9092, (19092,), "cluster-id", broker_config or {}, SecurityRecord.new(checked_security(protocol))
    )
    node = broker_module._ClusterDir.of(tmp_path, "c").node(1, 1)
    text = broker_module._server_properties(meta, node, tmp_path / "kafka" / "c")
    return dict(line.split("=", 1) for line in text.splitlines())


def test_server_properties_take_the_listener_lines_and_keep_the_rest(tmp_path: Path) -> None:
    plain = node_properties(tmp_path, "PLAINTEXT", {"message.max.bytes": "2000000"})
    secured = node_properties(tmp_path, "SASL_SSL")
    assert plain["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:19092"
    assert plain["message.max.bytes"] == "2000000" and "ssl.keystore.location" not in plain
    assert secured["advertised.listeners"] == "SASL_SSL://127.0.0.1:9092"
    assert secured["ssl.truststore.location"] == str(tmp_path / "kafka" / "c" / "tls" / "truststore.p12")
    assert {key: plain[key] for key in plain if key not in ("message.max.bytes",)}.keys() <= secured.keys()


@pytest.mark.parametrize(
    "key", ["ssl.keystore.location", "sasl.enabled.mechanisms", "listener.name.x.sasl.jaas.config"]
)
def test_broker_config_may_not_set_listener_security(key: str) -> None:
    expected = f"--broker-config {key} is not allowed: airmirror sets the listener's security"
    with pytest.raises(InputError, match=expected):
        broker_module._checked_broker_config({key: "x"})


def test_format_adds_every_scram_credential(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = []

    def run(command, **_):
        ran.append(command)
        return subprocess.CompletedProcess(command, 0, "")

    monkeypatch.setattr(nodes_module.subprocess, "run", run)
    node = nodes_module.NodeDir(tmp_path, 1, "node", tmp_path / "log4j2.properties")
    nodes_module.format_storage(node, "cp", "id", "voters", scram_credentials=["A=[name=a,password=p]", "B"])
    assert ran[0][-4:] == ["--add-scram", "A=[name=a,password=p]", "--add-scram", "B"]
    nodes_module.format_storage(node, "cp", "id", "voters")
    assert ran[1][-2:] == ["--initial-controllers", "voters"]


# --- clients ------------------------------------------------------------------------------------------------


def test_client_settings_for_java_and_librdkafka(tmp_path: Path) -> None:
    security = SecurityRecord.new(checked_security("SASL_SSL", "PLAIN", ["alice:a-pw", "bob:b-pw"])).security(tmp_path)
    assert security.client_properties("bob") == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": (
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="bob" password="b-pw";'
        ),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tmp_path / "tls" / "ca.pem"),
    }
    pkcs12_properties = security.client_properties(truststore_type="PKCS12")
    assert pkcs12_properties["ssl.truststore.location"] == str(tmp_path / "tls" / "truststore.p12")
    assert pkcs12_properties["ssl.truststore.password"] == security.tls.truststore_password
    assert security.librdkafka_config() == {
        "security.protocol": "sasl_ssl",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "a-pw",
        "ssl.ca.location": str(tmp_path / "tls" / "ca.pem"),
    }
    assert BrokerSecurity().librdkafka_config() == {"security.protocol": "plaintext"}


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SASL_PLAINTEXT", "SSL"])
def test_java_client_properties_translate_to_the_librdkafka_config(protocol: str, tmp_path: Path) -> None:
    """What the handle gives an MM2 file is what airmirror turns into the settings the handle gives librdkafka."""
    security = SecurityRecord.new(checked_security(protocol, users=None)).security(tmp_path)
    java = {key: Setting(key, value, line) for line, (key, value) in enumerate(security.client_properties().items(), 1)}
    assert dict(translate(java, "admin").config) == security.librdkafka_config()


# --- meta.json ----------------------------------------------------------------------------------------------


def recorded_cluster(home: Path, protocol: str, users=None) -> broker_module._ClusterDir:
    cluster = broker_module._ClusterDir.of(home, "c")
    cluster.root.mkdir(parents=True)
    record = SecurityRecord.new(checked_security(protocol, users=users))
    meta = broker_module._Meta("c", 9092, (19092,), "cluster-id", {}, record)
    broker_module._save_meta(cluster, meta)
    return cluster


def test_a_cluster_keeps_the_security_it_was_created_with(tmp_path: Path) -> None:
    cluster = recorded_cluster(tmp_path, "SASL_SSL", ["alice:a-pw"])
    recorded = broker_module._load_meta(cluster)
    again = checked_security("sasl_ssl", "SCRAM-SHA-512", ["alice:a-pw"])
    same = broker_module._meta_for_start(cluster, 9092, 1, {}, again)
    assert same.security == recorded.security
    with pytest.raises(InputError) as raised:
        broker_module._meta_for_start(cluster, 9092, 1, {}, checked_security())
    assert str(raised.value) == (
        "broker 'c' was created with --security SASL_SSL --sasl-mechanism SCRAM-SHA-512 --user alice:***, "
        f"not --security PLAINTEXT; delete {cluster.root} to create it again"
    )
    with pytest.raises(InputError, match="created with other --user passwords") as raised:
        broker_module._meta_for_start(cluster, 9092, 1, {}, checked_security("SASL_SSL", users=["alice:other-pw"]))
    assert "other-pw" not in str(raised.value) and "a-pw" not in str(raised.value)
    assert [status.protocol for status in broker_status(tmp_path)] == ["SASL_SSL"]


def test_meta_json_without_security_is_a_plaintext_cluster(tmp_path: Path) -> None:
    cluster = recorded_cluster(tmp_path, "PLAINTEXT")
    raw = json.loads(cluster.meta_file.read_text())
    assert raw["security"] == {"protocol": "PLAINTEXT"}
    del raw["security"]
    cluster.meta_file.write_text(json.dumps(raw))
    assert broker_module._load_meta(cluster).security == SecurityRecord()
    broker_module._meta_for_start(cluster, 9092, 1, {}, checked_security("PLAINTEXT"))


# --- TLS files ----------------------------------------------------------------------------------------------


def test_tls_material_is_a_ca_and_a_broker_certificate_for_localhost(tmp_path: Path) -> None:
    material = TlsMaterial(tmp_path / "tls", "trust-pw", "key-pw")
    material.ensure("c")
    ca = x509.load_pem_x509_certificate(material.ca_certificate.read_bytes())
    chain = x509.load_pem_x509_certificates(material.broker_certificate.read_bytes())
    assert chain[1] == ca and chain[0].issuer == ca.subject
    chain[0].verify_directly_issued_by(ca)
    names = chain[0].extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    key, certificate, cas = pkcs12.load_key_and_certificates(material.keystore.read_bytes(), b"key-pw")
    assert key is not None and certificate == chain[0] and cas == [ca]
    trusted = pkcs12.load_pkcs12(material.truststore.read_bytes(), b"trust-pw")
    assert trusted.key is None and [entry.certificate for entry in trusted.additional_certs] == [ca]
    assert material.ca_key.stat().st_mode & 0o077 == 0 and material.keystore.stat().st_mode & 0o077 == 0


def test_tls_material_is_kept_and_a_partial_set_is_replaced(tmp_path: Path) -> None:
    material = TlsMaterial(tmp_path / "tls", "trust-pw", "key-pw")
    material.ensure("c")
    first = material.ca_certificate.read_bytes()
    material.ensure("c")
    assert material.ca_certificate.read_bytes() == first
    material.keystore.unlink()
    material.ensure("c")
    assert all(path.is_file() for path in material.files) and material.ca_certificate.read_bytes() != first
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tls"]


# --- command line -------------------------------------------------------------------------------------------


def parse(*args: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="airmirror")
    cli_module.register(parser.add_subparsers(dest="verb"))
    return parser.parse_args(["local-kafka", *args])


def test_start_flags() -> None:
    args = parse("start", "s", "--port", "9092")
    assert (args.security, args.sasl_mechanism, args.user) == ("PLAINTEXT", None, None)
    args = parse(
        "start",
        "s",
        "--port",
        "9092",
        "--security",
        "sasl_ssl",
        "--sasl-mechanism",
        "plain",
        "--user",
        "alice:a:pw",
        "--user",
        "bob:b",
    )
    assert (args.security, args.sasl_mechanism, args.user) == ("SASL_SSL", "PLAIN", ["alice:a:pw", "bob:b"])
    assert (args.authorizer, args.super_user) == (False, None)
    args = parse(
        "start",
        "s",
        "--port",
        "9092",
        "--security",
        "SASL_SSL",
        "--user",
        "alice:a",
        "--authorizer",
        "--super-user",
        "alice",
    )
    assert (args.authorizer, args.super_user) == (True, ["alice"])


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--security", "TLS"], "argument --security: invalid choice: 'TLS'"),
        (["--security", "SASL_SSL", "--sasl-mechanism", "GSSAPI"], "argument --sasl-mechanism: invalid choice"),
        (["--sasl-mechanism", "PLAIN"], "--sasl-mechanism needs --security SASL_PLAINTEXT or SASL_SSL"),
        (["--user", "alice:pw"], "--user needs --security SASL_PLAINTEXT or SASL_SSL"),
        (["--security", "SASL_SSL", "--user", "alice"], "invalid --user 'alice': expected NAME:PASSWORD"),
        (["--security", "SSL", "--authorizer"], "--authorizer needs --security SASL_PLAINTEXT or SASL_SSL"),
        (["--security", "SASL_SSL", "--super-user", "airmirror"], "--super-user needs --authorizer"),
    ],
)
def test_bad_start_flags_exit_2_naming_the_flag(flags, named, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("AIRMIRROR_HOME", str(tmp_path))
    try:
        code = main(["local-kafka", "start", "flawed", "--port", "9092", *flags])
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2 and named in capsys.readouterr().err
    assert not (tmp_path / "kafka" / "flawed").exists()
