"""How one copy task's buffer bound, ``airmirror.task.max.buffer.bytes`` (B), is split between what it holds.

A copy task holds records in three places; each gets a fixed share of B, so what the task buffers depends on B
alone, never on the length of its range or on librdkafka's defaults:

- **Reader prefetch, B/4** (the source consumer, :mod:`airmirror.replication.spark.range_reader`): librdkafka
  fetches while its queue holds fewer than ``queued.min.messages`` records and fewer than
  ``queued.max.messages.kbytes`` of key and value bytes, one fetch at a time.  So one fetch (``fetch.max.bytes``
  = ``max.partition.fetch.bytes`` = B/16; the consumer's ``message.max.bytes`` at most the fetch, as librdkafka
  requires) may land on a queue at its byte threshold (B/16), and the records' bookkeeping
  (:data:`RECORD_OVERHEAD_BYTES` each, B/8 in all) bounds the record count (librdkafka counts
  ``queued.min.messages`` per partition, so a read of many partitions shares it among them): B/16 + B/16 + B/8 = B/4.
- **Handed-over batches, B/4**: the records the reader hands over at once (one poll's messages, of any of
  the task's partitions) are held as consumed messages while they are produced; a record's key and value
  become Python bytes only for its own ``produce`` call, which copies them into the producer queue
  (:data:`HANDOVER_COPIES`: 1).  So a batch holds at most B/4 bytes, counted as the largest value read so far plus
  :data:`RECORD_OVERHEAD_BYTES` per record (:meth:`TaskBuffer.batch_records`), and never more than
  :data:`MAX_BATCH_RECORDS` records.
- **Producer queue, B/2** (the transactional producer, :mod:`airmirror.replication.spark.task_writer`):
  every record not yet acknowledged counts, in flight ones included: ``queue.buffering.max.kbytes`` of key and
  value bytes (B/4) and ``queue.buffering.max.messages`` records whose bookkeeping fills the other B/4.  The
  producer's ``message.max.bytes`` is at most B/4 (and 20 MiB unless set), so the largest record always fits
  the queue.

Contract: the shares sum to at most B (:attr:`TaskBuffer.total`; a share above librdkafka's upper limit for its
key is cut to that limit).  The shares are librdkafka's own limits plus an estimate of per-record bookkeeping,
so a task's real footprint stays near B without being counted byte by byte.  B is per task: a Spark executor
running N copy tasks at once holds up to N x B.

A flow's own client setting for one of these keys (``{source}.consumer.fetch.max.bytes``,
``{target}.producer.max.request.size`` in the file, any of them from a cluster's Airflow connection) is kept
when it is lower; a higher one is lowered to the share, with a warning naming the key, once per process
(:func:`bounded`): the safer of the two wins.  The keys are
:data:`~airmirror.config.flow_settings.TASK_BUFFER_CLIENT_KEYS`, whose values the config checks at load.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from airmirror.config.client_properties import is_whole_number
from airmirror.config.settings_registry import TASK_MAX_BUFFER_BYTES
from airmirror.errors import InputError
from airmirror.kafka.clients import ClientConfig

log = logging.getLogger(__name__)

RECORD_OVERHEAD_BYTES = 512  # librdkafka's and Python's bookkeeping per record beyond key and value (an estimate)
HANDOVER_COPIES = 1
MAX_BATCH_RECORDS = 10_000
MAX_QUEUED_MIN_MESSAGES = 10_000_000  # librdkafka's upper limits: queued.min.messages,
MAX_QUEUED_KBYTES = 2_097_151  # queued.max.messages.kbytes,
MAX_FETCH_BYTES = 1_000_000_000  # max.partition.fetch.bytes and the consumer's message.max.bytes
MAX_RECORD_BYTES = 20 * 1024 * 1024  # the producer's message.max.bytes when B/4 is larger

_warned: set[tuple[str, str, str]] = set()
"""The ``(client, key, value)`` settings :func:`bounded` has warned about in this process."""


@dataclass(frozen=True)
class TaskBuffer:
    """The split of ``max_bytes`` (B) described in the module docstring."""

    max_bytes: int = TASK_MAX_BUFFER_BYTES.value(None)

    @property
    def fetch_bytes(self) -> int:
        """``fetch.max.bytes`` and ``max.partition.fetch.bytes``: one fetch response, B/16 (librdkafka's limit
        at most)."""
        return min(MAX_FETCH_BYTES, self.max_bytes // 16)

    @property
    def prefetch_bytes(self) -> int:
        """Key and value bytes the consumer queues before it stops fetching, B/16 (librdkafka's limit at most)."""
        return min(MAX_QUEUED_KBYTES * 1024, self.max_bytes // 16)

    @property
    def prefetch_records(self) -> int:
        """Records the consumer queues before it stops fetching: their bookkeeping fills B/8."""
        return min(MAX_QUEUED_MIN_MESSAGES, max(1, self.max_bytes // 8 // RECORD_OVERHEAD_BYTES))

    @property
    def handover_bytes(self) -> int:
        """What the records of one handed-over batch may take, in all their copies: B/4."""
        return self.max_bytes // 4

    @property
    def producer_bytes(self) -> int:
        """Key and value bytes the producer queues, and its largest record: B/4."""
        return self.max_bytes // 4

    @property
    def producer_records(self) -> int:
        """Records the producer queues: their bookkeeping fills B/4."""
        return max(1, self.max_bytes // 4 // RECORD_OVERHEAD_BYTES)

    @property
    def total(self) -> int:
        """The sum of the shares, counted as the module docstring says: at most ``max_bytes``."""
        reader = self.fetch_bytes + self.prefetch_bytes + self.prefetch_records * RECORD_OVERHEAD_BYTES
        producer = self.producer_bytes + self.producer_records * RECORD_OVERHEAD_BYTES
        return reader + self.handover_bytes + producer

    def batch_records(self, largest_record: int) -> int:
        """How many records the reader may hand over at once, given the largest value (bytes) read so far (0
        before the first; keys are taken to be small beside the bookkeeping): at least 1, at most
        :data:`MAX_BATCH_RECORDS`."""
        per_record = HANDOVER_COPIES * (largest_record + RECORD_OVERHEAD_BYTES)
        return max(1, min(MAX_BATCH_RECORDS, self.handover_bytes // per_record))

    def consumer_limits(self) -> dict[str, int]:
        """The source consumer's librdkafka settings of the reader's share."""
        return {
            "fetch.max.bytes": self.fetch_bytes,
            "max.partition.fetch.bytes": self.fetch_bytes,
            "queued.max.messages.kbytes": max(1, self.prefetch_bytes // 1024),
            "queued.min.messages": self.prefetch_records,
            "message.max.bytes": self.fetch_bytes,  # librdkafka refuses a fetch.max.bytes below it
        }

    def producer_limits(self) -> dict[str, int]:
        """The transactional producer's librdkafka settings of the producer's share."""
        return {
            "queue.buffering.max.kbytes": max(1, self.producer_bytes // 1024),
            "queue.buffering.max.messages": self.producer_records,
            "message.max.bytes": min(MAX_RECORD_BYTES, self.producer_bytes),
        }


def bounded(settings: ClientConfig, limits: Mapping[str, int], client: str) -> dict[str, str | int]:
    """``settings`` with each key of ``limits`` at the lower of its own value and its limit (the limit when
    unset).  A value above the limit is lowered with a warning naming ``client`` and the key, logged once per
    ``(client, key, value)`` in this process (a module-level set remembers which were logged), so a flow
    replicating batch after batch warns once, not every batch.

    The properties file's values of these keys are refused at load when they are no non-negative integer
    (:data:`~airmirror.config.flow_settings.TASK_BUFFER_CLIENT_KEYS`); a cluster's Airflow connection is only
    resolved at run time, so a value from its extra is checked here: one that is not a non-negative integer is
    refused (:class:`~airmirror.errors.InputError`, naming ``client`` and the key)."""
    result: dict[str, str | int] = dict(settings)
    for key, limit in limits.items():
        given = settings.get(key)
        if given is not None and not is_whole_number(str(given)):
            raise InputError(f"{client} setting {key} = {given!r} is not a non-negative integer")
        if given is not None and int(given) > limit and (client, key, str(given)) not in _warned:
            _warned.add((client, key, str(given)))
            log.warning(
                "%s setting %s = %s exceeds its share of %s; using %d",
                client,
                key,
                given,
                TASK_MAX_BUFFER_BYTES.name,
                limit,
            )
        result[key] = limit if given is None else min(int(given), limit)
    return result
