"""Where a range stands: the one reading of a range's newest committed progress, for the driver and the copy tasks.

The progress is found by :func:`airmirror.replication.spark.batch_log.look_up_progress` (anchors, then what the
driver knows, then a bounded scan of the batch log).  :func:`range_standing` tells what it means for the range of
batch ``batch_id`` that starts at ``start``.  Rules, in order:

1. **Another incarnation says nothing.**  Progress written for another incarnation of the source or the remote
   topic (its topic ids differ from the range's) is not this copy's: the range is :class:`Untouched`.  The driver
   does not tell incarnations apart (it passes no ids); the tasks do, before they write.
2. **This batch's progress** is the range's: :class:`Done` once it says so, else :class:`PartCopied` at its
   position.
3. **An earlier batch ahead of the cursor.**  An earlier batch's progress of the same incarnations past the range's
   start, when the range does not start afresh (``resets``: a reset or truncated source), means the target holds
   records the metadata DB does not know of: :class:`TargetAhead`, and writing would copy them twice.
4. Otherwise the range is :class:`Untouched`: this batch committed nothing of it.  Its copy continues the remote
   partition at the downstream position found, when that is the remote topic's incarnation, else at 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from airmirror.replication.spark.batch_log import Progress


@dataclass(frozen=True)
class Untouched:
    """This batch has committed nothing of the range (rules 1 and 4); the remote partition's records end at
    ``downstream_position`` as far as the progress found says (0 when it says nothing of this incarnation)."""

    downstream_position: int


@dataclass(frozen=True)
class PartCopied:
    """This batch has committed the range up to ``progress.position`` (rule 2)."""

    progress: Progress


@dataclass(frozen=True)
class Done:
    """This batch has finished the range, at ``progress.position`` (rule 2)."""

    progress: Progress


@dataclass(frozen=True)
class TargetAhead:
    """An earlier batch (``progress.batch_id``) copied the range's partition past its start (rule 3)."""

    progress: Progress


Standing = Untouched | PartCopied | Done | TargetAhead


@dataclass(frozen=True)
class Incarnations:
    """The topic ids of the incarnations a range copies, as its task knows them (``None``: the broker gave none)."""

    source_topic_id: str | None
    remote_topic_id: str | None


def range_standing(
    batch_id: int,
    found: Progress | None,
    *,
    start: int,
    resets: bool = False,
    incarnations: Incarnations | None = None,
) -> Standing:
    """Where the range of batch ``batch_id`` starting at ``start`` stands, from the newest committed progress
    ``found`` of its partition (the module's rules; ``incarnations`` ``None``: the driver's view, rule 1)."""
    if found is None:
        return Untouched(0)
    same = incarnations is None or (
        found.source_topic_id == incarnations.source_topic_id and found.remote_topic_id == incarnations.remote_topic_id
    )
    if same and found.batch_id == batch_id:
        return Done(found) if found.done else PartCopied(found)
    if same and not resets and found.position > start:
        return TargetAhead(found)
    same_remote = incarnations is None or found.remote_topic_id == incarnations.remote_topic_id
    return Untouched(found.downstream_position if same_remote else 0)


def committed_by_batch(standing: Standing) -> bool:
    """Whether the batch has committed any of the range: it is part-copied or done."""
    return isinstance(standing, PartCopied | Done)
