"""MM2's offset-syncs topic, written from the exact runs of every committed batch (``emit.offset-syncs.enabled``).

airmirror translates from the exact runs in its metadata DB and needs no offset-syncs topic; it writes one so that
tools built on MM2's client (its ``OffsetSyncStore``, MM2 checkpoint connectors) see airmirror's copies too.

Contract:
- Topic and place are MM2's: with ``offset-syncs.topic.location = source`` (the default) the topic
  ``mm2-offset-syncs.{target}.internal`` on the source cluster, with ``target`` ``mm2-offset-syncs.{source}.internal``
  on the target; one partition, compacted, ``offset-syncs.topic.replication.factor`` replicas; records in MM2's
  ``OffsetSync`` format, keyed by source topic and partition.
- Syncs are exact: each names a copied record's source offset and its offset in the remote topic.  Per partition
  and batch they come in source order: the batch's first copied record, every ``offset.lag.max``-th copied record
  after it, counted across the batch's runs, and its last copied record, so MM2's translation of a position at the
  end of the batch is exact.  A hole of a run or a gap between runs (records a transform dropped, a compaction
  hole, transaction markers) starts no sync of its own: MM2's ``OffsetSyncStore`` translates a position after a sync
  to the sync's remote offset plus one, never past where the next copied record is, and at most ``offset.lag.max``
  copied records before it, as MM2's own syncs allow.  So a flow that drops every tenth record writes no more syncs
  than one that drops none.
- They are written after the batch's DB commit (an after-commit action): a batch that fails writes none, and a
  resumed batch writes its syncs once it commits.  A write that fails, or is not acknowledged within
  :data:`DELIVERY_TIMEOUT_S`, is logged and that batch's syncs stay missing (airmirror's own translation does not
  read them); a refused one fails the run, naming the ACL.
- A batch of N records gives about N / ``offset.lag.max`` syncs; they are made and written as they go, never held
  all at once, so the driver's memory does not grow with the batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain

from airmirror.config import FlowConfig
from airmirror.kafka.clients import admin_client
from airmirror.kafka.records import OutgoingRecord, write_records
from airmirror.kafka.topics import COMPACTED, ensure_internal_topic
from airmirror.mm2.wire_formats import OffsetSync
from airmirror.model import OffsetRun

REPLICATION_FACTOR_KEY = "offset-syncs.topic.replication.factor"
DELIVERY_TIMEOUT_S = 5.0
"""How long a batch waits for its syncs to be acknowledged: they only inform, so a source broker that is down
costs a batch this much at most (and that batch's syncs)."""


def offset_syncs(topic: str, partition: int, runs: Iterable[OffsetRun], lag_max: int) -> Iterator[OffsetSync]:
    """The syncs of one partition's ``runs`` of one batch (exact, in source order), per the module contract, one at
    a time."""
    step = max(lag_max, 1)
    copied = 0  # the copied records of the runs before this one
    last: OffsetSync | None = None  # the newest sync yielded
    final: OffsetSync | None = None  # the newest run's last record
    for run in runs:
        for index in range(-(-copied // step) * step, copied + run.copies, step):
            last = OffsetSync(
                topic, partition, run.upstream_of_copy(index - copied), run.downstream_start + index - copied
            )
            yield last
        copied += run.copies
        final = OffsetSync(topic, partition, run.upstream_of_copy(run.copies - 1), run.downstream_stop - 1)
    if final is not None and final != last:
        yield final


def write_offset_syncs(flow: FlowConfig, runs: dict[tuple[str, int], list[OffsetRun]], timestamp_ms: int) -> int:
    """Write the syncs of ``runs`` (source ``(topic, partition)`` -> its runs of one batch, in order) to the
    flow's offset-syncs topic, creating it first if needed; returns how many were written."""
    syncs = chain.from_iterable(
        offset_syncs(topic, partition, parts, flow.offset_syncs.lag_max)
        for (topic, partition), parts in sorted(runs.items())
    )
    first = next(syncs, None)
    if first is None:
        return 0
    alias, topic = flow.offset_syncs_place()
    ensure_internal_topic(flow, admin_client(flow, alias), topic, COMPACTED, REPLICATION_FACTOR_KEY)
    records = (OutgoingRecord(s.key(), s.value(), timestamp_ms) for s in chain((first,), syncs))
    return write_records(flow, topic, records, cluster=alias, timeout=DELIVERY_TIMEOUT_S)
