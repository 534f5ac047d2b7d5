"""Airflow's secrets masker, told about a flow's secrets.

Contract: after :func:`mask_flow_secrets`, Airflow shows ``***`` wherever one of the flow's secrets (see
:meth:`airmirror.config.FlowConfig.secret_values`) would appear in this process's task logs and in the
rendered template fields it stores; inside a task the supervisor process masks them too.  The DAG factory
calls it when it builds a flow's DAG (so a task process knows the secrets before it renders its templates)
and every task calls it again when it re-reads the config (whose ``${env:}``/``${file:}`` secrets may have
changed since).
"""

from __future__ import annotations

from airflow.sdk.log import mask_secret

from airmirror.config import FlowConfig


def mask_flow_secrets(flow: FlowConfig) -> None:
    """Register every secret ``flow`` resolves with Airflow's secrets masker."""
    for secret in flow.secret_values():
        mask_secret(secret)
