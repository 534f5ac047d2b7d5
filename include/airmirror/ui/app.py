"""The replication view's HTTP endpoints, a FastAPI app that Airflow's API server mounts at ``/airmirror``
(:mod:`airmirror.ui.plugin`).

Contracts:

- **Login**: every endpoint requires an authenticated Airflow user (Airflow's own JWT, from the
  ``Authorization: Bearer`` header or the UI's ``_token`` cookie): anything else is answered 401/403 by
  Airflow's security layer.  The app publishes no OpenAPI schema and no ``/docs`` or ``/redoc`` pages.
- **Per-DAG permission**: a user sees only the flows whose DAG Airflow's auth manager lets them read
  (``get_authorized_dag_ids``, the same filter Airflow's own DAG list uses, so multi-team set-ups apply); any
  other flow or DAG is absent from the index and answered 404.
- **Read-only**: the figures come from each flow's metadata DB only (:mod:`airmirror.ui.flow_view`), opened
  read-only once per process (:mod:`airmirror.ui.stores`); the view never migrates or writes.  A store without
  this airmirror's schema, or one that cannot be read, is answered 503 with a page saying so.
- **Nothing about the server's files**: no page or error names the config file or a database URL; the
  details of a failure go to the API server's log.

The flows come from the file named by ``$AIRMIRROR_CONFIG`` (the DAG factory's), re-read on every request.

- ``GET /``                  the flows the user may read and their health, worst first, HTML (``?sort=`` one of
  :data:`~airmirror.ui.page.SORTS`)
- ``GET /flows/{flow}``      one flow's view, HTML (``flow`` as ``a->b``, URL-encoded); ``?topic=REGEX`` filters its
  topics, ``?page=N`` pages them (:mod:`airmirror.ui.topic_rows`)
- ``GET /dags/{dag_id}``     the view of the flow a DAG replicates (the DAG page's "Replication" tab)
- ``GET /api/flows``         the flows the user may read and their health, worst first, JSON
  (:meth:`~airmirror.replication.health.FlowHealth.as_json` each; a flow whose store cannot be read has
  ``state`` ``unavailable`` and an ``error``)
- ``GET /api/flows/{flow}``  one flow's figures, JSON (:meth:`~airmirror.ui.flow_view.FlowView.as_json`)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, TypeVar

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.core_api.security import GetUserDep, requires_authenticated
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import HTMLResponse

from airmirror import names
from airmirror.config import FlowConfig, load_config
from airmirror.errors import ConfigError, ReplicationFailure
from airmirror.model import Json, JsonObject
from airmirror.replication.health import FlowHealth, flow_health, worst_first
from airmirror.store import MetadataStore
from airmirror.store.metadata_store import SchemaNotCurrentError
from airmirror.ui.flow_view import FlowView, flow_view
from airmirror.ui.page import flow_page, not_a_flow_page, overview_page, store_unavailable_page
from airmirror.ui.stores import readable_store

CONFIG_ENV = "AIRMIRROR_CONFIG"
T = TypeVar("T")
log = logging.getLogger(__name__)

app = FastAPI(
    title="airmirror replication",
    openapi_url=None,
    docs_url=None,
    redoc_url=None,
    dependencies=[Depends(requires_authenticated())],
)


class StoreUnavailable(Exception):
    """A flow's store cannot be shown; the message is safe to show (it names no file or URL)."""


def readable_dag_ids(user: GetUserDep) -> set[str]:
    """The DAG ids the auth manager lets ``user`` read."""
    return get_auth_manager().get_authorized_dag_ids(user=user, method="GET")


ReadableDagIds = Annotated[set[str], Depends(readable_dag_ids)]


def readable_flows(dag_ids: ReadableDagIds) -> dict[str, FlowConfig]:
    """The config's enabled flows whose DAG the user may read, by DAG id."""
    path = os.environ.get(CONFIG_ENV)
    if not path:
        raise HTTPException(503, f"set {CONFIG_ENV} on the API server to the MM2 properties file")
    try:
        flows = load_config(path).enabled_flows()
    except ConfigError as error:
        log.error("the airmirror config in $%s is invalid: %s", CONFIG_ENV, error)
        raise HTTPException(503, "the airmirror config is invalid; the API server's log says why") from error
    by_dag = {names.dag_id(flow.source, flow.target): flow for flow in flows}
    return {dag_id: flow for dag_id, flow in by_dag.items() if dag_id in dag_ids}


ReadableFlows = Annotated[dict[str, FlowConfig], Depends(readable_flows)]


def flow_named(flow_name: str, flows: dict[str, FlowConfig]) -> FlowConfig:
    flow = next((flow for flow in flows.values() if flow.name == flow_name), None)
    if flow is None:
        raise HTTPException(404, f"no enabled flow {flow_name!r} that you may read")
    return flow


def reverse_readable(flow: FlowConfig, flows: dict[str, FlowConfig]) -> bool:
    """Whether flow ``target->source`` is among the flows the user may read (where heartbeats come from)."""
    return any(other.source == flow.target and other.target == flow.source for other in flows.values())


def view_of(flow: FlowConfig, flows: dict[str, FlowConfig]) -> FlowView:
    """The flow's view from its read-only store; :class:`StoreUnavailable` when the store cannot be shown."""
    return read_store(
        flow,
        lambda store: flow_view(
            flow, names.dag_id(flow.source, flow.target), store, reverse_enabled=reverse_readable(flow, flows)
        ),
    )


def health_of(flow: FlowConfig, flows: dict[str, FlowConfig], now: datetime) -> FlowHealth:
    """The flow's health from its read-only store; :class:`StoreUnavailable` when the store cannot be shown."""
    return read_store(flow, lambda store: flow_health(flow, store, now, reverse_enabled=reverse_readable(flow, flows)))


def read_store(flow: FlowConfig, read: Callable[[MetadataStore], T]) -> T:
    """``read`` of the flow's read-only store; :class:`StoreUnavailable` (a message safe to show) when it cannot."""
    try:
        return read(readable_store(flow))
    except SchemaNotCurrentError as error:
        raise StoreUnavailable(
            f"The metadata store of flow {flow.name} has no schema yet, or another airmirror version's "
            "(the replication view never migrates it; the flow's next task run does)."
        ) from error
    except ReplicationFailure as error:
        log.error("replication view of flow %s: %s", flow.name, error)
        raise StoreUnavailable(
            f"The metadata store of flow {flow.name} cannot be read; the API server's log says why."
        ) from error


def flow_response(
    flow: FlowConfig, flows: dict[str, FlowConfig], topic: str | None = None, page: int = 1
) -> HTMLResponse:
    try:
        return HTMLResponse(flow_page(view_of(flow, flows), topic, page))
    except StoreUnavailable as error:
        return HTMLResponse(store_unavailable_page(flow.name, str(error)), status_code=503)


def overview(flows: dict[str, FlowConfig]) -> tuple[list[FlowHealth], list[tuple[str, str, str]]]:
    """The health of each flow, worst first, and the ``(flow, dag_id, reason)`` of those that cannot be read."""
    now = datetime.now(UTC)
    healths, unavailable = [], []
    for dag_id, flow in flows.items():
        try:
            healths.append(health_of(flow, flows, now))
        except StoreUnavailable as error:
            unavailable.append((flow.name, dag_id, str(error)))
    return worst_first(healths), unavailable


@app.get("/", response_class=HTMLResponse)
def index(flows: ReadableFlows, sort: str = "state") -> str:
    healths, unavailable = overview(flows)
    return overview_page(healths, unavailable, sort)


@app.get("/flows/{flow_name}", response_class=HTMLResponse)
def flow_html(flow_name: str, flows: ReadableFlows, topic: str | None = None, page: int = 1) -> HTMLResponse:
    return flow_response(flow_named(flow_name, flows), flows, topic, page)


@app.get("/dags/{dag_id}", response_class=HTMLResponse)
def dag_html(
    dag_id: str, flows: ReadableFlows, dag_ids: ReadableDagIds, topic: str | None = None, page: int = 1
) -> HTMLResponse:
    if dag_id not in dag_ids:
        raise HTTPException(404, f"no DAG {dag_id!r} that you may read")
    flow = flows.get(dag_id)
    return HTMLResponse(not_a_flow_page(dag_id)) if flow is None else flow_response(flow, flows, topic, page)


@app.get("/api/flows", response_model=None)
def flows_json(flows: ReadableFlows) -> Json:
    healths, unavailable = overview(flows)
    shown: list[Json] = [health.as_json() for health in healths]
    shown += [
        {"flow": name, "dag_id": dag_id, "state": "unavailable", "error": reason}
        for name, dag_id, reason in unavailable
    ]
    return shown


@app.get("/api/flows/{flow_name}", response_model=None)
def flow_json(flow_name: str, flows: ReadableFlows) -> JsonObject:
    try:
        return view_of(flow_named(flow_name, flows), flows).as_json()
    except StoreUnavailable as error:
        raise HTTPException(503, str(error)) from error
