"""``airmirror translate``: one source group's position, translated, per partition (read-only).

Per partition the group committed on a routed topic: the source committed offset, the translated target offset
(``None``: not translatable; ``never`` is true when no later run will change that, see
:class:`~airmirror.checkpoints.translation.TranslatedOffset`), how many of the group's offsets are not yet replicated
(source last stable offset minus the larger of the committed offset and the flow's cursor; 0 for failback topics, whose
records all came from the target), and the newest checkpoint written.  Also the group's newest offset sync outcome on
the target, so a skipped active group shows here too.
"""

from __future__ import annotations

from dataclasses import dataclass

from airmirror.checkpoints.translation import TranslatedOffset, Translator
from airmirror.config import FlowConfig
from airmirror.errors import InputError
from airmirror.kafka.clients import source_admin
from airmirror.kafka.groups import committed_offsets, is_covered_group
from airmirror.kafka.offsets import partition_offsets
from airmirror.model import GroupSyncRecord, StoredCheckpoint
from airmirror.store import MetadataStore


@dataclass(frozen=True)
class PartitionPosition:
    """One partition's row; ``checkpoint_offset`` is the downstream offset of the newest checkpoint written."""

    topic: str
    partition: int
    target_topic: str
    committed_offset: int
    target_offset: int | None
    not_replicated: int
    checkpoint_offset: int | None
    never: bool = False


@dataclass(frozen=True)
class GroupInspection:
    """``covered``: checkpoints cover the group (``groups`` filter); ``sync``: its newest offset sync outcome."""

    flow: str
    group: str
    covered: bool
    partitions: list[PartitionPosition]
    sync: GroupSyncRecord | None


def inspect_group(flow: FlowConfig, store: MetadataStore, group: str) -> GroupInspection:
    """The group's positions (see the module docstring); a group without committed offsets on the flow's
    topics is an :class:`~airmirror.errors.InputError` naming ``--group``."""
    admin = source_admin(flow)
    translator = Translator(flow, store)
    offsets = {key: o.offset for key, o in committed_offsets(flow, admin, group, translator.routed_back).items()}
    if not offsets:
        raise InputError(f"--group: group '{group}' has no committed offsets on topics of flow {flow.name}")
    translations = translator.translate(offsets)
    forward = [key for key, t in translations.items() if not t.route.failback]
    ends = {key: o.stable_end for key, o in partition_offsets(admin, forward).items()}
    cursors = store.cursors(flow.name)
    checkpoints = {c.key: c for c in store.checkpoints(flow.name, group)}
    positions = [
        _position(t, ends.get(key), cursors.get(key), checkpoints.get(key)) for key, t in sorted(translations.items())
    ]
    syncs = store.group_syncs(flow.name, group)
    return GroupInspection(flow.name, group, is_covered_group(flow, group), positions, syncs[0] if syncs else None)


def _position(
    translation: TranslatedOffset, end: int | None, cursor: int | None, checkpoint: StoredCheckpoint | None
) -> PartitionPosition:
    committed = translation.upstream_offset
    missing = 0 if end is None else max(0, end - max(committed, cursor if cursor is not None else committed))
    return PartitionPosition(
        translation.route.topic,
        translation.partition,
        translation.route.target_topic,
        committed,
        translation.downstream_offset,
        missing,
        None if checkpoint is None else checkpoint.downstream_offset,
        translation.never,
    )
