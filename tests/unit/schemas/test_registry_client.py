"""The registry client against an in-process fake of Confluent's API: reads, retries, refusals, auth, URL failover."""

from __future__ import annotations

import base64
import socket
from collections.abc import Iterator

import pytest

from airmirror.errors import RegistryRefusal, RegistryUnavailable, ReplicationFailure
from airmirror.schemas import registry_client
from airmirror.schemas.registry_client import Reference, RegistryClient, SchemaText
from tests.unit.schemas.fake_registry import FakeRegistry

PASSWORD = "s3cret-registry-pw"


@pytest.fixture
def fake() -> Iterator[FakeRegistry]:
    with FakeRegistry(first_id=10) as registry:
        yield registry


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """A retry window and backoff of a few hundredths of a second, so a registry that stays down fails at once."""
    monkeypatch.setattr(registry_client, "UNAVAILABLE_AFTER_S", 0.05)
    monkeypatch.setattr(registry_client, "_BACKOFF_S", (0.01,))


def closed_url() -> str:
    """A URL nothing listens on (a port the OS just handed out and took back)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_reads_subjects_versions_schemas_and_holders(fake: FakeRegistry) -> None:
    first = fake.add("orders-value", '{"type":"string"}')
    second = fake.add("orders-value", '{"type":"long"}')
    proto = fake.add("shared.Address", "message A {}", "PROTOBUF")
    referring = fake.add("people-value", "message P {}", "PROTOBUF", (("a.proto", "shared.Address", 1),))
    with RegistryClient(fake.access("a")) as client:
        assert client.subjects() == ["orders-value", "people-value", "shared.Address"]
        assert client.versions("orders-value") == [1, 2]
        got = client.version("orders-value", 2)
        assert (got.subject, got.version, got.schema_id, got.schema) == (
            "orders-value",
            2,
            second,
            SchemaText('{"type":"long"}'),
        )
        assert client.schema(first) == SchemaText('{"type":"string"}')
        assert client.schema(proto) == SchemaText("message A {}", "PROTOBUF")
        assert client.schema(referring) == SchemaText(
            "message P {}", "PROTOBUF", (Reference("a.proto", "shared.Address", 1),)
        )
        assert client.subject_versions(proto) == [("shared.Address", 1)]
        assert client.lookup("orders-value", SchemaText('{"type":"long"}')) == (second, 2)
        assert client.compatibility() == "BACKWARD"


def test_schemas_by_id_are_cached_and_unknown_ids_asked_again(fake: FakeRegistry) -> None:
    schema_id = fake.add("t-value", '"int"')
    with RegistryClient(fake.access("a")) as client:
        assert client.schema(schema_id) == client.schema(schema_id) == SchemaText('"int"')
        assert client.schema(999) is None and client.schema(999) is None
    assert [r.path for r in fake.requests] == [f"/schemas/ids/{schema_id}"] + ["/schemas/ids/999"] * 2


def test_not_found_answers_are_values_when_missing_is_expected(fake: FakeRegistry) -> None:
    fake.add("known-value", '"int"')
    with RegistryClient(fake.access("a")) as client:
        assert client.schema(12345) is None
        assert client.versions("unknown-value") == []
        assert client.subject_versions(12345) == []
        assert client.lookup("unknown-value", SchemaText('"int"')) is None
        assert client.lookup("known-value", SchemaText('"long"')) is None
        assert client.compatibility("known-value") == "BACKWARD"  # none of its own: the global level is in force


def test_not_found_where_something_must_exist_is_a_refusal(fake: FakeRegistry) -> None:
    with RegistryClient(fake.access("a")) as client, pytest.raises(RegistryRefusal) as refused:
        client.version("unknown-value", 1)
    assert (refused.value.status, refused.value.error_code) == (404, 40401)
    assert "'a'" in str(refused.value) and "Subject 'unknown-value' not found." in str(refused.value)


def test_a_404_without_a_registry_error_code_is_retried_and_never_taken_for_not_found(
    fake: FakeRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ingress whose backend is down answers 404 with a page of its own: the id is not unknown, the registry is
    unavailable until it answers."""
    monkeypatch.setattr(registry_client, "UNAVAILABLE_AFTER_S", 1.0)
    schema_id = fake.add("t-value", '"int"')
    fake.fail_next(404, times=2, body="<html>404 Not Found</html>")
    with RegistryClient(fake.access("a")) as client:
        assert client.schema(schema_id) == SchemaText('"int"')
    fake.fail_next(404, times=1000, body="<html>404 Not Found</html>")
    with RegistryClient(fake.access("a")) as client, pytest.raises(RegistryUnavailable, match="without a registry"):
        client.schema(schema_id + 1)


def test_a_404_with_another_error_code_is_a_refusal_even_when_missing_is_expected(fake: FakeRegistry) -> None:
    fake.fail_next(404, body={"error_code": 40499, "message": "something else"})
    with RegistryClient(fake.access("a")) as client, pytest.raises(RegistryRefusal, match="something else"):
        client.schema(1)


def test_a_4xx_is_a_refusal_with_the_registrys_message_and_code(fake: FakeRegistry) -> None:
    fake.fail_next(422, body={"error_code": 42201, "message": "Invalid schema: unexpected token"})
    with RegistryClient(fake.access("src")) as client, pytest.raises(RegistryRefusal) as refused:
        client.register("t-value", SchemaText("{not avro"))
    error = refused.value
    assert isinstance(error, ReplicationFailure)
    assert (error.status, error.error_code) == (422, 42201)
    message = str(error)
    assert "'src'" in message and "POST /subjects/t-value/versions" in message
    assert "HTTP 422 (error 42201): Invalid schema: unexpected token" in message
    assert len(fake.requests) == 1, "a refusal is not retried"


def test_a_refusal_that_is_not_json_shows_the_body(fake: FakeRegistry) -> None:
    fake.fail_next(400, body="plain words")
    with RegistryClient(fake.access("a")) as client, pytest.raises(RegistryRefusal, match="HTTP 400: plain words"):
        client.subjects()


@pytest.mark.parametrize("status", [500, 503, 429])
def test_5xx_and_429_are_retried_until_the_registry_answers(
    fake: FakeRegistry, status: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry_client, "UNAVAILABLE_AFTER_S", 10.0)
    fake.add("t-value", '"int"')
    fake.fail_next(status, times=2)
    with RegistryClient(fake.access("a")) as client:
        assert client.subjects() == ["t-value"]
    assert [r.path for r in fake.requests] == ["/subjects"] * 3


def test_a_registry_that_keeps_failing_is_unavailable_naming_cluster_and_url_without_credentials(
    fake: FakeRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry_client, "UNAVAILABLE_AFTER_S", 1.0)  # room for a retry on a busy machine
    fake.fail_next(503, times=1000)
    url = fake.url.replace("http://", f"http://mirror:{PASSWORD}@")
    access = fake.access("src", url=url, **{"basic.auth.credentials.source": "URL"})
    with RegistryClient(access) as client, pytest.raises(RegistryUnavailable) as unavailable:
        client.subjects()
    message = str(unavailable.value)
    assert isinstance(unavailable.value, ReplicationFailure)
    assert "'src'" in message and f"{fake.url}: HTTP 503" in message
    assert PASSWORD not in message and "mirror" not in message
    assert len(fake.requests) >= 2, "retried before giving up"


def test_an_unreachable_registry_is_unavailable_naming_its_url() -> None:
    url = closed_url()
    access = FakeRegistry().access("tgt", url=url.replace("http://", f"http://u:{PASSWORD}@"))
    with RegistryClient(access) as client, pytest.raises(RegistryUnavailable) as unavailable:
        client.subjects()
    message = str(unavailable.value)
    assert "'tgt'" in message and f"{url}: ConnectError" in message
    assert PASSWORD not in message


def test_the_next_url_is_used_when_the_first_is_unreachable(fake: FakeRegistry) -> None:
    fake.add("t-value", '"int"')
    with RegistryClient(fake.access("a", url=f"{closed_url()}, {fake.url}/")) as client:
        assert client.subjects() == ["t-value"]
        assert client.versions("t-value") == [1]


def test_basic_auth_from_user_info(fake: FakeRegistry) -> None:
    access = fake.access("a", **{"basic.auth.user.info": f"mirror:{PASSWORD}"})
    with RegistryClient(access) as client:
        client.subjects()
    assert fake.requests[-1].authorization == basic("mirror", PASSWORD)
    assert PASSWORD not in repr(client) and PASSWORD not in repr(access)


def test_basic_auth_from_the_urls_user_info_with_credentials_source_url(fake: FakeRegistry) -> None:
    url = fake.url.replace("http://", f"http://mirror:{PASSWORD}@")
    access = fake.access("a", url=url, **{"basic.auth.credentials.source": "URL"})
    with RegistryClient(access) as client:
        client.subjects()
    assert fake.requests[-1].authorization == basic("mirror", PASSWORD)
    assert repr(client) == f"RegistryClient('a', {fake.url})"


def test_no_auth_header_without_credentials(fake: FakeRegistry) -> None:
    with RegistryClient(fake.access("a")) as client:
        client.subjects()
    assert fake.requests[-1].authorization is None


def test_writes_send_confluents_bodies(fake: FakeRegistry) -> None:
    schema = SchemaText("message P {}", "PROTOBUF", (Reference("a.proto", "shared.Address", 3),))
    with RegistryClient(fake.access("a")) as client:
        client.set_mode("orders-value", "IMPORT")
        client.set_compatibility("orders-value", "FULL")
        assert client.register("orders-value", schema, schema_id=77, version=1) == 77
        assert client.compatibility("orders-value") == "FULL"
    bodies = {r.path: r.body for r in fake.writes()}
    assert bodies == {
        "/mode/orders-value": {"mode": "IMPORT"},
        "/config/orders-value": {"compatibility": "FULL"},
        "/subjects/orders-value/versions": {
            "schema": "message P {}",
            "schemaType": "PROTOBUF",
            "references": [{"name": "a.proto", "subject": "shared.Address", "version": 3}],
            "id": 77,
            "version": 1,
        },
    }


def test_subjects_are_quoted_in_paths(fake: FakeRegistry) -> None:
    fake.add("com.example/Odd Name", '"int"')
    with RegistryClient(fake.access("a")) as client:
        assert client.versions("com.example/Odd Name") == [1]
    assert fake.requests[-1].path == "/subjects/com.example%2FOdd%20Name/versions"


def test_user_info_is_taken_off_an_ipv6_url_leaving_a_valid_url() -> None:
    access = FakeRegistry().access("a", url=f"http://u:{PASSWORD}@[::1]:8081")
    with RegistryClient(access) as client:
        assert repr(client) == "RegistryClient('a', http://[::1]:8081)"


@pytest.mark.parametrize(("written", "sent"), [("p%40ss%2Cw0rd", "p@ss,w0rd"), ("p@ss", "p@ss"), ("a:b,c", "a:b,c")])
def test_a_url_password_is_sent_percent_decoded_and_whole(fake: FakeRegistry, written: str, sent: str) -> None:
    fake.add("t-value", '"int"')
    url = fake.url.replace("http://", f"http://mi%20rror:{written}@")
    with RegistryClient(fake.access("a", url=url, **{"basic.auth.credentials.source": "URL"})) as client:
        client.subjects()
    assert fake.requests[-1].authorization == basic("mi rror", sent)


def test_a_guid_names_its_id_where_the_registry_gives_one_else_through_its_ids_and_none_without_guids(
    fake: FakeRegistry,
) -> None:
    guid = "0f8fad5b-d9cb-469f-a165-70867728950e"
    fake.fail_next(200, body={"schema": '"int"', "id": 42, "guid": guid})  # a registry that answers the id
    with RegistryClient(fake.access("a")) as client:
        assert client.guid_schema_id(guid) == 42
        assert client.guid_schema_id(guid) is None, "a registry without GUIDs does not serve the path"
    with FakeRegistry(guids=True) as registry, RegistryClient(registry.access("a")) as client:
        schema_id = registry.add("t-value", '"int"')
        assert client.guid_schema_id(registry.guid(schema_id)) == schema_id
        assert client.guid_schema_id(guid) is None
        assert client.guid(schema_id) == registry.guid(schema_id)
