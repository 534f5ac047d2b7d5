"""How airmirror reaches a schema registry (issue 34): credentials whatever characters they hold, and a registry behind
an ingress that answers a bare 404 while its backend is not there.  Real Kafka, real Apicurio registries, each behind
a small HTTP proxy of this module that checks HTTP basic auth (and can answer bare 404s), driven through the
``airmirror schemas`` verb; no part of a password may appear in anything it prints.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from confluent_kafka.serialization import MessageField

from tests.conftest import write_config
from tests.kafka_helpers import Record, create_topic, produce, read_partition, recent_ms
from tests.mirror_helpers import replicate
from tests.registry_helpers import avro_deserializer, avro_serializer, register, registry_url, versions

pytestmark = pytest.mark.integration

VALUE = MessageField.VALUE
USER = "mirror"
PASSWORD = "p@ss:w,rd%40-Secret"
"""A password with every character that once broke a registry URL or its masking."""


@dataclass
class Proxy:
    """An HTTP proxy in front of one registry: answers 401 unless the request carries ``USER``/``PASSWORD`` by basic
    auth, and a bare 404 (an ingress's HTML page) to the next ``bare_404s`` requests."""

    upstream: str
    """The registry's root URL (the requests' paths carry the API's base path)."""
    bare_404s: int = 0
    requests: list[str] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def base(self) -> str:
        assert self._server is not None
        return f"127.0.0.1:{self._server.server_address[1]}"

    def url(self, user_info: str = "") -> str:
        """The registry's URL through this proxy (with ``user_info@`` when given)."""
        return f"http://{user_info + '@' if user_info else ''}{self.base}/apis/ccompat/v7"

    def answer(self, method: str, path: str, authorization: str | None, body: bytes) -> tuple[int, bytes]:
        self.requests.append(f"{method} {path}")
        expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        if authorization != expected:
            return 401, b'{"error_code":401,"message":"Unauthorized"}'
        if self.bare_404s > 0:
            self.bare_404s -= 1
            return 404, b"<html><body>404 Not Found</body></html>"
        headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
        forwarded = httpx.request(method, self.upstream + path, content=body or None, headers=headers, timeout=30)
        return forwarded.status_code, forwarded.content


@contextmanager
def proxied(upstream: str) -> Iterator[Proxy]:
    proxy = Proxy(upstream)

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            status, data = proxy.answer(
                self.command, self.path, self.headers.get("Authorization"), self.rfile.read(length)
            )
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = _serve

        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

    proxy._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=proxy._server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield proxy
    finally:
        proxy._server.shutdown()
        proxy._server.server_close()


def schemas(home: Path, config: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AIRMIRROR_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "airmirror.cli", "schemas", str(config), "--flow", "a->b", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def assert_no_secret(*outputs: str) -> None:
    for output in outputs:
        for piece in ("p@ss", "w,rd", "%40-Secret", "Secret", quote(PASSWORD, safe="")):
            assert piece not in output, f"{piece!r} appears in: {output[-2000:]}"


def test_credentials_with_at_colon_comma_and_percent_work_from_user_info_a_provider_and_the_url(
    clusters, registries, spark, prefix, tmp_path, test_home, caplog
):
    """The target registry behind a proxy that checks the password ``p@ss:w,rd%40-Secret``: given in
    ``basic.auth.user.info`` through a ``${file:...}`` provider, the sync registers and a run copies a framed record
    that target consumers decode; percent-encoded in the URL's user info (the source's URL also holds a second URL
    after a comma), the sync registers again; a wrong password fails naming the cluster.  No part of the password
    appears in any output or log."""
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    url_a, url_b = registry_url(registries["a"]), registry_url(registries["b"])
    topic = f"{prefix}.secret"
    create_topic(a, topic)
    schema = json.dumps({"type": "record", "name": "S", "namespace": prefix, "fields": [{"name": "n", "type": "int"}]})
    register(url_a, f"{topic}-value", schema)
    secrets = tmp_path / "registry-secrets.properties"
    secrets.write_text(f"user.info = {USER}:{PASSWORD}\n")
    with proxied(f"http://127.0.0.1:{registries['b'].port}") as target:
        from_provider = write_config(
            tmp_path / "provider.properties",
            clusters,
            f"a->b.enabled = true\ntopics = {prefix}.*\na.schema.registry.url = {url_a}\n"
            f"b.schema.registry.url = {target.url()}\n"
            f"b.schema.registry.basic.auth.user.info = ${{file:{secrets}:user.info}}",
        )
        first = schemas(test_home, from_provider)
        assert first.returncode == 0, first.stderr
        assert json.loads(first.stdout)["registered"] == 1
        assert versions(url_b, f"a.{topic}-value") == [1]
        assert_no_secret(first.stdout, first.stderr)
        produce(a, topic, 0, [Record(b"k", avro_serializer(url_a, schema)({"n": 5}, topic, VALUE), (), recent_ms())])
        with caplog.at_level(logging.DEBUG):
            assert replicate(from_provider, spark).summary.records == 1
        copied = [record for _, record in read_partition(b, f"a.{topic}", 0)]
        assert avro_deserializer(url_b)(copied[0].value, f"a.{topic}", VALUE) == {"n": 5}
        assert_no_secret(caplog.text)

        encoded = f"{USER}:{quote(PASSWORD, safe='')}"
        in_url = write_config(
            tmp_path / "url.properties",
            clusters,
            f"a->b.enabled = true\ntopics = {prefix}.*\n"
            f"a.schema.registry.url = http://127.0.0.1:1/apis/ccompat/v7,{url_a}\n"
            f"b.schema.registry.url = {target.url(encoded)}\nb.schema.registry.basic.auth.credentials.source = URL",
        )
        target.requests.clear()
        second = schemas(test_home, in_url)
        assert second.returncode == 0, second.stderr
        assert target.requests, "the target was asked through the proxy"
        assert_no_secret(second.stdout, second.stderr)

        wrong = write_config(
            tmp_path / "wrong.properties",
            clusters,
            f"a->b.enabled = true\ntopics = {prefix}.*\na.schema.registry.url = {url_a}\n"
            f"b.schema.registry.url = {target.url(f'{USER}:p@ss:w,rd-wrong')}\n"
            "b.schema.registry.basic.auth.credentials.source = URL",
        )
        refused = schemas(test_home, wrong)
        assert refused.returncode == 1 and "cluster 'b'" in refused.stderr and "401" in refused.stderr, refused.stderr
        assert_no_secret(refused.stdout, refused.stderr)
        assert "w,rd-wrong" not in refused.stderr


def test_a_registry_behind_an_ingress_that_answers_bare_404s_is_waited_for_never_taken_for_unknown(
    clusters, registries, prefix, tmp_path, test_home
):
    """The ingress answers its own 404 page while the registry behind it is not there: the sync waits (retried with
    backoff), then registers every version; nothing is taken for "not found"."""
    url_a, url_b = registry_url(registries["a"]), registry_url(registries["b"])
    topic = f"{prefix}.ingress"
    create_topic(clusters["a"].bootstrap, topic)
    for fields in ([], [{"name": "n", "type": "int", "default": 0}]):
        register(
            url_a, f"{topic}-value", json.dumps({"type": "record", "name": "I", "namespace": prefix, "fields": fields})
        )
    with proxied(f"http://127.0.0.1:{registries['b'].port}") as target:
        target.bare_404s = 4
        config = write_config(
            tmp_path / "mm2.properties",
            clusters,
            f"a->b.enabled = true\ntopics = {prefix}.*\na.schema.registry.url = {url_a}\n"
            f"b.schema.registry.url = {target.url()}\nb.schema.registry.basic.auth.user.info = {USER}:{PASSWORD}",
        )
        synced = schemas(test_home, config)
    assert synced.returncode == 0, synced.stderr
    assert target.bare_404s == 0 and json.loads(synced.stdout)["registered"] == 2
    assert versions(url_b, f"a.{topic}-value") == [1, 2]
    assert_no_secret(synced.stdout, synced.stderr)
