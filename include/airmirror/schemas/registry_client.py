"""Calls to a schema registry through Confluent's REST API (Confluent Schema Registry, Apicurio's ``ccompat``,
Karapace, Redpanda): the few airmirror needs to copy subjects and map ids.

Contract:

* A client talks to one cluster's registry (:class:`~airmirror.config.schema_registries.RegistryAccess`): its URLs in
  order (the next one when a URL cannot be reached), HTTP basic auth from ``basic.auth.user.info`` (or the URL's
  user info with ``basic.auth.credentials.source = URL``, percent-decoded: a password may hold ``@``, ``:`` or ``,``),
  TLS from the ``ssl.*`` keys.
* A registry that cannot be reached, or answers 5xx, 429, or 404 without one of Confluent's error codes (an ingress
  whose backend is down, a registry node that does not serve the API yet), is retried with backoff for up to
  :data:`UNAVAILABLE_AFTER_S`; then :class:`~airmirror.errors.RegistryUnavailable` names the cluster and the URL
  (never credentials).
  Any other refusal is a :class:`~airmirror.errors.RegistryRefusal` with the registry's own message and error code.
  Both are :class:`~airmirror.errors.ReplicationFailure`: a run that meets them fails, having written nothing it
  cannot resume.
* "Not found" answers are values, not errors: :meth:`RegistryClient.schema` returns ``None`` for an unknown id.  Only
  a 404 carrying one of :data:`NOT_FOUND_CODES` says "not found", except on the one path a registry may not serve
  (:meth:`RegistryClient.guid_schema_id`, where any 404 says "unknown": a registry without GUIDs, as Apicurio 3.3,
  answers its paths with a bare 404).
* Schemas by id never change, so those found are cached for the life of the client; an id the registry does not know
  is asked for again at every call (its schema may be registered since: the caller bounds how often it asks).
* httpx is imported when the first client is made, not with this module: a Spark copy task of a flow without
  registries never loads it (its worker process starts a twentieth of a second sooner).
"""

from __future__ import annotations

import ssl
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from airmirror.config.schema_registries import RegistryAccess
from airmirror.errors import RegistryRefusal, RegistryUnavailable

if TYPE_CHECKING:
    import httpx

UNAVAILABLE_AFTER_S = 30.0
REQUEST_TIMEOUT_S = 10.0
_BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 4.0)
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
NOT_FOUND_CODES = frozenset({40401, 40402, 40403, 40408})
"""Confluent's error codes of an unknown subject, version, schema, or subject-level config."""


@dataclass(frozen=True)
class Reference:
    """A schema's reference to another subject's version, by the ``name`` the referring schema uses."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class SchemaText:
    """A schema as a registry stores it: its text, type (``AVRO``, ``PROTOBUF`` or ``JSON``) and references."""

    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()

    def body(self) -> dict[str, Any]:
        """The JSON body that registers or looks up this schema."""
        body: dict[str, Any] = {"schema": self.schema}
        if self.schema_type != "AVRO":
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = [{"name": r.name, "subject": r.subject, "version": r.version} for r in self.references]
        return body

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SchemaText:
        return cls(
            schema=str(data["schema"]),
            schema_type=str(data.get("schemaType") or "AVRO"),
            references=tuple(
                Reference(str(r["name"]), str(r["subject"]), int(r["version"])) for r in data.get("references") or ()
            ),
        )


@dataclass(frozen=True)
class SubjectVersion:
    """One version of a subject: its number, schema id and schema."""

    subject: str
    version: int
    schema_id: int
    schema: SchemaText


class RegistryClient:
    """One cluster's registry (see the module docstring); close it, or use it as a context manager."""

    def __init__(self, access: RegistryAccess) -> None:
        import httpx  # on first use: see the module docstring

        settings = access.settings
        self.alias = access.alias
        self._urls = access.urls
        auth: tuple[str, str] | None = None
        if settings.get("basic.auth.credentials.source", "USER_INFO") == "URL":
            parts = urlsplit(self._urls[0])
            if parts.username:  # percent-decoded, as a URL's user info is sent
                auth = (unquote(parts.username), unquote(parts.password or ""))
        elif settings.get("basic.auth.user.info"):
            user, _, password = settings["basic.auth.user.info"].partition(":")
            auth = (user, password)
        self._urls = tuple(_without_user_info(url) for url in self._urls)
        self._http = httpx.Client(
            auth=auth,
            verify=_tls_context(settings),
            timeout=REQUEST_TIMEOUT_S,
            headers={"Accept": _CONTENT_TYPE, "Content-Type": _CONTENT_TYPE},
        )
        self._schemas: dict[int, tuple[SchemaText, str | None]] = {}
        """Per known id, its schema and GUID (from one ``GET /schemas/ids/{id}``: an id's schema never changes)."""

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def __repr__(self) -> str:
        return f"RegistryClient({self.alias!r}, {', '.join(self._urls)})"

    # -- reads --------------------------------------------------------------------------------------------------------
    def subjects(self, *, wait_s: float | None = None) -> list[str]:
        """Every subject (soft-deleted ones left out); a registry unavailable for ``wait_s`` (default
        :data:`UNAVAILABLE_AFTER_S`) is an error."""
        return [str(subject) for subject in cast(list[Any], self._call("GET", "/subjects", wait_s=wait_s))]

    def versions(self, subject: str) -> list[int]:
        """The subject's versions, oldest first; empty for an unknown subject."""
        found = self._call("GET", f"/subjects/{_path(subject)}/versions", missing_ok=True)
        return sorted(int(v) for v in cast(list[Any], found or []))

    def version(self, subject: str, version: int) -> SubjectVersion:
        """Version ``version`` of ``subject``."""
        data = cast(dict[str, Any], self._call("GET", f"/subjects/{_path(subject)}/versions/{version}"))
        return SubjectVersion(subject, int(data["version"]), int(data["id"]), SchemaText.from_json(data))

    def schema(self, schema_id: int) -> SchemaText | None:
        """The schema of id ``schema_id``; ``None`` when the registry does not know the id."""
        known = self._schema_of(schema_id)
        return None if known is None else known[0]

    def _schema_of(self, schema_id: int) -> tuple[SchemaText, str | None] | None:
        """The schema and GUID of id ``schema_id`` (asked once per known id); ``None`` for an unknown id."""
        if schema_id not in self._schemas:
            data = self._call("GET", f"/schemas/ids/{schema_id}", missing_ok=True)
            if data is None:
                return None
            answer = cast(dict[str, Any], data)
            guid = answer.get("guid")
            self._schemas[schema_id] = (SchemaText.from_json(answer), None if guid is None else str(guid))
        return self._schemas[schema_id]

    def subject_versions(self, schema_id: int, *, deleted: bool = False) -> list[tuple[str, int]]:
        """The subjects and versions that hold id ``schema_id`` (soft-deleted ones too when ``deleted``); empty for
        an unknown id."""
        query = "?deleted=true" if deleted else ""
        found = self._call("GET", f"/schemas/ids/{schema_id}/versions{query}", missing_ok=True)
        return [(str(item["subject"]), int(item["version"])) for item in cast(list[Any], found or [])]

    def lookup(self, subject: str, schema: SchemaText, *, deleted: bool = False) -> tuple[int, int] | None:
        """The id and version ``schema`` has under ``subject`` (a soft-deleted version too when ``deleted``),
        ``None`` when it is not registered there."""
        query = "?deleted=true" if deleted else ""
        found = self._call("POST", f"/subjects/{_path(subject)}{query}", json=schema.body(), missing_ok=True)
        if found is None:
            return None
        data = cast(dict[str, Any], found)
        return int(data["id"]), int(data["version"])

    def compatibility(self, subject: str | None = None) -> str | None:
        """The compatibility level in force for ``subject``: its own, else the registry's global level (asked with
        ``defaultToGlobal``: without it, Apicurio answers ``NONE`` for a subject without a level of its own, whatever
        the global level); with ``subject`` ``None``, the global level.  ``None`` when the registry answers "not
        found" (Apicurio, for a subject that has neither versions nor a level)."""
        path = f"/config/{_path(subject)}?defaultToGlobal=true" if subject else "/config"
        found = self._call("GET", path, missing_ok=True)
        if found is None:
            return None
        data = cast(dict[str, Any], found)
        level = data.get("compatibilityLevel") or data.get("compatibility")
        return None if level is None else str(level)

    def guid_schema_id(self, guid: str) -> int | None:
        """The id of the schema whose GUID is ``guid``: the ``id`` of ``GET /schemas/guids/{guid}`` where the registry
        gives one, else the default context's of ``GET /schemas/guids/{guid}/ids`` (Redpanda); ``None`` when the
        registry does not know the GUID or has no GUIDs (it does not serve the path: Apicurio 3.3 answers a bare
        404)."""
        path = f"/schemas/guids/{quote(guid, safe='')}"
        found = self._call("GET", path, missing_ok=True, unserved_ok=True)
        if not isinstance(found, dict):
            return None
        if isinstance(found.get("id"), int):
            return int(found["id"])
        listed = self._call("GET", f"{path}/ids", missing_ok=True, unserved_ok=True)
        ids = [item for item in cast(list[Any], listed or []) if isinstance(item, dict)]
        default = [item for item in ids if item.get("context") in (None, "", ".")] or ids
        return int(default[0]["id"]) if default else None

    def guid(self, schema_id: int) -> str | None:
        """The GUID of id ``schema_id`` (``None`` when the registry gives schemas no GUID, or does not know it)."""
        known = self._schema_of(schema_id)
        return None if known is None else known[1]

    # -- writes -------------------------------------------------------------------------------------------------------
    def register(
        self, subject: str, schema: SchemaText, *, schema_id: int | None = None, version: int | None = None
    ) -> int:
        """Register ``schema`` under ``subject`` (idempotent: a schema already there keeps its id); with
        ``schema_id`` (and ``version``), under that id, which needs the subject in IMPORT mode.  Returns its id."""
        body = schema.body()
        if schema_id is not None:
            body["id"] = schema_id
        if version is not None:
            body["version"] = version
        data = cast(dict[str, Any], self._call("POST", f"/subjects/{_path(subject)}/versions", json=body))
        return int(data["id"])

    def set_compatibility(self, subject: str, level: str) -> None:
        """Set ``subject``'s own compatibility level."""
        self._call("PUT", f"/config/{_path(subject)}", json={"compatibility": level})

    def set_mode(self, subject: str, mode: str) -> None:
        """Set ``subject``'s mode (``IMPORT``, ``READWRITE``), also when it holds versions already (Confluent's
        ``force``: IMPORT is otherwise refused for a subject that is not empty)."""
        self._call("PUT", f"/mode/{_path(subject)}?force=true", json={"mode": mode})

    def delete_version(self, subject: str, version: int) -> None:
        """Soft-delete ``subject``'s version ``version``: its id still serves the schema, but it is no longer listed
        nor the subject's latest."""
        self._call("DELETE", f"/subjects/{_path(subject)}/versions/{version}")

    def delete_subject(self, subject: str) -> None:
        """Delete ``subject`` for good (soft, then hard), its own mode too; nothing when it does not exist."""
        self._call("DELETE", f"/subjects/{_path(subject)}", missing_ok=True)
        self._call("DELETE", f"/subjects/{_path(subject)}?permanent=true", missing_ok=True)
        self._call("DELETE", f"/mode/{_path(subject)}", missing_ok=True)

    # -- transport ----------------------------------------------------------------------------------------------------
    def _call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        missing_ok: bool = False,
        unserved_ok: bool = False,
        wait_s: float | None = None,
    ) -> Any:
        """One request, retried per the module docstring for up to ``wait_s`` (default
        :data:`UNAVAILABLE_AFTER_S`); ``None`` for a "not found" answer when ``missing_ok``, and for any 404 when
        ``unserved_ok`` (a path the registry may not serve)."""
        import httpx  # imported by __init__ already

        wait_s = UNAVAILABLE_AFTER_S if wait_s is None else wait_s
        deadline = time.monotonic() + wait_s
        attempt, failure = 0, ""
        while True:
            for url in self._urls:
                try:
                    response = self._http.request(method, url + path, json=json)
                except httpx.TransportError as error:
                    failure = f"{url}: {type(error).__name__}"
                    continue
                if response.status_code < 300:
                    return response.json() if response.content else None
                failure = f"{url}: HTTP {response.status_code}"
                if unserved_ok and response.status_code == 404:
                    return None
                if response.status_code >= 500 or response.status_code == 429:
                    continue
                code, message = _error_of(response)
                if response.status_code == 404 and code is None:
                    failure += " without a registry error code"
                    continue
                if missing_ok and response.status_code == 404 and code in NOT_FOUND_CODES:
                    return None
                raise RegistryRefusal(
                    f"the schema registry of cluster {self.alias!r} refused {method} {path}: "
                    f"HTTP {response.status_code}{f' (error {code})' if code else ''}: {message}",
                    status=response.status_code,
                    error_code=code,
                )
            if time.monotonic() >= deadline:
                raise RegistryUnavailable(
                    f"the schema registry of cluster {self.alias!r} is unavailable ({failure}) after "
                    f"{wait_s:.0f} s; nothing was written for the records that need it, and the next run "
                    "resumes where this one stopped"
                )
            time.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])
            attempt += 1


def _path(subject: str) -> str:
    return quote(subject, safe="")


def _without_user_info(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is None:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))  # an IPv6 host keeps its brackets


def _error_of(response: httpx.Response) -> tuple[int | None, str]:
    """Confluent's ``error_code`` and ``message`` of a refusal (the body's start when it is not that JSON)."""
    try:
        data = response.json()
    except ValueError:
        return None, response.text[:200]
    if not isinstance(data, dict):
        return None, str(data)[:200]
    code = data.get("error_code")
    return (int(code) if isinstance(code, int) else None), str(data.get("message") or data)[:500]


def _tls_context(settings: Any) -> ssl.SSLContext | bool:
    """TLS verification (and client certificate) from the ``ssl.*`` settings; ``True`` (system CAs) when none."""
    ca, cert = settings.get("ssl.ca.location"), settings.get("ssl.certificate.location")
    if not ca and not cert:
        return True
    context = ssl.create_default_context(cafile=ca or None)
    if cert:
        context.load_cert_chain(cert, settings.get("ssl.key.location") or None, settings.get("ssl.key.password"))
    return context
