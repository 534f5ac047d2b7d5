"""Each cluster's schema registry (``{alias}.schema.registry.*``) and a flow's ``airmirror.schema.ids``: defaults,
refusals naming key, line and cluster, warnings, secrets, and the registry's Airflow connection."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from airmirror.cli import main
from airmirror.config import FlowConfig, MirrorConfig, load_config
from airmirror.config.connections import from_environment, use_resolver
from airmirror.config.explain import explain_flow
from airmirror.config.schema_registries import SchemaIds
from airmirror.errors import ConfigError

BASE = """\
clusters = a, b
a.bootstrap.servers = a:9092
b.bootstrap.servers = b:9092
a->b.enabled = true
"""
URL_PASSWORD = "url-pa55word"
USER_INFO = "mirror:user-info-pa55word"
A_REGISTRY = f"a.schema.registry.url = http://mirror:{URL_PASSWORD}@reg-a:8081\n"
B_REGISTRY = f"b.schema.registry.url = http://reg-b:8081\nb.schema.registry.basic.auth.user.info = {USER_INFO}\n"
SECRETS = (URL_PASSWORD, USER_INFO, USER_INFO.partition(":")[2])


@pytest.fixture(autouse=True)
def resolved_from_the_environment() -> Iterator[None]:
    """Connections from ``AIRFLOW_CONN_*``, whatever an earlier in-process test installed."""
    use_resolver(from_environment)
    yield
    use_resolver(from_environment)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mm2.properties"
    path.write_text(BASE + text, encoding="utf-8")
    return path


def load(tmp_path: Path, text: str) -> MirrorConfig:
    return load_config(write(tmp_path, text), env={"AIRMIRROR_HOME": str(tmp_path)})


def flow(tmp_path: Path, text: str) -> FlowConfig:
    return load(tmp_path, text).flow("a->b")


def rejection(tmp_path: Path, text: str) -> ConfigError:
    with pytest.raises(ConfigError) as error:
        load(tmp_path, text)
    assert error.value.exit_code == 2
    return error.value


def line_of(text: str, key: str) -> int:
    """The file line (BASE first) that sets ``key``."""
    lines = (BASE + text).splitlines()
    return next(number for number, line in enumerate(lines, 1) if line.split(" = ")[0] == key)


# -- the mode ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("registries", "mode"),
    [
        (A_REGISTRY + B_REGISTRY, SchemaIds.TRANSLATE),
        (A_REGISTRY, SchemaIds.OFF),
        (B_REGISTRY, SchemaIds.OFF),
        ("", SchemaIds.OFF),
        ("b.schema.registry.airflow.conn.id = reg_b\n" + A_REGISTRY, SchemaIds.TRANSLATE),
    ],
    ids=["both", "source only", "target only", "none", "one by connection"],
)
def test_the_mode_is_translate_when_both_clusters_have_a_registry_and_off_otherwise(
    tmp_path: Path, registries: str, mode: SchemaIds
) -> None:
    assert flow(tmp_path, registries).schema_ids is mode


@pytest.mark.parametrize("asked", ["translate", "keep", "off"])
def test_the_mode_asked_for_is_taken_with_both_registries(tmp_path: Path, asked: str) -> None:
    text = A_REGISTRY + B_REGISTRY + f"a->b.airmirror.schema.ids = {asked}\n"
    assert flow(tmp_path, text).schema_ids is SchemaIds(asked)


def test_off_needs_no_registry(tmp_path: Path) -> None:
    assert flow(tmp_path, "airmirror.schema.ids = off\n").schema_ids is SchemaIds.OFF


@pytest.mark.parametrize(
    ("registries", "missing"), [(A_REGISTRY, "b"), (B_REGISTRY, "a"), ("", "a")], ids=["no target", "no source", "none"]
)
@pytest.mark.parametrize("asked", ["translate", "keep"])
def test_translate_or_keep_without_a_registry_on_a_cluster_is_refused_naming_key_line_and_cluster(
    tmp_path: Path, registries: str, missing: str, asked: str
) -> None:
    text = registries + f"airmirror.schema.ids = {asked}\n"
    error = rejection(tmp_path, text)
    assert (error.key, error.line) == ("airmirror.schema.ids", line_of(text, "airmirror.schema.ids"))
    assert f"cluster {missing!r}" in str(error) and f"{missing}.schema.registry.url" in str(error)


def test_a_flow_level_mode_is_refused_under_its_own_key(tmp_path: Path) -> None:
    text = A_REGISTRY + "a->b.airmirror.schema.ids = keep\n"
    error = rejection(tmp_path, text)
    assert error.key is not None and error.key.endswith("airmirror.schema.ids")
    assert error.line == line_of(text, "a->b.airmirror.schema.ids")


def test_validate_exits_2_naming_the_key_and_the_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, A_REGISTRY + "airmirror.schema.ids = translate\n")
    assert main(["validate", str(path)]) == 2
    error = capsys.readouterr().err
    assert "airmirror.schema.ids" in error and "cluster 'b'" in error


@pytest.mark.parametrize(
    ("key", "value"), [("airmirror.schema.ids", "copy"), ("airmirror.schema.unknown", "skip")], ids=["ids", "unknown"]
)
def test_a_bad_value_is_refused_naming_key_and_line(tmp_path: Path, key: str, value: str) -> None:
    text = A_REGISTRY + B_REGISTRY + f"{key} = {value}\n"
    error = rejection(tmp_path, text)
    assert (error.key, error.line) == (key, line_of(text, key))
    assert value in str(error)


# -- a cluster's registry ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "keys",
    [
        f"b.schema.registry.basic.auth.user.info = {USER_INFO}\n",
        "b.schema.registry.ssl.ca.location = /etc/ca.pem\n",
        "b.schema.registry.basic.auth.credentials.source = URL\n",
    ],
)
def test_registry_settings_without_a_url_are_refused(tmp_path: Path, keys: str) -> None:
    error = rejection(tmp_path, keys)
    assert error.key == "b.schema.registry.url"
    assert "cluster 'b'" in str(error) and keys.split(" = ")[0][2:] in str(error)
    assert USER_INFO not in str(error)


def test_a_bad_credentials_source_is_refused_naming_key_and_line(tmp_path: Path) -> None:
    text = A_REGISTRY + "a.schema.registry.basic.auth.credentials.source = HEADER\n"
    error = rejection(tmp_path, text)
    assert error.line == line_of(text, "a.schema.registry.basic.auth.credentials.source")
    assert error.key is not None and error.key.endswith("schema.registry.basic.auth.credentials.source")


def test_the_registry_client_settings_drop_the_prefix(tmp_path: Path) -> None:
    text = A_REGISTRY + B_REGISTRY + "b.schema.registry.ssl.ca.location = /etc/ca.pem\n"
    registry = flow(tmp_path, text).registry("b")
    assert registry.alias == "b"
    assert registry.settings == {
        "url": "http://reg-b:8081",
        "basic.auth.user.info": USER_INFO,
        "ssl.ca.location": "/etc/ca.pem",
    }
    assert registry.urls == ("http://reg-b:8081",)


def test_several_urls_are_split_in_order(tmp_path: Path) -> None:
    text = "a.schema.registry.url = http://r1:8081/, http://r2:8081\n" + B_REGISTRY
    assert flow(tmp_path, text).registry("a").urls == ("http://r1:8081", "http://r2:8081")


def test_a_cluster_without_a_registry_has_none(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cluster 'b' has no schema registry"):
        flow(tmp_path, A_REGISTRY).registry("b")


def test_an_undeclared_registry_key_is_a_warning(tmp_path: Path) -> None:
    text = A_REGISTRY + B_REGISTRY + "b.schema.registry.unknown.key = 1\n"
    warnings = load(tmp_path, text).warnings
    line = line_of(text, "b.schema.registry.unknown.key")
    ignored = "ignored, airmirror has no such schema registry setting"
    assert f"key 'b.schema.registry.unknown.key' (line {line}): {ignored}" in warnings


def test_registry_keys_are_not_passed_to_kafka_clients(tmp_path: Path) -> None:
    text = A_REGISTRY + B_REGISTRY + "a.schema.registry.ssl.ca.location = /etc/ca.pem\n"
    mirror = flow(tmp_path, text)
    for alias in ("a", "b"):
        for kind in ("consumer", "producer", "admin"):
            config = mirror.client_config(alias, kind)
            assert not [key for key in config if "schema" in key or "registry" in key or key == "url"], (alias, kind)
    assert "schema.registry.url" not in mirror.source_client("consumer")


# -- secrets ----------------------------------------------------------------------------------------------------------
def test_registry_secrets_are_secret_values_and_in_no_repr(tmp_path: Path) -> None:
    mirror = flow(tmp_path, A_REGISTRY + B_REGISTRY)
    assert {URL_PASSWORD, USER_INFO} <= mirror.secret_values()
    shown = repr(mirror) + repr(mirror.registry("a")) + repr(mirror.registry("b"))
    shown += repr(mirror.registry("b").settings)
    assert not [secret for secret in SECRETS if secret in shown]


def test_explain_masks_the_user_info(tmp_path: Path) -> None:
    mirror = load(tmp_path, A_REGISTRY + B_REGISTRY)
    rows = {row.key: row for row in explain_flow(mirror, mirror.flow("a->b"))}
    assert rows["b.schema.registry.basic.auth.user.info"].value == "********"
    assert rows["b.schema.registry.url"].value == "http://reg-b:8081"


def test_validate_explain_shows_no_registry_secret(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, A_REGISTRY + B_REGISTRY)
    assert main(["validate", str(path), "--explain"]) == 0
    assert main(["validate", str(path), "--explain", "--json"]) == 0
    out = capsys.readouterr()
    assert "a.schema.registry.url" in out.out
    assert not [secret for secret in SECRETS if secret in out.out + out.err]


# -- the registry's Airflow connection --------------------------------------------------------------------------------
CONNECTION = {
    "conn_type": "http",
    "host": "reg-b.example",
    "schema": "https",
    "port": 8443,
    "login": "mirror",
    "password": "conn-pa55word",
    "extra": {"ssl.ca.location": "/etc/reg-ca.pem"},
}


def test_the_connection_gives_url_credentials_and_tls_when_first_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror = flow(tmp_path, A_REGISTRY + "b.schema.registry.airflow.conn.id = reg_b\n")
    assert mirror.schema_ids is SchemaIds.TRANSLATE
    monkeypatch.setenv("AIRFLOW_CONN_REG_B", json.dumps(CONNECTION))
    registry = mirror.registry("b")
    assert registry.settings == {
        "url": "https://reg-b.example:8443",
        "basic.auth.user.info": "mirror:conn-pa55word",
        "ssl.ca.location": "/etc/reg-ca.pem",
    }
    assert "conn-pa55word" not in repr(registry) + repr(registry.settings)
    assert "mirror:conn-pa55word" in registry.secret_values()


def test_the_files_registry_keys_win_over_the_connections(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = A_REGISTRY + "b.schema.registry.airflow.conn.id = reg_b\nb.schema.registry.ssl.ca.location = /mine.pem\n"
    monkeypatch.setenv("AIRFLOW_CONN_REG_B", json.dumps(CONNECTION))
    settings = flow(tmp_path, text).registry("b").settings
    assert (settings["url"], settings["ssl.ca.location"]) == ("https://reg-b.example:8443", "/mine.pem")


def test_the_connection_is_not_read_while_the_file_is_loaded(tmp_path: Path) -> None:
    mirror = flow(tmp_path, A_REGISTRY + "b.schema.registry.airflow.conn.id = missing_conn\n")
    assert mirror.schema_ids is SchemaIds.TRANSLATE
    with pytest.raises(ConfigError, match="missing_conn") as error:
        _ = mirror.registry("b").settings
    assert error.value.key is not None and error.value.key.endswith("schema.registry.airflow.conn.id")


def test_a_connection_of_another_type_is_refused_naming_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = A_REGISTRY + "b.schema.registry.airflow.conn.id = reg_b\n"
    monkeypatch.setenv("AIRFLOW_CONN_REG_B", json.dumps({**CONNECTION, "conn_type": "kafka"}))
    with pytest.raises(ConfigError) as error:
        _ = flow(tmp_path, text).registry("b").settings
    assert error.value.key is not None and error.value.key.endswith("schema.registry.airflow.conn.id")
    assert error.value.line == line_of(text, "b.schema.registry.airflow.conn.id")
    assert "'kafka', expected 'http'" in str(error.value)
    assert "conn-pa55word" not in str(error.value)


def test_a_connection_without_a_host_and_a_file_without_a_url_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_REG_B", json.dumps({"conn_type": "http", "extra": {}}))
    with pytest.raises(ConfigError, match="URL") as error:
        _ = flow(tmp_path, A_REGISTRY + "b.schema.registry.airflow.conn.id = reg_b\n").registry("b").settings
    assert error.value.key == "b.schema.registry.url"


@pytest.mark.parametrize(
    ("url", "password"),
    [
        ("http://mirror:p%40ss%2Cw0rd@reg-a:8081", "p@ss,w0rd"),
        ("http://mirror:p@ss@reg-a:8081", "p@ss"),
        ("http://mirror:p:a,ss@reg-a:8081", "p:a,ss"),
    ],
)
def test_a_url_password_with_at_colon_or_comma_stays_one_url_and_is_masked_in_every_form(
    tmp_path: Path, url: str, password: str
) -> None:
    text = f"a.schema.registry.url = {url}, http://reg-a2:8081\n" + B_REGISTRY
    mirror = flow(tmp_path, text)
    registry = mirror.registry("a")
    assert registry.urls == (url, "http://reg-a2:8081")
    assert password in mirror.secret_values()
    written = url.partition("://mirror:")[2].rpartition("@")[0]
    shown = repr(mirror) + repr(registry) + repr(registry.settings)
    assert password not in shown and written not in shown
