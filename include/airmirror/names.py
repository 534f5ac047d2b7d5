"""Every name airmirror gives to something it owns on a cluster or in Airflow, built in one place.

Contract: two different flows (or two different source partitions of one flow) never share a name.

* Kafka-side names (transactional ids, consumer groups) are built from *encoded* parts joined with ``-``:
  each part is percent-encoded with only ``[A-Za-z0-9._~]`` left as is, so ``-`` inside an alias or topic
  becomes ``%2D`` and the join cannot be read two ways.  Flow ``us->dr`` with topic ``dr-orders`` gets
  ``airmirror-us-dr-dr%2Dorders-0``; flow ``us-dr->dr`` with topic ``orders`` gets
  ``airmirror-us%2Ddr-dr-orders-0``.  Plain names (letters, digits, dots, underscores) read as they are.
* Topic names can only hold ``[A-Za-z0-9._-]``; airmirror's only own topic, the batch log, is named by the
  source alias alone and lives on the target, so two flows into one target differ by their source alias.
* Airflow DAG ids cannot hold ``%``, so they keep aliases readable (anything outside ``[A-Za-z0-9_-]``
  becomes ``_``); flows whose DAG ids would still collide are rejected when the config is loaded
  (:func:`airmirror.config.mirror_config.load_config`).
"""

from __future__ import annotations

import re
from urllib.parse import quote

_DAG_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def encode_part(part: str) -> str:
    """One name part, percent-encoded so that ``-`` never appears inside it (``quote`` alone always leaves
    ``-`` as is, so it is encoded by hand; ``%`` itself is encoded by ``quote``, so this stays reversible)."""
    return quote(part, safe="._~").replace("-", "%2D")


def joined(*parts: str | int) -> str:
    """``parts`` encoded and joined with ``-``: distinct part tuples give distinct strings."""
    return "-".join(encode_part(str(part)) for part in parts)


GROUP_PREFIX = "airmirror-"
"""Every consumer group airmirror uses starts with it; checkpoints never cover such a group."""


def reader_group(purpose: str) -> str:
    """The group id of a consumer that only reads and never commits (``purpose``: ``range``, ``status`` ...)."""
    return f"{GROUP_PREFIX}{purpose}-reader"


def transactional_id(source: str, target: str, topic: str, partition: int) -> str:
    """The producer ``transactional.id`` an earlier airmirror gave one source partition's copies (one copy task
    per partition); kept only to fence such attempts in a batch begun before copy tasks copied many partitions
    (:class:`airmirror.model.PerPartitionJobs`).  It starts with :func:`transactional_id_prefix`."""
    return f"{transactional_id_prefix(source, target)}{joined(topic, partition)}"


def copy_task_transactional_ids(source: str, target: str, index: int) -> tuple[str, str]:
    """The ``transactional.id`` of each of the two producers of copy task ``index`` of flow ``source->target``'s
    batches, which take turns chunk by chunk (rule 10 of :mod:`airmirror.replication.spark.task_writer`): fixed across
    attempts, both start with :func:`transactional_id_prefix`, and never equal a :func:`transactional_id` (``~``
    cannot occur in an encoded topic name, and those ids hold a ``-`` after the prefix).  The first is the id of the
    task's one producer in airmirror versions before the turns, so a resumed batch of theirs is fenced by it."""
    first = f"{transactional_id_prefix(source, target)}~copy{index}"
    return first, f"{first}~1"


def transactional_id_prefix(source: str, target: str) -> str:
    """What every transactional id of flow ``source->target`` starts with (and no other flow's does)."""
    return f"{GROUP_PREFIX}{joined(source, target)}-"


def anchor_group(source: str, target: str) -> str:
    """The target-cluster group whose transactional offset commits are the fast path to each partition's
    last committed copy (see :mod:`airmirror.replication.spark.batch_log`)."""
    return f"{GROUP_PREFIX}eos-{joined(source, target)}"


def source_progress_group(source: str, target: str) -> str:
    """The source-cluster group whose committed offsets show the flow's lag to any lag tool."""
    return f"{GROUP_PREFIX}{joined(source, target)}"


def batch_log_topic(source: str) -> str:
    """The batch-log topic on the target; ``.internal`` keeps it out of every replication flow."""
    return f"airmirror-batches.{source}.internal"


def dag_alias(alias: str) -> str:
    """A cluster alias as it appears in a DAG id."""
    return _DAG_ID_UNSAFE.sub("_", alias)


def dag_id(source: str, target: str) -> str:
    """``airmirror__{source}__{target}`` with aliases made DAG-id safe (see the module docstring)."""
    return f"airmirror__{dag_alias(source)}__{dag_alias(target)}"
