"""Run in a venv holding confluent-kafka alone (``PYTHONPATH`` = the repo's ``include/``): prints, as JSON, what
``airmirror.client`` reads of cluster ``argv[1]`` and which of PySpark, Airflow, SQLAlchemy and pandas it could
import.  Usage: ``failover_client_probe.py BOOTSTRAP REMOTE_ALIAS GROUP NEAR FAR``."""

from __future__ import annotations

import importlib.util
import json
import sys

from airmirror import client

HEAVY = ("pyspark", "airflow", "sqlalchemy", "pandas")


def main() -> None:
    bootstrap, remote, group, near, far = sys.argv[1:6]
    config = {"bootstrap.servers": bootstrap}
    offsets = client.translate_offsets(config, remote, group, 30)
    print(
        json.dumps(
            {
                "importable": [name for name in HEAVY if importlib.util.find_spec(name) is not None],
                "loaded": sorted(name for name in sys.modules if name.split(".")[0] in HEAVY),
                "offsets": sorted([tp.topic, tp.partition, o.offset, o.metadata] for tp, o in offsets.items()),
                "heartbeat_topics": sorted(client.heartbeat_topics(config)),
                "checkpoint_topics": sorted(client.checkpoint_topics(config)),
                "upstream_clusters": sorted(client.upstream_clusters(config)),
                "hops": [client.replication_hops(config, alias) for alias in (near, far, f"{far}-nowhere")],
            }
        )
    )


if __name__ == "__main__":
    main()
