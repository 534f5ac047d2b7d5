"""Why a copy task's two producers take turns (issue 35): the cost of back-to-back chunk transactions on one broker.

A live stream commits a chunk and begins the next at once.  A commit returns once the transaction coordinator has
logged it; the coordinator then writes the markers, and until they are written it answers the same transactional id's
next ``AddPartitionsToTxn`` with CONCURRENT_TRANSACTIONS, which librdkafka retries 20 ms later.  This script runs
chunk transactions shaped like a live chunk (``--records`` 1 KiB records over ``--partitions`` partitions, flush, a
batch-log record per partition, the anchors' offset commit, commit) back to back on a fresh local broker, first
``--warm-up`` of them (a fresh broker's JIT), then ``--chunks`` under each mode:

- ``one``: one producer, as a task had before the turns;
- ``turns``: two producers taking turns, one chunk each, as a task has now.

It prints, per mode, the p50/p90/p99 of the chunk's first flush (where a refused ``AddPartitionsToTxn`` waits) and of
the whole chunk, and the share of chunks whose flush took over 20 ms.  ``python benchmarks/transaction_turns.py``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka_io import create_topic

from airmirror.devtools.local_kafka import free_port, start_broker, stop_broker

DATA, LOG = "turns-data", "turns-log"
RETRY_MS = 20.0
"""librdkafka's wait before asking again for partitions refused with CONCURRENT_TRANSACTIONS."""


def chunk(producer: Producer, group: object, partitions: int, records: int, number: int) -> tuple[float, float]:
    """One chunk transaction; returns (ms to the end of its flush, ms for the whole chunk)."""
    started = time.perf_counter()
    producer.begin_transaction()
    value = b"x" * 1024
    for index in range(records):
        producer.produce(DATA, value, b"k", partition=index % partitions)
    producer.flush(30)
    flushed = time.perf_counter()
    for partition in range(partitions):
        producer.produce(LOG, b"runs and progress", str(partition).encode(), partition=0)
    offsets = [TopicPartition(DATA, partition, number) for partition in range(partitions)]
    producer.send_offsets_to_transaction(offsets, group, 30)
    producer.commit_transaction(30)
    return (flushed - started) * 1000, (time.perf_counter() - started) * 1000


def run_mode(producers: list[Producer], group: object, args: argparse.Namespace, count: int) -> dict[str, float]:
    """``count`` chunks, the producers taking turns (one producer: every chunk); the figures of :func:`chunk`."""
    flushes, chunks = [], []
    for number in range(count):
        flush_ms, chunk_ms = chunk(producers[number % len(producers)], group, args.partitions, args.records, number)
        flushes.append(flush_ms)
        chunks.append(chunk_ms)
    return {
        **{f"flush_p{q}": percentile(flushes, q) for q in (50, 90, 99)},
        **{f"chunk_p{q}": percentile(chunks, q) for q in (50, 90, 99)},
        "chunk_mean": round(statistics.fmean(chunks), 1),
        "flush_over_20_ms": round(sum(f > RETRY_MS for f in flushes) / len(flushes), 3),
    }


def percentile(values: list[float], q: int) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, len(ordered) * q // 100)], 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--records", type=int, default=18, help="records per chunk")
    parser.add_argument("--warm-up", type=int, default=1500, help="chunks run first, unmeasured")
    parser.add_argument("--chunks", type=int, default=1000, help="chunks measured per mode")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="airmirror-turns-"))
    broker = start_broker("turns", free_port(), home=home)
    try:
        create_topic(broker.bootstrap, DATA, args.partitions)
        create_topic(broker.bootstrap, LOG, 1)
        producers = []
        for name in ("turns-0", "turns-1"):
            producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": name, "linger.ms": 20})
            producer.init_transactions(60)
            producers.append(producer)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "turns-anchors"})
        group = consumer.consumer_group_metadata()
        run_mode(producers, group, args, args.warm_up)
        for mode, taking_turns in (("one", producers[:1]), ("turns", producers)):
            print(mode, run_mode(taking_turns, group, args, args.chunks), flush=True)
        consumer.close()
    finally:
        stop_broker("turns", home=home)


if __name__ == "__main__":
    main()
