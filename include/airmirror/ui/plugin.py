"""The Airflow plugin of the replication view: the FastAPI app at ``/airmirror`` (:mod:`airmirror.ui.app`), a
"Replication" entry in the navigation and a "Replication" tab on every DAG page (a flow DAG's tab shows its
flow).  Airflow loads it from ``plugins/`` or through the package's ``airflow.plugins`` entry point."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airmirror.ui.app import app

URL_PREFIX = "/airmirror"


class AirmirrorPlugin(AirflowPlugin):
    # AirflowPlugin declares these as plain (not ClassVar) class attributes, which a subclass sets
    name = "airmirror"
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "airmirror replication"}]  # noqa: RUF012
    external_views = [  # noqa: RUF012
        {"name": "Replication", "href": f"{URL_PREFIX}/", "destination": "nav", "url_route": "airmirror"},
        {
            "name": "Replication",
            "href": f"{URL_PREFIX}/dags/{{DAG_ID}}",
            "destination": "dag",
            "url_route": "airmirror-flow",
        },
    ]
