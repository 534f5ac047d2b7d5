"""Local Kafka clusters of several nodes, for the tests that kill, freeze or restart a node of the source."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from airmirror.devtools.local_kafka import LocalBroker, consecutive_free_ports, start_broker


@contextmanager
def running_nodes(
    name: str, nodes: int, home: Path, broker_config: Mapping[str, str] | None = None
) -> Iterator[LocalBroker]:
    """Cluster ``name`` of ``nodes`` nodes on consecutive free ports, stopped at the end."""
    cluster = start_broker(name, consecutive_free_ports(nodes), brokers=nodes, home=home, broker_config=broker_config)
    try:
        yield cluster
    finally:
        cluster.stop()
