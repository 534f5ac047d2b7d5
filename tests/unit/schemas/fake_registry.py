"""An in-process stand-in for a schema registry's Confluent REST API: a test double of an external service for the
fast tier (the integration tests use real Apicurio registries).

Contract (the calls :class:`~airmirror.schemas.registry_client.RegistryClient` makes, and only those):

* **State.**  Subjects hold versions (1, 2, ...), each naming a schema id; schemas by id hold text, type and
  references.  :meth:`FakeRegistry.add` puts a version in directly (no request recorded), under the next free id or
  the one given.
* **Ids.**  A new schema takes the next id from ``first_id`` up; a schema the registry already holds (same text, type
  and references) keeps its id under any subject, as Confluent's registry does.
* **Register** (``POST /subjects/{s}/versions``): a schema already under the subject answers its id and adds nothing.
  With an ``id`` in the body (IMPORT), the subject must be in IMPORT mode (else 422, error 42205) and the id must not
  hold another schema (else 422, error 42207); the schema is registered under that id, or, when
  ``ignores_import_ids`` (as Apicurio 3.3 does), under an id of its own.  A new schema for a subject of
  ``incompatible`` is refused as its compatibility rules would (409, error 409, the message given).
* **Lookup** (``POST /subjects/{s}``): 404 with error 40401 for an unknown subject, 40403 for a schema not under it.
* **Deletes.**  ``DELETE /subjects/{s}/versions/{v}`` soft-deletes a version (its id still serves the schema; it is no
  longer listed, served by number, found by a lookup or listed as a holder of its id unless ``?deleted=true`` asks);
  ``DELETE /subjects/{s}`` soft-deletes every version, and with ``?permanent=true`` removes the subject;
  ``DELETE /mode/{s}`` removes a subject's mode.
* **GUIDs** (``guids``): each schema has a GUID derived from its content, given in ``GET /schemas/ids/{id}``;
  ``GET /schemas/guids/{g}`` answers its schema (without its id, 404 with error 40403 for an unknown GUID) and
  ``GET /schemas/guids/{g}/ids`` lists its ids; without ``guids``, as Apicurio 3.3, neither path is served.
* **Config and mode.**  ``GET /config`` answers the global level; ``GET /config/{s}`` a subject's own level, 404 with
  error 40408 when it has none (with ``?defaultToGlobal=true``: the global level); ``PUT /config/{s}`` and
  ``PUT /mode/{s}`` set them.  A query string is not part of a recorded request's path.
* **Versions** are listed newest first: the API promises no order, and this one catches a client relying on one.
* **Faults.**  :meth:`FakeRegistry.fail_next` answers the next requests, whatever they ask, with a given status.
* **Record.**  Every request is in :attr:`FakeRegistry.requests` (method, path, ``Authorization`` header, JSON body).

It listens on an OS-chosen port of 127.0.0.1; use it as a context manager.  The accesses it hands out
(:meth:`FakeRegistry.access`) trust one CA certificate from a file, unused over plain HTTP: a client then builds its TLS
context from that one certificate instead of the system's whole bundle, some 60 ms less per client.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import re
import tempfile
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

import certifi

from airmirror.config.schema_registries import RegistryAccess
from airmirror.config.secrets import MaskedConfig

Answer = tuple[int, Any]
SchemaKey = tuple[str, str, tuple[tuple[str, str, int], ...]]


@dataclass(frozen=True)
class Request:
    """One request the fake received."""

    method: str
    path: str
    authorization: str | None
    body: Any


@dataclass
class FakeRegistry:
    """See the module docstring."""

    first_id: int = 1
    global_level: str = "BACKWARD"
    ignores_import_ids: bool = False
    guids: bool = False
    incompatible: dict[str, str] = field(default_factory=dict)
    """Subject -> the message refusing any new schema for it."""
    subjects: dict[str, list[int]] = field(default_factory=dict)
    """Subject -> the schema id of each version, version 1 first."""
    schemas: dict[int, dict[str, Any]] = field(default_factory=dict)
    levels: dict[str, str] = field(default_factory=dict)
    modes: dict[str, str] = field(default_factory=dict)
    deleted: set[tuple[str, int]] = field(default_factory=set)
    """Soft-deleted versions: (subject, version)."""
    requests: list[Request] = field(default_factory=list)
    _faults: list[Answer] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    # -- set up and inspect -------------------------------------------------------------------------------------------
    def add(
        self,
        subject: str,
        schema: str,
        schema_type: str = "AVRO",
        references: tuple[tuple[str, str, int], ...] = (),
        *,
        schema_id: int | None = None,
    ) -> int:
        """A new version of ``subject`` (``references`` as ``(name, subject, version)``); returns its schema id."""
        body: dict[str, Any] = {"schema": schema, "schemaType": schema_type}
        body["references"] = [{"name": n, "subject": s, "version": v} for n, s, v in references]
        with self._lock:
            return self._new_version(subject, body, schema_id)

    def version(self, subject: str, version: int) -> dict[str, Any]:
        """The stored schema of ``subject`` version ``version``, with its ``id``."""
        schema_id = self.subjects[subject][version - 1]
        return {"id": schema_id, **self.schemas[schema_id]}

    def writes(self) -> list[Request]:
        """The requests that change state: registrations, ``PUT``s and ``DELETE``s (a lookup is a ``POST`` that does
        not)."""
        return [
            r
            for r in self.requests
            if r.method in ("PUT", "DELETE") or (r.method == "POST" and r.path.endswith("/versions"))
        ]

    def guid(self, schema_id: int) -> str:
        """The GUID of schema ``schema_id`` (derived from its content)."""
        return str(uuid.uuid5(uuid.NAMESPACE_OID, json.dumps(_key(self.schemas[schema_id]))))

    def fail_next(self, status: int, times: int = 1, body: Any = None) -> None:
        """Answer the next ``times`` requests with ``status`` and ``body`` (default: Confluent's error JSON)."""
        answer = body if body is not None else {"error_code": status * 100, "message": f"injected HTTP {status}"}
        self._faults.extend([(status, answer)] * times)

    @property
    def url(self) -> str:
        assert self._server is not None, "start the fake first (use it as a context manager)"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def access(self, alias: str, url: str | None = None, **settings: str) -> RegistryAccess:
        """A cluster ``alias``'s access to this registry: its URL (or ``url``) and client ``settings``."""
        return RegistryAccess(alias, MaskedConfig({"url": url or self.url, "ssl.ca.location": _one_ca(), **settings}))

    def __enter__(self) -> FakeRegistry:
        handler = type("Handler", (_Handler,), {"registry": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    # -- the API ------------------------------------------------------------------------------------------------------
    def answer(self, method: str, path: str, authorization: str | None, body: Any) -> Answer:
        """The status and JSON answer of one request."""
        path, _, query = path.partition("?")
        with self._lock:
            self.requests.append(Request(method, path, authorization, body))
            if self._faults:
                return self._faults.pop(0)
            for route_method, pattern, call in self._routes(set(query.split("&"))):
                match = pattern.fullmatch(path)
                if match and route_method == method:
                    return call(*(unquote(group) for group in match.groups()), body=body)
            return _error(404, 404, f"no route {method} {path}")

    def _routes(self, query: set[str]) -> list[tuple[str, re.Pattern[str], Callable[..., Answer]]]:
        deleted = "deleted=true" in query
        routes = [
            ("GET", re.compile(r"/subjects"), self._list_subjects),
            ("GET", re.compile(r"/subjects/([^/]+)/versions"), self._list_versions),
            ("GET", re.compile(r"/subjects/([^/]+)/versions/(\d+)"), self._get_version),
            ("POST", re.compile(r"/subjects/([^/]+)"), functools.partial(self._lookup, deleted=deleted)),
            ("POST", re.compile(r"/subjects/([^/]+)/versions"), self._register),
            ("GET", re.compile(r"/schemas/ids/(\d+)"), self._get_schema),
            ("GET", re.compile(r"/schemas/ids/(\d+)/versions"), functools.partial(self._holders, deleted=deleted)),
            ("GET", re.compile(r"/config"), self._global_config),
            (
                "GET",
                re.compile(r"/config/([^/]+)"),
                functools.partial(self._subject_config, default="defaultToGlobal=true" in query),
            ),
            ("PUT", re.compile(r"/config/([^/]+)"), self._set_config),
            ("PUT", re.compile(r"/mode/([^/]+)"), self._set_mode),
            ("DELETE", re.compile(r"/mode/([^/]+)"), self._delete_mode),
            ("DELETE", re.compile(r"/subjects/([^/]+)/versions/(\d+)"), self._delete_version),
            (
                "DELETE",
                re.compile(r"/subjects/([^/]+)"),
                functools.partial(self._delete_subject, permanent="permanent=true" in query),
            ),
        ]
        if self.guids:
            routes.append(("GET", re.compile(r"/schemas/guids/([^/]+)"), self._guid_schema))
            routes.append(("GET", re.compile(r"/schemas/guids/([^/]+)/ids"), self._guid_ids))
        return routes

    def _live(self, subject: str) -> list[int]:
        """The versions of ``subject`` that are not soft-deleted."""
        return [n for n in range(1, len(self.subjects.get(subject, [])) + 1) if (subject, n) not in self.deleted]

    def _list_subjects(self, *, body: Any) -> Answer:
        return 200, sorted(subject for subject in self.subjects if self._live(subject))

    def _list_versions(self, subject: str, *, body: Any) -> Answer:
        if not self._live(subject):
            return _error(404, 40401, f"Subject '{subject}' not found.")
        return 200, sorted(self._live(subject), reverse=True)

    def _get_version(self, subject: str, version: str, *, body: Any) -> Answer:
        if not self._live(subject):
            return _error(404, 40401, f"Subject '{subject}' not found.")
        if int(version) not in self._live(subject):
            return _error(404, 40402, f"Version {version} not found.")
        return 200, {"subject": subject, "version": int(version), **self.version(subject, int(version))}

    def _lookup(self, subject: str, *, body: Any, deleted: bool) -> Answer:
        if subject not in self.subjects:
            return _error(404, 40401, f"Subject '{subject}' not found.")
        key = _key(body)
        for number, schema_id in enumerate(self.subjects[subject], 1):
            if _key(self.schemas[schema_id]) == key and (deleted or (subject, number) not in self.deleted):
                return 200, {"subject": subject, "version": number, "id": schema_id, **self.schemas[schema_id]}
        return _error(404, 40403, "Schema not found")

    def _register(self, subject: str, *, body: Any) -> Answer:
        key = _key(body)
        for number in self._live(subject):
            schema_id = self.subjects[subject][number - 1]
            if _key(self.schemas[schema_id]) == key:
                return 200, {"id": schema_id}
        if subject in self.incompatible:
            return _error(409, 409, self.incompatible[subject])
        asked = body.get("id")
        if asked is not None:
            if self.modes.get(subject) != "IMPORT":
                return _error(422, 42205, f"Subject {subject} is not in import mode")
            if asked in self.schemas and _key(self.schemas[asked]) != key:
                return _error(422, 42207, f"Overwrite new schema with id {asked} is not permitted.")
            if self.ignores_import_ids:
                asked = None
        return 200, {"id": self._new_version(subject, body, asked)}

    def _get_schema(self, schema_id: str, *, body: Any) -> Answer:
        if int(schema_id) not in self.schemas:
            return _error(404, 40403, "Schema not found")
        found = self.schemas[int(schema_id)]
        return 200, {**found, "guid": self.guid(int(schema_id))} if self.guids else found

    def _holders(self, schema_id: str, *, body: Any, deleted: bool) -> Answer:
        if int(schema_id) not in self.schemas:
            return _error(404, 40403, "Schema not found")
        return 200, [
            {"subject": subject, "version": number}
            for subject, ids in self.subjects.items()
            for number, held in enumerate(ids, 1)
            if held == int(schema_id) and (deleted or (subject, number) not in self.deleted)
        ]

    def _guid_schema(self, guid: str, *, body: Any) -> Answer:
        held = [i for i in sorted(self.schemas) if self.guid(i) == guid]
        if not held:
            return _error(404, 40403, "Schema not found")
        return 200, {**self.schemas[held[0]], "guid": guid}

    def _guid_ids(self, guid: str, *, body: Any) -> Answer:
        return 200, [{"context": ".", "id": i} for i in sorted(self.schemas) if self.guid(i) == guid]

    def _delete_version(self, subject: str, version: str, *, body: Any) -> Answer:
        if int(version) not in self._live(subject):
            return _error(404, 40402, f"Version {version} not found.")
        self.deleted.add((subject, int(version)))
        return 200, int(version)

    def _delete_subject(self, subject: str, *, body: Any, permanent: bool) -> Answer:
        if subject not in self.subjects:
            return _error(404, 40401, f"Subject '{subject}' not found.")
        numbers = list(range(1, len(self.subjects[subject]) + 1))
        if permanent:
            del self.subjects[subject]
            self.deleted -= {(subject, n) for n in numbers}
        else:
            self.deleted |= {(subject, n) for n in numbers}
        return 200, numbers

    def _delete_mode(self, subject: str, *, body: Any) -> Answer:
        return 200, {"mode": self.modes.pop(subject, "READWRITE")}

    def _global_config(self, *, body: Any) -> Answer:
        return 200, {"compatibilityLevel": self.global_level}

    def _subject_config(self, subject: str, *, body: Any, default: bool) -> Answer:
        if subject not in self.levels:
            if default:
                return 200, {"compatibilityLevel": self.global_level}
            return _error(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")
        return 200, {"compatibilityLevel": self.levels[subject]}

    def _set_config(self, subject: str, *, body: Any) -> Answer:
        self.levels[subject] = body["compatibility"]
        return 200, body

    def _set_mode(self, subject: str, *, body: Any) -> Answer:
        self.modes[subject] = body["mode"]
        return 200, body

    def _new_version(self, subject: str, body: dict[str, Any], schema_id: int | None) -> int:
        stored = {
            "schema": body["schema"],
            "schemaType": body.get("schemaType") or "AVRO",
            "references": list(body.get("references") or []),
        }
        if schema_id is None:
            held = (i for i, schema in self.schemas.items() if _key(schema) == _key(stored))
            schema_id = next(held, max([self.first_id - 1, *self.schemas]) + 1)
        self.schemas[schema_id] = stored
        self.subjects.setdefault(subject, []).append(schema_id)
        return schema_id


@functools.cache
def _one_ca() -> str:
    """A PEM file of one CA certificate (the first of certifi's bundle), removed when the process exits."""
    with open(certifi.where(), encoding="ascii") as bundle:
        pem = bundle.read()
    end = "-----END CERTIFICATE-----"
    first = pem[pem.index("-----BEGIN CERTIFICATE-----") : pem.index(end) + len(end)] + "\n"
    handle, path = tempfile.mkstemp(prefix="fake-registry-ca-", suffix=".pem")
    with os.fdopen(handle, "w", encoding="ascii") as file:
        file.write(first)
    atexit.register(os.unlink, path)
    return path


def _key(body: dict[str, Any]) -> SchemaKey:
    references = tuple((r["name"], r["subject"], int(r["version"])) for r in body.get("references") or ())
    return body["schema"], body.get("schemaType") or "AVRO", references


def _error(status: int, code: int, message: str) -> Answer:
    return status, {"error_code": code, "message": message}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    """Headers and body go out in two writes; with Nagle's algorithm a kept-alive connection waits ~40 ms on each."""
    registry: FakeRegistry

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        status, answer = self.registry.answer(self.command, self.path, self.headers.get("Authorization"), body)
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: pytest shows what a failing test needs."""
