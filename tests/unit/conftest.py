"""Fixtures the fast tier shares across packages."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.schemas.fake_registry import FakeRegistry


@pytest.fixture
def source() -> Iterator[FakeRegistry]:
    """A source cluster's schema registry (in-process fake), ids from 1.  ``tests/unit/replication/spark`` names
    its Kafka stand-ins ``source`` and ``target``: its conftest's fixtures take precedence there."""
    with FakeRegistry(first_id=1) as registry:
        yield registry


@pytest.fixture
def target() -> Iterator[FakeRegistry]:
    """A target cluster's schema registry (in-process fake), ids from 100, so that they differ from the source's."""
    with FakeRegistry(first_id=100) as registry:
        yield registry
