"""The metadata store as callers open it (:mod:`airmirror.store.metadata_store`) on SQLite: opened to write it is at
this airmirror's schema; opened to read it checks the schema first and never writes.  Migrations themselves and
PostgreSQL: tests/integration/test_metadata_store.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from airmirror.errors import ReplicationFailure
from airmirror.model import PlannedRange
from airmirror.store import MetadataStore
from airmirror.store.engine import head_revision
from airmirror.store.metadata_store import SchemaNotCurrentError


def test_a_store_opened_to_write_is_at_the_newest_schema(store: MetadataStore) -> None:
    assert store.schema_version() == head_revision()
    store.check_schema()


def test_a_store_opened_to_read_never_writes(store_url: str) -> None:
    plan = PlannedRange(topic="orders", partition=0, start=0, end=10, remote_topic="a.orders")
    with MetadataStore.open_read_only(store_url) as read_only:
        read_only.check_schema()
        assert read_only.cursors("a->b") == {}

        with pytest.raises(ReplicationFailure, match="could not begin a batch"):
            read_only.begin_batch("a->b", [plan], {})


def test_a_store_without_this_airmirrors_schema_is_refused_to_readers(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()

    with MetadataStore.open_read_only(f"sqlite:///{path}") as read_only, pytest.raises(SchemaNotCurrentError) as old:
        read_only.check_schema()

    assert (old.value.revision, old.value.head) == (None, head_revision())
    assert "no schema yet" in str(old.value)
