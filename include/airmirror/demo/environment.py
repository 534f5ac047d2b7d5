"""Demo environment: clusters ``a`` and ``b`` on fixed local ports, an MM2 config, sample data."""

from __future__ import annotations

import os
from pathlib import Path

from airmirror.demo.sample_data import create_sample_topics, produce_sample_records
from airmirror.local_kafka import airmirror_home, start_broker

DEMO_CLUSTERS = {"a": int(os.environ.get("AIRMIRROR_DEMO_PORT_A", "29092")), "b": int(os.environ.get("AIRMIRROR_DEMO_PORT_B", "29192"))}
DEMO_ORDERS = int(os.environ.get("AIRMIRROR_DEMO_ORDERS", "50000"))


def broker_name(alias: str) -> str:
    return f"demo-{alias}"


def demo_config_text(ports: dict[str, int], home: Path) -> str:
    """An ordinary MM2 properties file, plus airmirror's own keys."""
    return "\n".join(
        [
            "# MirrorMaker 2 configuration used by `make demo`",
            f"clusters = {', '.join(ports)}",
            *(f"{alias}.bootstrap.servers = 127.0.0.1:{port}" for alias, port in ports.items()),
            "a->b.enabled = true",
            "a->b.topics = orders, customers",
            "replication.factor = 1",
            "sync.topic.configs.enabled = true",
            f"airmirror.metadata.db.url = sqlite:///{home / 'demo' / 'metadata.db'}",
            "airmirror.spark.master = local[2]",
            "",
        ]
    )


def prepare_demo() -> Path:
    """Start both clusters, write the config, load sample data; returns the config path."""
    home = airmirror_home()
    for alias, port in DEMO_CLUSTERS.items():
        broker = start_broker(broker_name(alias), port)
        print(f"kafka cluster '{alias}': {broker.bootstrap}")
    config = home / "demo" / "mm2.properties"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(demo_config_text(DEMO_CLUSTERS, home))
    source = f"127.0.0.1:{DEMO_CLUSTERS['a']}"
    create_sample_topics(source)
    produce_sample_records(source, DEMO_ORDERS)
    print(f"loaded {DEMO_ORDERS} orders and 1000 customers into cluster 'a'; config: {config}")
    return config
