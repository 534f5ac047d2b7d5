"""``make demo`` (``python -m airmirror.devtools.demo``) and ``make stop`` (``python -m airmirror.devtools.demo stop``).

The demo starts two local Kafka clusters with a schema registry each, loads sample data (Avro orders among it),
starts a sample producer and Airflow standalone with the flow DAGs, unpauses flow ``a->b``, waits for a successful
run, decodes a few copied Avro orders on cluster ``b`` with its own registry only, and prints where to look.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from airmirror.cli import main as cli_main
from airmirror.config import load_config
from airmirror.devtools.demo.avro_orders import decoded_orders_lines
from airmirror.devtools.demo.environment import (
    DEMO_CLUSTERS,
    DEMO_REGISTRIES,
    demo_airflow,
    prepare_demo,
    registry_url,
    source_bootstrap,
    start_sample_producer,
    stop_demo,
)
from airmirror.devtools.demo.sample_data import AVRO_TOPIC, ORDERS_TOPIC, consume_as_group
from airmirror.devtools.local_airflow import ADMIN_USER, AirflowApi
from airmirror.store import MetadataStore

DAG_ID = "airmirror__a__b"
DEMO_GROUP = "orders-reader"
REMOTE_TOPIC = "a.orders"
REMOTE_AVRO_TOPIC = f"a.{AVRO_TOPIC}"


def copied_orders(config: Path, topic: str = ORDERS_TOPIC) -> int:
    """Records of ``topic`` copied to its remote topic so far, from the metadata DB."""
    flow = load_config(config).flow("a->b")
    store = MetadataStore.open(flow.metadata_db_url)
    try:
        return sum(s.records for key, s in store.partition_stats(flow.name).items() if key.topic == topic)
    finally:
        store.dispose()


def wait_for_copied_orders(api: AirflowApi, config: Path, timeout: float) -> None:
    """Wait for successful runs until orders, JSON and Avro, have reached cluster b.

    A run copies the records stamped before its data interval's end, so the first run, whose interval may
    end before the sample data was loaded, can rightly copy nothing.
    """
    deadline = time.monotonic() + timeout
    runs = 1
    while True:
        api.wait_for_runs(DAG_ID, runs, timeout=max(deadline - time.monotonic(), 1.0))
        if copied_orders(config) > 0 and copied_orders(config, AVRO_TOPIC) > 0:
            return
        runs += 1


def run_demo() -> int:
    config = prepare_demo()
    consumed = consume_as_group(source_bootstrap(), DEMO_GROUP, ORDERS_TOPIC, 10_000)
    print(f"consumer group '{DEMO_GROUP}' read {consumed} orders on cluster 'a' and committed")
    start_sample_producer()
    airflow = demo_airflow()
    print(f"starting airflow standalone on {airflow.url} (log: {airflow.log_file}) ...")
    airflow.start(config)
    api = airflow.client()
    api.wait_for_dag(DAG_ID)
    api.unpause(DAG_ID)
    print(f"unpaused {DAG_ID}; waiting for a successful run that copies the orders ...")
    wait_for_copied_orders(api, config, timeout=600)
    print(
        f"\n== failover view of group '{DEMO_GROUP}': airmirror translate {config} --flow 'a->b' --group {DEMO_GROUP}"
    )
    cli_main(["translate", str(config), "--flow", "a->b", "--group", DEMO_GROUP])
    target_bootstrap = f"127.0.0.1:{DEMO_CLUSTERS['b']}"
    source_registry, target_registry = (registry_url(DEMO_REGISTRIES[alias]) for alias in ("a", "b"))
    print("\n" + "\n".join(decoded_orders_lines(target_bootstrap, source_registry, target_registry, REMOTE_AVRO_TOPIC)))
    print(
        "\n".join(
            [
                "",
                f"Airflow UI:   {airflow.url}/dags/{DAG_ID}",
                f"Log in:       user '{ADMIN_USER}', password '{airflow.admin_password()}'",
                f"Target topic: {REMOTE_TOPIC} on cluster b (127.0.0.1:{DEMO_CLUSTERS['b']}), "
                f"{copied_orders(config)} records copied",
                f"Avro topic:   {REMOTE_AVRO_TOPIC} on cluster b, {copied_orders(config, AVRO_TOPIC)} records copied, "
                f"schemas in {registry_url(DEMO_REGISTRIES['b'])}",
                f"Status:       .venv/bin/airmirror status {config} --flow 'a->b'",
                "Stop it all:  make stop",
            ]
        )
    )
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["stop"]:
        stop_demo()
        return 0
    return run_demo()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
