"""The demo's Avro topic (``make demo``): orders the demo produces with AvroSerializer on cluster ``a``, copied under
the demo's own MM2 file, decode on cluster ``b`` with the demo's consumer and ``b``'s registry alone.

The demo's clusters and registries are those of the test session (the demo's fixed ports may be taken), and the copy
is ``airmirror replicate``, the pipeline the demo's DAG runs; Airflow itself is left out.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from airmirror.devtools.demo.avro_orders import (
    avro_order,
    decode_orders,
    decoded_orders_lines,
    latest_schema_id,
    produce_avro_orders,
    register_local_schema,
)
from airmirror.devtools.demo.environment import demo_config_text
from airmirror.devtools.demo.sample_data import AVRO_TOPIC
from tests.kafka_helpers import create_topic
from tests.registry_helpers import registry_url

pytestmark = pytest.mark.integration

ORDERS = 120


def test_the_demos_avro_orders_decode_on_the_target_with_the_target_registry_only(clusters, registries, tmp_path: Path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    source_registry, target_registry = registry_url(registries["a"]), registry_url(registries["b"])
    config = tmp_path / "mm2.properties"
    config.write_text(
        demo_config_text(
            {alias: broker.port for alias, broker in clusters.items()},
            tmp_path / "metadata.db",
            {alias: registry.port for alias, registry in registries.items()},
        )
    )
    create_topic(a, AVRO_TOPIC, 3)
    register_local_schema(target_registry)
    produce_avro_orders(a, source_registry, 0, ORDERS)

    done = subprocess.run(
        [sys.executable, "-m", "airmirror.cli", "replicate", str(config), "--flow", "a->b"],
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert done.returncode == 0, done.stderr[-4000:]
    remote = f"a.{AVRO_TOPIC}"
    decoded = decode_orders(b, remote, target_registry, ORDERS)
    source_id = latest_schema_id(source_registry, f"{AVRO_TOPIC}-value")
    target_id = latest_schema_id(target_registry, f"{remote}-value")
    assert source_id != target_id
    assert {record.schema_id for record in decoded} == {target_id}
    orders = sorted((record.order for record in decoded), key=lambda order: order["order"])
    assert orders == [avro_order(number) for number in range(ORDERS)]
    lines = decoded_orders_lines(b, source_registry, target_registry, remote, shown=2)
    assert lines[1] == f"value schema: id {source_id} on a ({AVRO_TOPIC}-value), id {target_id} on b ({remote}-value)"
    assert len(lines) == 4 and all(f"  schema id {target_id}  {{'order': " in line for line in lines[2:]), lines
