"""What a flow DAG's tasks hand each other, and Airflow, through XCom.

Contract: every task of a flow DAG returns one of these values (or ``sync_topics``' list of
:class:`~airmirror.kafka.topics.TopicMapping`) as :func:`~airmirror.model.to_json` writes it, and a task that
reads another's value reads it back at once with :func:`~airmirror.model.from_json`, which fails on a missing,
unknown or mistyped key.  None of them holds a secret: names of topics, counts and batch ids only.

=================  =====================================================================================
task               value
=================  =====================================================================================
``sync_topics``    ``list[TopicMapping]``: the topics the run replicates
``plan_batch``     :class:`PlannedRun`
``replicate``      :class:`BatchCopied` (one batch in the worker), :class:`LiveCopied` (a live run in the
                   worker); nothing through spark-submit
``record_batch``   :class:`RunRecorded`
``verify``         :meth:`airmirror.model.Verification.as_dict` (written only: nothing reads it back)
=================  =====================================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

from airmirror.dag_factory.assets import Copied


@dataclass(frozen=True, kw_only=True)
class PlannedRun:
    """``plan_batch``: the batch the run stored or resumed (``batch_id`` ``None`` in a dry run or when there is
    nothing to copy), how many partitions and offsets it plans, and ``first_batch``, the first batch id this run
    may have committed (what ``record_batch`` counts from)."""

    batch_id: int | None
    partitions: int
    offsets: int
    resumed: bool
    first_batch: int


@dataclass(frozen=True, kw_only=True)
class BatchCopied:
    """``replicate`` of one batch in the worker: the batch copied (``None``: there was none) and its records."""

    batch_id: int | None
    records: int


@dataclass(frozen=True, kw_only=True)
class LiveCopied:
    """``replicate`` of a live run in the worker: the batches it committed, their records and bytes."""

    batches: int
    records: int
    bytes: int


@dataclass(frozen=True, kw_only=True)
class RunRecorded:
    """``record_batch``: what every batch this run committed copied (read back from the metadata DB), the newest
    of them (``None``: none), and per remote topic (:data:`~airmirror.dag_factory.assets.Copied`)."""

    batch_id: int | None
    records: int
    bytes: int
    copied: Copied
