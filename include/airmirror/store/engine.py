"""The metadata store's database: engines (with SQLite's locking set up), transactions, and schema migrations.

* **Engines**: :func:`create_store_engine` pre-pings pooled connections.  On SQLite every transaction starts
  with ``BEGIN IMMEDIATE`` (so a read-check-write transaction holds the write lock from its first read),
  writers wait up to :data:`SQLITE_BUSY_TIMEOUT_SECONDS` for a lock and foreign keys are enforced.  A
  read-only engine (``read_only=True``) creates nothing and every write through it fails: SQLite opens the
  existing file with ``mode=ro``, and PostgreSQL sessions start with ``default_transaction_read_only``.
* **Errors**: :func:`transaction` turns an unreachable or failing database into
  :class:`~airmirror.errors.ReplicationFailure` naming the database URL with its password and secret query
  parameters masked (:func:`airmirror.config.db_urls.masked_db_url`).
* **Migrations**: :func:`head_revision` is the newest migration; :func:`upgrade_to_head` runs the Alembic
  migrations in ``migrations/`` inside the caller's transaction; on PostgreSQL an advisory transaction lock
  serialises concurrent migrations of one database.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import URL, Connection, Engine, create_engine, event, func, make_url, select
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.pool import ConnectionPoolEntry

from airmirror.config.db_urls import masked_db_url
from airmirror.errors import ReplicationFailure
from airmirror.store.schema import VERSION_TABLE

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
SQLITE_BUSY_TIMEOUT_SECONDS = 30
_PG_MIGRATION_LOCK = 0x616972_6D6972
"""PostgreSQL advisory lock key ("airmir") serialising concurrent migrations of one database."""


def alembic_config(connection: Connection) -> Config:
    """An Alembic config for the store's migrations that runs them on ``connection``.

    No ``alembic.ini`` is needed; pass the result to ``alembic.command`` functions (``upgrade``,
    ``downgrade``, ``revision(autogenerate=True)`` when writing a new migration).
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def create_store_engine(url: str | URL, *, read_only: bool = False) -> Engine:
    """A pre-pinging engine for ``url``.

    SQLite: the file's directory is created, writers wait up to 30 s for a lock, foreign keys are
    enforced and every transaction starts with ``BEGIN IMMEDIATE`` so that a read-check-write
    transaction holds the write lock from its first read.

    ``read_only``: nothing is created and every write fails.  SQLite opens the existing file with
    ``mode=ro`` (a missing file fails to connect) and starts transactions with a plain ``BEGIN``;
    PostgreSQL sessions start with ``default_transaction_read_only = on``.
    """
    url = make_url(url)
    if url.get_backend_name() != "sqlite":
        options = {"connect_args": {"options": "-c default_transaction_read_only=on"}} if read_only else {}
        return create_engine(url, pool_pre_ping=True, **options)
    if read_only:
        url = _read_only_sqlite(url)
    elif url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, pool_pre_ping=True, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
    event.listen(engine, "connect", _sqlite_on_connect)
    event.listen(engine, "begin", _sqlite_on_read_only_begin if read_only else _sqlite_on_begin)
    return engine


def _read_only_sqlite(url: URL) -> URL:
    """``url``'s database file as a read-only SQLite URI (``file:...?mode=ro``)."""
    if not url.database or url.database == ":memory:":
        raise ValueError("a read-only SQLite store needs a database file")
    uri = Path(url.database).absolute().as_uri()
    return url.set(database=uri).update_query_dict({"mode": "ro", "uri": "true"})


def _sqlite_on_connect(dbapi_connection: Any, connection_record: ConnectionPoolEntry) -> None:
    dbapi_connection.isolation_level = None
    dbapi_connection.execute("PRAGMA foreign_keys = ON")


def _sqlite_on_begin(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def _sqlite_on_read_only_begin(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN")


@contextmanager
def transaction(engine: Engine, action: str) -> Iterator[Connection]:
    """One database transaction; database failures become :class:`ReplicationFailure` naming the masked URL."""
    try:
        with engine.begin() as connection:
            yield connection
    except (OperationalError, InterfaceError) as exc:
        reason = str(exc.orig).strip() or type(exc.orig).__name__
        raise ReplicationFailure(f"metadata store {masked_db_url(engine.url)}: could not {action}: {reason}") from exc


def upgrade_to_head(connection: Connection, where: str) -> None:
    """Upgrade the schema to the newest migration in ``connection``'s transaction; safe to run concurrently.

    ``where`` (the masked database URL) names the store when a migration fails.
    """
    if connection.dialect.name == "postgresql":
        connection.execute(select(func.pg_advisory_xact_lock(_PG_MIGRATION_LOCK)))
    try:
        command.upgrade(alembic_config(connection), "head")
    except CommandError as exc:
        raise ReplicationFailure(f"metadata store {where}: could not migrate the schema: {exc}") from exc


@cache
def head_revision() -> str:
    """The newest migration's revision: the schema this airmirror reads and writes."""
    head = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations in {MIGRATIONS_DIR}")
    return head


def current_revision(connection: Connection) -> str | None:
    """The Alembic revision the database is at, ``None`` before the first migration."""
    return MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE}).get_current_revision()


class EngineHolder:
    """Holds the store's engine; the metadata store's parts (:mod:`.batches`, :mod:`.checkpoints`,
    :mod:`.heartbeats`, :mod:`.incarnations`) share one and run every operation in :meth:`_transaction`."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._where = masked_db_url(engine.url)

    def _transaction(self, action: str) -> AbstractContextManager[Connection]:
        """One database transaction; database failures become :class:`ReplicationFailure`."""
        return transaction(self._engine, action)
