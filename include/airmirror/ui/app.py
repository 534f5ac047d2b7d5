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

- ``GET /``                  the flows the user may read, HTML
- ``GET /flows/{flow}``      one flow's view, HTML (``flow`` as ``a->b``, URL-encoded)
- ``GET /dags/{dag_id}``     the view of the flow a DAG replicates (the DAG page's "Replication" tab)
- ``GET /api/flows``         the flows the user may read, JSON (:class:`FlowLink` each)
- ``GET /api/flows/{flow}``  one flow's figures, JSON (:meth:`~airmirror.ui.flow_view.FlowView.as_json`)
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Annotated

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.core_api.security import GetUserDep, requires_authenticated
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import HTMLResponse

from airmirror import names
from airmirror.config import FlowConfig, load_config
from airmirror.errors import ConfigError, ReplicationFailure
from airmirror.model import Json, JsonObject, to_json
from airmirror.store.metadata_store import SchemaNotCurrentError
from airmirror.ui.flow_view import FlowView, flow_view
from airmirror.ui.page import flow_page, index_page, not_a_flow_page, store_unavailable_page
from airmirror.ui.stores import readable_store

CONFIG_ENV = "AIRMIRROR_CONFIG"
log = logging.getLogger(__name__)

app = FastAPI(
    title="airmirror replication",
    openapi_url=None,
    docs_url=None,
    redoc_url=None,
    dependencies=[Depends(requires_authenticated())],
)


@dataclass(frozen=True, kw_only=True)
class FlowLink:
    """A flow the user may read, and the DAG that replicates it."""

    flow: str
    dag_id: str


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


def view_of(flow: FlowConfig) -> FlowView:
    """The flow's view from its read-only store; :class:`StoreUnavailable` when the store cannot be shown."""
    try:
        return flow_view(flow, names.dag_id(flow.source, flow.target), readable_store(flow))
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


def flow_response(flow: FlowConfig) -> HTMLResponse:
    try:
        return HTMLResponse(flow_page(view_of(flow)))
    except StoreUnavailable as error:
        return HTMLResponse(store_unavailable_page(flow.name, str(error)), status_code=503)


@app.get("/", response_class=HTMLResponse)
def index(flows: ReadableFlows) -> str:
    return index_page([(flow.name, dag_id) for dag_id, flow in flows.items()])


@app.get("/flows/{flow_name}", response_class=HTMLResponse)
def flow_html(flow_name: str, flows: ReadableFlows) -> HTMLResponse:
    return flow_response(flow_named(flow_name, flows))


@app.get("/dags/{dag_id}", response_class=HTMLResponse)
def dag_html(dag_id: str, flows: ReadableFlows, dag_ids: ReadableDagIds) -> HTMLResponse:
    if dag_id not in dag_ids:
        raise HTTPException(404, f"no DAG {dag_id!r} that you may read")
    flow = flows.get(dag_id)
    return HTMLResponse(not_a_flow_page(dag_id)) if flow is None else flow_response(flow)


@app.get("/api/flows", response_model=None)
def flows_json(flows: ReadableFlows) -> Json:
    return to_json([FlowLink(flow=flow.name, dag_id=dag_id) for dag_id, flow in flows.items()])


@app.get("/api/flows/{flow_name}", response_model=None)
def flow_json(flow_name: str, flows: ReadableFlows) -> JsonObject:
    try:
        return view_of(flow_named(flow_name, flows)).as_json()
    except StoreUnavailable as error:
        raise HTTPException(503, str(error)) from error
