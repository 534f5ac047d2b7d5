"""Row helpers shared by the metadata store's modules: bulk insert and update, upsert, dataclass fields as
columns, and the store's clock (timezone-aware UTC)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Column, Connection, Row, Table, bindparam, insert, update
from sqlalchemy.dialects import postgresql, sqlite

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


def utcnow() -> datetime:
    return datetime.now(UTC)


def insert_many(connection: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    if rows:
        connection.execute(insert(table), rows)


def insert_one(connection: Connection, table: Table, row: Mapping[str, Any]) -> int:
    """Insert ``row`` into ``table``, whose primary key is one integer column the database assigns; the new key."""
    (key_column,) = table.primary_key.columns
    key: int = connection.execute(insert(table).values(row).returning(key_column)).scalar_one()
    return key


def update_many(connection: Connection, table: Table, keys: Sequence[str], rows: list[dict[str, Any]]) -> None:
    """Update the rows matching each row's ``keys`` columns, setting its other columns."""
    if not rows:
        return
    statement = update(table).where(*(table.c[key] == bindparam(f"match_{key}") for key in keys))
    connection.execute(
        statement,
        [{(f"match_{column}" if column in keys else column): value for column, value in row.items()} for row in rows],
    )


def upsert(connection: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert ``rows``; a row whose primary key exists replaces that row's other columns."""
    if not rows:
        return
    dialect_insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
    statement = dialect_insert(table)
    keys = [column.name for column in table.primary_key.columns]
    statement = statement.on_conflict_do_update(
        index_elements=keys,
        set_={column.name: statement.excluded[column.name] for column in table.columns if column.name not in keys},
    )
    connection.execute(statement, rows)


def as_columns(
    value: DataclassInstance, renamed: Mapping[str, str] | None = None, *, left_out: Iterable[str] = ()
) -> dict[str, Any]:
    """A dataclass's fields as columns: field ``f`` goes to column ``renamed.get(f, f)``; fields named in
    ``left_out`` are left out."""
    renamed = renamed or {}
    skipped = set(left_out)
    return {renamed.get(f.name, f.name): getattr(value, f.name) for f in fields(value) if f.name not in skipped}


def columns_of(
    table: Table, cls: type[DataclassInstance], renamed: Mapping[str, str] | None = None
) -> tuple[Column[Any], ...]:
    """The columns of ``table`` that :func:`from_columns` reads to build the dataclass ``cls``."""
    renamed = renamed or {}
    return tuple(table.c[renamed.get(f.name, f.name)] for f in fields(cls))


def from_columns(cls: type[T], row: Row[Any], renamed: Mapping[str, str] | None = None) -> T:
    """The dataclass ``cls`` built from a result row: field ``f`` from column ``renamed.get(f, f)``."""
    renamed = renamed or {}
    columns = row._mapping
    return cls(**{f.name: columns[renamed.get(f.name, f.name)] for f in fields(cls)})
