"""A metadata store on a real SQLite file in a temporary directory, migrated once per session and copied per test
(migrating is most of a store test's time)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from airmirror.store import MetadataStore, create_store_engine


@pytest.fixture(scope="session")
def migrated_store_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("migrated-store") / "metadata.db"
    MetadataStore.open(f"sqlite:///{path}").dispose()
    return path


@pytest.fixture
def store_url(tmp_path: Path, migrated_store_file: Path) -> str:
    """The URL of a fresh, migrated store of this test's own."""
    path = tmp_path / "metadata.db"
    shutil.copyfile(migrated_store_file, path)
    return f"sqlite:///{path}"


@pytest.fixture
def store(store_url: str) -> Iterator[MetadataStore]:
    with MetadataStore(create_store_engine(store_url)) as opened:  # already migrated
        yield opened
