"""Build the local Kafka nodes' class-data-sharing archive (:mod:`airmirror.devtools.local_kafka.class_archive`).

``python -m airmirror.devtools.local_kafka.class_archive_build`` (``make setup`` runs it) prints the archive's path.
A separate Python process starts a one-node cluster in a temporary home whose JVMs dump their classes at exit, writes
and reads a topic in a transaction and stops the cluster; only a complete dump is renamed into place (atomically),
so concurrent builds and a killed build never leave a half-written archive under the final name.  A new archive
replaces the archives of the same Kafka version made for another JVM or jars folder, so the cache holds one.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from airmirror.devtools.local_kafka.broker import start_broker, stop_broker
from airmirror.devtools.local_kafka.class_archive import DUMP_OPTION, archive_path
from airmirror.devtools.local_kafka.jars import KAFKA_VERSION, kafka_classpath
from airmirror.devtools.local_kafka.nodes import free_port, java_executable
from airmirror.replication.spark.class_archive_build import dump_into_place

MODULE = "airmirror.devtools.local_kafka.class_archive_build"
BUILD_TIMEOUT_S = 300.0
DUMP_TOPIC = "airmirror-class-archive"


def build_archive() -> Path:
    """Make the archive unless it exists; returns its path.

    The dump runs in a child process (see the module docstring) into a temporary file next to the archive, renamed
    into place only when the child exited cleanly with a dump written; the temporary file is removed otherwise.
    Raises :class:`RuntimeError` with the child's output when the dump failed."""
    path = archive_path(java_executable(), kafka_classpath())
    if path.is_file():
        return path
    for other in path.parent.glob(f"kafka-node-{KAFKA_VERSION}-*.jsa"):
        other.unlink(missing_ok=True)  # made for another JVM or jars folder
    dump_into_place(MODULE, path, "the Kafka class archive", BUILD_TIMEOUT_S)
    return path


def dump(partial: Path) -> None:
    """In the child: a one-node cluster whose JVMs dump their classes into ``partial`` at exit serves a topic's
    writes and reads, then stops (a clean exit, so the node's JVM writes its dump)."""
    os.environ["JDK_JAVA_OPTIONS"] = f"{os.environ.get('JDK_JAVA_OPTIONS', '')} {DUMP_OPTION}={partial}"
    with tempfile.TemporaryDirectory(prefix="airmirror-kafka-archive-") as home:
        try:
            exercise(start_broker("class-archive", free_port(), home=Path(home)).bootstrap)
        finally:
            stop_broker("class-archive", home=Path(home))


def exercise(bootstrap: str) -> None:
    """What a node does for airmirror, once: a topic created, a record written in a transaction, read back and its
    offset committed.  The clients are closed before returning."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(DUMP_TOPIC, 1, 1)])[DUMP_TOPIC].result(timeout=60)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": DUMP_TOPIC})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(DUMP_TOPIC, b"class archive")
    producer.commit_transaction(60)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": DUMP_TOPIC, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([DUMP_TOPIC])
        message = consumer.poll(60)
        if message is None or message.error():
            raise RuntimeError(f"the class archive's record was not read back: {message and message.error()}")
        consumer.commit(message=message, asynchronous=False)
    finally:
        consumer.close()


def main(argv: list[str]) -> int:
    if argv[:1] == ["--dump"] and len(argv) == 2:
        dump(Path(argv[1]))
        return 0
    if argv:
        print(f"usage: python -m {MODULE}", file=sys.stderr)
        return 2
    print(build_archive())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
