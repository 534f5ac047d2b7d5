"""The replication view's HTTP endpoints, a FastAPI app that Airflow's API server mounts at ``/airmirror``
(:mod:`airmirror.ui.plugin`).

Every endpoint requires an authenticated Airflow user (Airflow's own JWT, from the ``Authorization: Bearer``
header or the UI's ``_token`` cookie): anything else is answered 401/403 by Airflow's security layer.  The
flows come from the file named by ``$AIRMIRROR_CONFIG`` (the DAG factory's), re-read on every request; the
figures come from each flow's metadata DB only (:mod:`airmirror.ui.flow_view`).

- ``GET /``                  the config's flows, HTML
- ``GET /flows/{flow}``      one flow's view, HTML (``flow`` as ``a->b``, URL-encoded)
- ``GET /dags/{dag_id}``     the view of the flow a DAG replicates (the DAG page's "Replication" tab)
- ``GET /api/flows``         the flows, JSON
- ``GET /api/flows/{flow}``  one flow's figures, JSON
"""

from __future__ import annotations

import os
from typing import Any

from airflow.api_fastapi.core_api.security import requires_authenticated
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import HTMLResponse

from airmirror import names
from airmirror.config import FlowConfig, load_config
from airmirror.errors import ConfigError
from airmirror.store.opening import open_flow
from airmirror.ui.flow_view import FlowView, flow_view
from airmirror.ui.page import flow_page, index_page, not_a_flow_page

CONFIG_ENV = "AIRMIRROR_CONFIG"

app = FastAPI(title="airmirror replication", dependencies=[Depends(requires_authenticated())])


def config_path() -> str:
    path = os.environ.get(CONFIG_ENV)
    if not path:
        raise HTTPException(503, f"set {CONFIG_ENV} on the API server to the MM2 properties file")
    return path


def flows() -> list[FlowConfig]:
    try:
        return load_config(config_path()).enabled_flows()
    except ConfigError as error:
        raise HTTPException(503, f"the airmirror config is invalid: {error}") from error


def view_of(flow_name: str) -> FlowView:
    path = config_path()
    known = {flow.name: flow for flow in flows()}
    if flow_name not in known:
        raise HTTPException(404, f"no enabled flow {flow_name!r} in {path}")
    flow = known[flow_name]
    with open_flow(path, flow.name) as (opened, store):
        return flow_view(opened, names.dag_id(flow.source, flow.target), store)


@app.get("/", response_class=HTMLResponse)
def index() -> str:
    return index_page([(flow.name, names.dag_id(flow.source, flow.target)) for flow in flows()], config_path())


@app.get("/flows/{flow_name}", response_class=HTMLResponse)
def flow_html(flow_name: str) -> str:
    return flow_page(view_of(flow_name))


@app.get("/dags/{dag_id}", response_class=HTMLResponse)
def dag_html(dag_id: str) -> str:
    flow = next((flow for flow in flows() if names.dag_id(flow.source, flow.target) == dag_id), None)
    return not_a_flow_page(dag_id) if flow is None else flow_page(view_of(flow.name))


@app.get("/api/flows")
def flows_json() -> list[dict[str, str]]:
    return [{"flow": flow.name, "dag_id": names.dag_id(flow.source, flow.target)} for flow in flows()]


@app.get("/api/flows/{flow_name}")
def flow_json(flow_name: str) -> dict[str, Any]:
    return view_of(flow_name).as_json()
