"""Translation of Java Kafka client settings to librdkafka settings."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from airmirror.config.client_properties import applies_to, is_client_key, translate
from airmirror.config.properties import Setting
from airmirror.errors import ConfigError

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def java(mapping: dict[str, str]) -> dict[str, Setting]:
    return {key: Setting(f"c.{key}", value, line) for line, (key, value) in enumerate(mapping.items(), start=1)}


def rejected(mapping: dict[str, str], kind: str = "consumer") -> ConfigError:
    with pytest.raises(ConfigError) as error:
        translate(java(mapping), kind)
    assert error.value.exit_code == 2
    return error.value


def test_identical_keys_pass_through() -> None:
    consumer_keys = {
        "client.id": "x",
        "fetch.min.bytes": "10",
        "max.partition.fetch.bytes": "1048576",
        "session.timeout.ms": "30000",
        "isolation.level": "read_committed",
        "group.id": "g",
        "client.rack": "r1",
        "enable.auto.commit": "false",
        "auto.offset.reset": "latest",
    }
    consumer = translate(java({"bootstrap.servers": "a:9092, b:9092"} | consumer_keys), "consumer")
    assert consumer.config == {"bootstrap.servers": "a:9092,b:9092"} | consumer_keys
    assert consumer.warnings == []
    producer_keys = {
        "acks": "all",
        "linger.ms": "20",
        "batch.size": "1048576",
        "compression.type": "lz4",
        "enable.idempotence": "true",
        "retries": "5",
    }
    assert translate(java(producer_keys), "producer").config == producer_keys


def test_renamed_keys() -> None:
    consumer = translate(
        java(
            {
                "fetch.max.wait.ms": "100",
                "send.buffer.bytes": "-1",
                "receive.buffer.bytes": "65536",
                "sasl.mechanism": "SCRAM-SHA-512",
                "request.timeout.ms": "40000",
            }
        ),
        "consumer",
    )
    assert consumer.config == {
        "fetch.wait.max.ms": "100",
        "socket.send.buffer.bytes": "0",
        "socket.receive.buffer.bytes": "65536",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "socket.timeout.ms": "40000",
    }
    producer = translate(java({"max.request.size": "5242880", "request.timeout.ms": "40000"}), "producer")
    assert producer.config == {"message.max.bytes": "5242880", "request.timeout.ms": "40000"}


def test_security_protocol_is_validated_and_lowercased() -> None:
    assert translate(java({"security.protocol": "SASL_SSL"}), "admin").config == {"security.protocol": "sasl_ssl"}
    assert rejected({"security.protocol": "TLS"}).key == "c.security.protocol"


def test_auto_offset_reset_must_be_earliest_or_latest() -> None:
    error = rejected({"auto.offset.reset": "none"})
    assert (error.key, error.line) == ("c.auto.offset.reset", 1)


def test_settings_of_another_client_kind_are_dropped_with_a_warning() -> None:
    result = translate(java({"linger.ms": "5", "retries": "3", "client.id": "x"}), "consumer")
    assert result.config == {"client.id": "x"}
    assert len(result.warnings) == 2
    assert "'c.linger.ms' (line 1)" in result.warnings[0] and "consumer" in result.warnings[0]
    assert "'c.retries' (line 2)" in result.warnings[1]


def test_applies_to() -> None:
    assert applies_to("linger.ms", "producer")
    assert not applies_to("linger.ms", "consumer")
    assert not applies_to("group.id", "admin")
    assert applies_to("retries", "admin")
    assert applies_to("ssl.truststore.location", "consumer")
    assert not applies_to("compression.zstd.level", "consumer")
    assert applies_to("no.such.key", "consumer")


def test_is_client_key() -> None:
    assert is_client_key("linger.ms")
    assert is_client_key("buffer.memory")
    assert is_client_key("sasl.jaas.config")
    assert not is_client_key("replication.factor")


@pytest.mark.parametrize(
    "key",
    [
        "key.serializer",
        "value.deserializer",
        "buffer.memory",
        "max.block.ms",
        "interceptor.classes",
        "partition.assignment.strategy",
        "ssl.protocol",
    ],
)
def test_java_only_keys_are_dropped_with_a_warning_naming_them(key: str) -> None:
    result = translate(java({key: "x"}), "producer")
    assert result.config == {}
    assert result.warnings and f"'c.{key}'" in result.warnings[0] and "line 1" in result.warnings[0]


@pytest.mark.parametrize("key", ["no.such.setting", "ssl.cipher.suites", "sasl.login.callback.handler.class"])
def test_unknown_and_untranslatable_keys_are_rejected(key: str) -> None:
    error = rejected({"client.id": "x", key: "y"})
    assert (error.key, error.line) == (f"c.{key}", 2)


@pytest.mark.parametrize(
    ("module", "options", "username", "password"),
    [
        (PLAIN, 'username="alice" password="s3cret"', "alice", "s3cret"),
        (SCRAM, 'username=bob password="p;a=s\\"s\\\\"', "bob", 'p;a=s"s\\'),
        (PLAIN, ' username = "x y"\n  password = "z" ', "x y", "z"),
    ],
)
def test_plain_and_scram_jaas_become_username_and_password(
    module: str, options: str, username: str, password: str
) -> None:
    result = translate(java({"sasl.jaas.config": f"{module} required {options};"}), "consumer")
    assert result.config == {"sasl.username": username, "sasl.password": password}


@pytest.mark.parametrize(
    "jaas",
    [
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/k" principal="p";',
        f'{PLAIN} required username="a";',
        f'{PLAIN} required username="a" password="b"',
        f'{PLAIN} mandatory username="a" password="b";',
        f'{PLAIN} required username="a" password="b"; {PLAIN} required username="c" password="d";',
        f'{PLAIN} required username="a" password="unterminated;',
        f"{PLAIN} required username;",
    ],
)
def test_unsupported_or_malformed_jaas_is_rejected(jaas: str) -> None:
    error = rejected({"sasl.jaas.config": jaas})
    assert (error.key, error.line) == ("c.sasl.jaas.config", 1)


def test_pem_truststore_file_and_inline() -> None:
    from_file = translate(java({"ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem"}), "admin")
    assert from_file.config == {"ssl.ca.location": "/ca.pem"}
    inline = translate(java({"ssl.truststore.type": "pem", "ssl.truststore.certificates": "-----BEGIN"}), "admin")
    assert inline.config == {"ssl.ca.pem": "-----BEGIN"}


@pytest.mark.parametrize(
    ("mapping", "key"),
    [
        ({"ssl.truststore.location": "/no/such/ts.jks"}, "c.ssl.truststore.location"),
        ({"ssl.truststore.type": "JKS", "ssl.truststore.location": "/no/such/ts.jks"}, "c.ssl.truststore.location"),
        ({"ssl.truststore.type": "PKCS12", "ssl.truststore.certificates": "-"}, "c.ssl.truststore.type"),
        ({"ssl.truststore.type": "BCFKS", "ssl.truststore.location": "/ts.bcfks"}, "c.ssl.truststore.type"),
        (
            {"ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca", "ssl.truststore.password": "x"},
            "c.ssl.truststore.password",
        ),
        ({"ssl.truststore.password": "x"}, "c.ssl.truststore.password"),
        (
            {"ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca", "ssl.truststore.certificates": "-"},
            "c.ssl.truststore.certificates",
        ),
    ],
)
def test_truststore_rejections(mapping: dict[str, str], key: str) -> None:
    error = rejected(mapping)
    assert error.key == key
    if "PKCS12" in str(error) or "BCFKS" in str(error):
        assert "PEM" in str(error)


def test_keystores() -> None:
    pkcs12 = {
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": "/ks.p12",
        "ssl.keystore.password": "pw",
        "ssl.key.password": "kp",
    }
    assert translate(java(pkcs12), "producer").config == {
        "ssl.keystore.location": "/ks.p12",
        "ssl.keystore.password": "pw",
        "ssl.key.password": "kp",
    }
    pem_file = {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/client.pem", "ssl.key.password": "kp"}
    assert translate(java(pem_file), "producer").config == {
        "ssl.certificate.location": "/client.pem",
        "ssl.key.location": "/client.pem",
        "ssl.key.password": "kp",
    }
    inline = {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": "CERT", "ssl.keystore.key": "KEY"}
    assert translate(java(inline), "producer").config == {"ssl.certificate.pem": "CERT", "ssl.key.pem": "KEY"}


@pytest.mark.parametrize(
    ("mapping", "key"),
    [
        ({"ssl.keystore.location": "/ks.jks", "ssl.keystore.password": "pw"}, "c.ssl.keystore.location"),
        ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "/ks.jks"}, "c.ssl.keystore.type"),
        ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/ks.p12"}, "c.ssl.keystore.location"),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem", "ssl.keystore.password": "pw"},
            "c.ssl.keystore.password",
        ),
        ({"ssl.keystore.password": "pw"}, "c.ssl.keystore.password"),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "KEY"}, "c.ssl.keystore.key"),
        (
            {"ssl.keystore.type": "PKCS12", "ssl.keystore.key": "KEY", "ssl.keystore.certificate.chain": "C"},
            "c.ssl.keystore.key",
        ),
        (
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.key": "K",
                "ssl.keystore.certificate.chain": "C",
                "ssl.keystore.location": "/k.pem",
            },
            "c.ssl.keystore.location",
        ),
    ],
)
def test_keystore_rejections(mapping: dict[str, str], key: str) -> None:
    assert rejected(mapping).key == key


def test_endpoint_identification() -> None:
    key = "ssl.endpoint.identification.algorithm"
    assert translate(java({key: "https"}), "consumer").config == {key: "https"}
    assert translate(java({key: ""}), "consumer").config == {key: "none"}
    assert rejected({key: "ldap"}).key == f"c.{key}"


def test_compression_level_of_the_codec_in_use() -> None:
    result = translate(
        java({"compression.type": "zstd", "compression.zstd.level": "7", "compression.gzip.level": "3"}), "producer"
    )
    assert result.config == {"compression.type": "zstd", "compression.level": "7"}
    assert len(result.warnings) == 1 and "'c.compression.gzip.level'" in result.warnings[0]


def test_unknown_client_kind_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        translate({}, "streams")


def test_translated_settings_are_accepted_by_librdkafka() -> None:
    common = {
        "bootstrap.servers": "127.0.0.1:1",
        "client.id": "t",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{PLAIN} required username="u" password="p";',
        "metadata.max.age.ms": "60000",
        "reconnect.backoff.ms": "50",
        "reconnect.backoff.max.ms": "1000",
        "retry.backoff.ms": "100",
        "socket.connection.setup.timeout.ms": "10000",
        "connections.max.idle.ms": "60000",
        "send.buffer.bytes": "-1",
        "receive.buffer.bytes": "65536",
        "request.timeout.ms": "30000",
        "client.dns.lookup": "use_all_dns_ips",
        "ssl.endpoint.identification.algorithm": "",
    }
    consumer = translate(
        java(
            common
            | {
                "group.id": "g",
                "session.timeout.ms": "45000",
                "heartbeat.interval.ms": "3000",
                "max.poll.interval.ms": "300000",
                "enable.auto.commit": "false",
                "auto.commit.interval.ms": "5000",
                "auto.offset.reset": "earliest",
                "fetch.min.bytes": "1",
                "fetch.max.bytes": "52428800",
                "max.partition.fetch.bytes": "1048576",
                "fetch.max.wait.ms": "500",
                "isolation.level": "read_committed",
                "check.crcs": "true",
                "client.rack": "r",
                "allow.auto.create.topics": "false",
            }
        ),
        "consumer",
    )
    producer = translate(
        java(
            common
            | {
                "acks": "all",
                "linger.ms": "20",
                "batch.size": "1048576",
                "compression.type": "zstd",
                "compression.zstd.level": "3",
                "enable.idempotence": "true",
                "retries": "10",
                "max.in.flight.requests.per.connection": "5",
                "delivery.timeout.ms": "120000",
                "max.request.size": "1048576",
                "transaction.timeout.ms": "60000",
            }
        ),
        "producer",
    )
    admin = translate(java(common | {"retries": "3"}), "admin")
    quiet = {"log_level": "0"}
    Consumer(consumer.config | quiet).close()
    Producer(producer.config | quiet).flush(0)
    AdminClient(admin.config | quiet)
    assert consumer.warnings == producer.warnings == admin.warnings == []
