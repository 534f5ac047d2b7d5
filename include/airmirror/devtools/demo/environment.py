"""Demo environment: clusters ``a`` and ``b`` on fixed local ports, a schema registry for each, an MM2 config, sample
data (Avro orders among it), a producer.

Everything it starts is recorded under ``$AIRMIRROR_HOME`` and stopped by :func:`stop_demo` (``make stop``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from airmirror.devtools.demo.avro_orders import latest_schema_id, produce_avro_orders, register_local_schema
from airmirror.devtools.demo.sample_data import (
    AVRO_TOPIC,
    create_sample_topics,
    produce_customers,
    produce_orders,
)
from airmirror.devtools.local_airflow import LocalAirflow
from airmirror.devtools.local_kafka import airmirror_home, start_broker, stop_broker
from airmirror.devtools.local_registry import start_registry, stop_registry

DEMO_CLUSTERS = {
    "a": int(os.environ.get("AIRMIRROR_DEMO_PORT_A", "29092")),
    "b": int(os.environ.get("AIRMIRROR_DEMO_PORT_B", "29192")),
}
DEMO_REGISTRIES = {
    "a": int(os.environ.get("AIRMIRROR_DEMO_REGISTRY_PORT_A", "29081")),
    "b": int(os.environ.get("AIRMIRROR_DEMO_REGISTRY_PORT_B", "29181")),
}
DEMO_ORDERS = int(os.environ.get("AIRMIRROR_DEMO_ORDERS", "50000"))
DEMO_AVRO_ORDERS = int(os.environ.get("AIRMIRROR_DEMO_AVRO_ORDERS", "1000"))
AIRFLOW_PORT = int(os.environ.get("AIRMIRROR_DEMO_AIRFLOW_PORT", "8080"))


def broker_name(alias: str) -> str:
    return f"demo-{alias}"


def registry_name(alias: str) -> str:
    return f"demo-{alias}"


def registry_url(port: int) -> str:
    """The Confluent API of the local registry on ``port`` (what ``{alias}.schema.registry.url`` takes)."""
    return f"http://127.0.0.1:{port}/apis/ccompat/v7"


def demo_dir() -> Path:
    path = airmirror_home() / "demo"
    path.mkdir(parents=True, exist_ok=True)
    return path


def demo_airflow() -> LocalAirflow:
    return LocalAirflow(airmirror_home(), AIRFLOW_PORT)


def source_bootstrap() -> str:
    return f"127.0.0.1:{DEMO_CLUSTERS['a']}"


def demo_config_text(ports: dict[str, int], db_path: Path, registry_ports: dict[str, int] = DEMO_REGISTRIES) -> str:
    """An ordinary MM2 properties file, plus airmirror's own keys: each cluster's schema registry (so flow ``a->b``
    translates schema ids) and the metadata DB."""
    return "\n".join(
        [
            "# MirrorMaker 2 configuration used by `make demo`",
            f"clusters = {', '.join(ports)}",
            *(f"{alias}.bootstrap.servers = 127.0.0.1:{port}" for alias, port in ports.items()),
            *(f"{alias}.schema.registry.url = {registry_url(port)}" for alias, port in registry_ports.items()),
            "a->b.enabled = true",
            f"a->b.topics = orders, customers, {AVRO_TOPIC}",
            "replication.factor = 1",
            "heartbeats.topic.replication.factor = 1",
            "checkpoints.topic.replication.factor = 1",
            "offset-syncs.topic.replication.factor = 1",
            "airmirror.batch.log.topic.replication.factor = 1",
            "sync.topic.configs.enabled = true",
            "sync.group.offsets.enabled = true",
            f"airmirror.metadata.db.url = sqlite:///{db_path}",
            "airmirror.spark.master = local[2]",
            "",
        ]
    )


def prepare_demo() -> Path:
    """Start both clusters and their registries, write the config, load sample data; returns the config path."""
    for alias, port in DEMO_CLUSTERS.items():
        broker = start_broker(broker_name(alias), port)
        print(f"kafka cluster '{alias}': {broker.bootstrap}")
    start_registries()
    config = demo_dir() / "mm2.properties"
    config.write_text(demo_config_text(DEMO_CLUSTERS, demo_dir() / "metadata.db"))
    create_sample_topics(source_bootstrap())
    produce_orders(source_bootstrap(), 0, DEMO_ORDERS)
    produce_customers(source_bootstrap())
    print(f"loaded {DEMO_ORDERS} orders and customers into cluster 'a'; config: {config}")
    load_avro_orders()
    return config


def start_registries() -> None:
    """A schema registry for each cluster, its schemas kept under the demo's directory.  A registry an earlier demo
    left running is restarted (on the same schemas), so that it runs with this demo's settings."""
    for alias, port in DEMO_REGISTRIES.items():
        stop_registry(registry_name(alias), airmirror_home())
        data_dir = demo_dir() / f"registry-{alias}"
        data_dir.mkdir(exist_ok=True)
        registry = start_registry(registry_name(alias), port, airmirror_home(), data_dir)
        print(f"schema registry '{alias}': {registry.url}")


def load_avro_orders() -> None:
    """Avro orders into cluster ``a``, after cluster ``b``'s registry got a schema of its own (so ids differ)."""
    register_local_schema(registry_url(DEMO_REGISTRIES["b"]))
    source_registry = registry_url(DEMO_REGISTRIES["a"])
    produce_avro_orders(source_bootstrap(), source_registry, 0, DEMO_AVRO_ORDERS)
    schema_id = latest_schema_id(source_registry, f"{AVRO_TOPIC}-value")
    print(f"loaded {DEMO_AVRO_ORDERS} Avro orders into '{AVRO_TOPIC}' on cluster 'a' (value schema id {schema_id})")


def producer_pid_file() -> Path:
    return demo_dir() / "producer.pid"


def start_sample_producer() -> None:
    """A background producer adding orders every second (its own process group)."""
    stop_sample_producer()
    log = (demo_dir() / "producer.log").open("ab")
    process = subprocess.Popen(
        [sys.executable, "-m", "airmirror.devtools.demo.producer", source_bootstrap(), "20"],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    producer_pid_file().write_text(str(process.pid))


def stop_sample_producer() -> bool:
    try:
        os.killpg(int(producer_pid_file().read_text()), signal.SIGTERM)
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return False
    finally:
        producer_pid_file().unlink(missing_ok=True)
    return True


def stop_demo() -> None:
    """Stop Airflow, the sample producer, both registries and both clusters."""
    print(f"airflow: {'stopped' if demo_airflow().stop() else 'not running'}")
    print(f"sample producer: {'stopped' if stop_sample_producer() else 'not running'}")
    for alias in DEMO_REGISTRIES:
        stopped = stop_registry(registry_name(alias), airmirror_home())
        print(f"schema registry '{alias}': {'stopped' if stopped else 'not running'}")
    for alias in DEMO_CLUSTERS:
        print(f"kafka cluster '{alias}': {'stopped' if stop_broker(broker_name(alias)) else 'not running'}")
