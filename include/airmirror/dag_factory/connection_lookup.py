"""Airflow's own connection lookup for ``{alias}.airflow.conn.id`` inside a task (connections rule 3 of
:mod:`airmirror.config.connections`): the task SDK asks the configured secrets backends, environment
variables and the metadata DB, in Airflow's order.  Every secret value of the connection's extra is
registered with Airflow's secrets masker before airmirror uses it."""

from __future__ import annotations

from airflow.sdk import Connection
from airflow.sdk.exceptions import AirflowNotFoundException
from airflow.sdk.log import mask_secret

from airmirror.config.connections import FoundConnection, use_resolver
from airmirror.config.secrets import is_secret_key


def airflow_connection(name: str) -> FoundConnection | None:
    """Connection ``name`` as Airflow resolves it in a task; ``None`` when Airflow has no such connection."""
    try:
        connection = Connection.get(name)
    except AirflowNotFoundException:
        return None
    extra = connection.extra_dejson
    for key, value in extra.items():
        if value and is_secret_key(str(key)):
            mask_secret(str(value))
    if connection.password:
        mask_secret(connection.password)
    return FoundConnection(
        connection.conn_type or "",
        extra,
        host=connection.host,
        port=connection.port,
        schema=connection.schema,
        login=connection.login,
        password=connection.password,
    )


def resolve_connections_through_airflow() -> None:
    """From now on in this task process, ``{alias}.airflow.conn.id`` is resolved by Airflow."""
    use_resolver(airflow_connection)
