"""The pure rule of checkpoint emission (checkpoint_emitter rule 4, monotonic per group-partition).  Writing
checkpoints to real clusters: tests/integration/test_checkpoints.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from airmirror.checkpoints.checkpoint_emitter import is_newer
from airmirror.model import StoredCheckpoint

WRITTEN = StoredCheckpoint(
    group="app",
    topic="orders",
    partition=0,
    remote_topic="a.orders",
    upstream_offset=100,
    downstream_offset=90,
    metadata="",
    emitted_at=datetime(2026, 11, 23, tzinfo=UTC),
)


def test_the_first_checkpoint_of_a_group_partition_is_written():
    assert is_newer(WRITTEN, None)


@pytest.mark.parametrize(
    ("upstream", "downstream", "written"),
    [
        (150, 140, True),  # the group moved on and so did its translation
        (150, 90, False),  # moved on upstream, but the translation did not advance (not replicated yet)
        (100, 90, False),  # the same position again
        (50, 45, True),  # the group rewound on the source: MM2 writes the lower checkpoint
        (50, 95, True),  # rewound, whatever the downstream offset
    ],
)
def test_a_later_checkpoint_is_written_when_the_group_rewound_or_its_translation_advanced(
    upstream, downstream, written
):
    assert is_newer(replace(WRITTEN, upstream_offset=upstream, downstream_offset=downstream), WRITTEN) is written
