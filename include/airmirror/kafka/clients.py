"""The one place that builds a flow's Kafka admin clients, and the request timeout they share.

Settings come from the flow (:meth:`~airmirror.config.FlowConfig.client_config`: MM2's client keys translated
for librdkafka, secrets resolved).  Producers and consumers of the copy job are built in
:mod:`airmirror.replication.spark` from settings the driver hands each task, since executors have no config.
"""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

from airmirror.config import FlowConfig

REQUEST_TIMEOUT_S = 30.0
"""How long one admin or metadata request may take before it fails (every admin call of airmirror)."""


def admin_client(flow: FlowConfig, alias: str) -> AdminClient:
    """An admin client of cluster ``alias`` with the flow's settings for it."""
    return AdminClient(flow.client_config(alias, "admin"))


def source_admin(flow: FlowConfig) -> AdminClient:
    """An admin client of the flow's source cluster."""
    return admin_client(flow, flow.source)


def target_admin(flow: FlowConfig) -> AdminClient:
    """An admin client of the flow's target cluster."""
    return admin_client(flow, flow.target)
