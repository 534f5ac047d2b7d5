"""The metadata store's database: engines (with SQLite's locking set up), transactions, and schema migrations.

* **Engines**: :func:`create_store_engine` pre-pings pooled connections.  On SQLite the database is in WAL mode
  (readers never block a writer, nor a writer them), every transaction that may write starts with
  ``BEGIN IMMEDIATE`` (so a read-check-write transaction holds the write lock from its first read) while one
  that only reads (``transaction(..., reads_only=True)``) takes no lock, writers wait up to
  :data:`SQLITE_BUSY_TIMEOUT_SECONDS` for a lock and foreign keys are enforced.  A process frozen (SIGSTOP)
  in a read therefore holds up nobody; one frozen inside a write transaction (its statements run back to back,
  under a millisecond) holds the write lock until it thaws or dies, which SQLite cannot break: a store shared
  by hosts that may freeze belongs on PostgreSQL, whose sessions end an idle transaction
  (:data:`PG_IDLE_IN_TRANSACTION_S`).  A
  read-only engine (``read_only=True``) creates nothing and every write through it fails: SQLite opens the
  existing file with ``mode=ro``, and PostgreSQL sessions start with ``default_transaction_read_only``.
* **Errors**: :func:`transaction` turns an unreachable or failing database into
  :class:`~airmirror.errors.ReplicationFailure` naming the database URL with its password and secret query
  parameters masked (:func:`airmirror.config.db_urls.masked_db_url`).
* **Migrations**: :func:`head_revision` is the newest migration; :func:`upgrade_to_head` runs the Alembic
  migrations in ``migrations/`` inside the caller's transaction; on PostgreSQL an advisory transaction lock
  serialises concurrent migrations of one database.  A store already at head is not locked to find that out.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import cache
from pathlib import Path
from typing import Any, Protocol, Self

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
_READS_ONLY = "airmirror_reads_only"
"""The execution option that marks a transaction which only reads: on SQLite it begins without taking a lock."""
PG_IDLE_IN_TRANSACTION_S = 30
"""PostgreSQL ends a session whose transaction stayed idle this long: a frozen holder (a VM stopped mid-transaction)
then releases the rows it locked, the flow's lease row among them (a guarded write locks it), and the next run can
take the flow over once the lease expired.  Every transaction of the store runs its statements back to back."""
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

    SQLite: the file's directory is created, the database is put in WAL mode, writers wait up to 30 s for a
    lock, foreign keys are enforced and every transaction that may write starts with ``BEGIN IMMEDIATE`` so
    that a read-check-write transaction holds the write lock from its first read; one that only reads takes
    no lock.

    PostgreSQL: sessions end a transaction left idle for :data:`PG_IDLE_IN_TRANSACTION_S`.

    ``read_only``: nothing is created and every write fails.  SQLite opens the existing file with
    ``mode=ro`` (a missing file fails to connect) and starts transactions with a plain ``BEGIN``;
    PostgreSQL sessions start with ``default_transaction_read_only = on``.
    """
    url = make_url(url)
    if url.get_backend_name() != "sqlite":
        settings = f"-c idle_in_transaction_session_timeout={PG_IDLE_IN_TRANSACTION_S * 1000}"
        if read_only:
            settings += " -c default_transaction_read_only=on"
        return create_engine(url, pool_pre_ping=True, connect_args={"options": settings})
    if read_only:
        url = _read_only_sqlite(url)
    elif url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, pool_pre_ping=True, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
    event.listen(engine, "connect", _sqlite_on_read_only_connect if read_only else _sqlite_on_connect)
    event.listen(engine, "begin", _sqlite_on_read_only_begin if read_only else _sqlite_on_begin)
    return engine


def _read_only_sqlite(url: URL) -> URL:
    """``url``'s database file as a read-only SQLite URI (``file:...?mode=ro``)."""
    if not url.database or url.database == ":memory:":
        raise ValueError("a read-only SQLite store needs a database file")
    uri = Path(url.database).absolute().as_uri()
    return url.set(database=uri).update_query_dict({"mode": "ro", "uri": "true"})


def _sqlite_on_read_only_connect(dbapi_connection: Any, connection_record: ConnectionPoolEntry) -> None:
    dbapi_connection.isolation_level = None
    dbapi_connection.execute("PRAGMA foreign_keys = ON")


def _sqlite_on_connect(dbapi_connection: Any, connection_record: ConnectionPoolEntry) -> None:
    _sqlite_on_read_only_connect(dbapi_connection, connection_record)
    dbapi_connection.execute("PRAGMA journal_mode = WAL")


def _sqlite_on_begin(connection: Connection) -> None:
    reads_only = connection.get_execution_options().get(_READS_ONLY, False)
    connection.exec_driver_sql("BEGIN" if reads_only else "BEGIN IMMEDIATE")


def _sqlite_on_read_only_begin(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN")


@contextmanager
def transaction(engine: Engine, action: str, *, reads_only: bool = False) -> Iterator[Connection]:
    """One database transaction; database failures become :class:`ReplicationFailure` naming the masked URL.

    ``reads_only``: the transaction only reads, so on SQLite it takes no lock (a write in it would then wait for
    the write lock at its first write statement, and may fail if another writer committed first)."""
    try:
        with engine.connect() as connection:
            if reads_only:
                connection.execution_options(**{_READS_ONLY: True})
            with connection.begin():
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


class WriteFence(Protocol):
    """What a write transaction of a fenced store runs first (:meth:`EngineHolder.fenced_by`): a flow's lease
    (:class:`~airmirror.store.flow_lease.FlowLease`)."""

    def guard(self, connection: Connection) -> None:
        """Raise, so that the transaction rolls back, unless the writer still holds what fences it; otherwise hold
        it until the transaction ends."""

    def check(self) -> None:
        """Raise unless the writer still holds what fences it, in a transaction of its own."""

    def raise_if_lost(self) -> None:
        """Raise if a check finds the writer no longer holds what fences it; a check that cannot reach the database
        raises nothing."""

    @property
    def lost(self) -> Exception | None:
        """Why the writer no longer holds what fences it, as far as it found out; ``None`` while held."""


class EngineHolder:
    """Holds the store's engine; the metadata store's parts (:mod:`.batches`, :mod:`.checkpoints`,
    :mod:`.heartbeats`, :mod:`.incarnations`) share one and run every operation in a transaction of one of three
    kinds.  **Fencing rule**: a store fenced by a lease (:meth:`fenced_by`) runs :meth:`WriteFence.guard` as the
    first statement of every write transaction (:meth:`_write`), so a run that lost its flow's lease changes no
    row, whatever it does next: the guard and the write commit together or not at all.  Reads (:meth:`_read`)
    are never fenced; the only unfenced writes (:meth:`_unfenced_write`) are the schema migration and a run's
    failure record, which a run writes whether or not it still holds its flow."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._where = masked_db_url(engine.url)
        self._fence: WriteFence | None = None

    def fenced_by(self, fence: WriteFence) -> Self:
        """This store, sharing its engine, with every write fenced by ``fence`` (the class's fencing rule)."""
        fenced = copy.copy(self)
        fenced._fence = fence
        return fenced

    def check_lease(self) -> None:
        """Raise (a lost lease: :class:`~airmirror.store.flow_lease.FlowLeaseLostError`) unless the store's fence
        still holds; renews it.  Call right before a write outside the store that only the holder may make (a
        Kafka fence or job token).  A store without a fence has nothing to check."""
        if self._fence is not None:
            self._fence.check()

    def raise_if_lease_lost(self) -> None:
        """After a failure a lost lease may explain: raise the loss if a renewal finds the lease lost (one that cannot
        reach the database raises nothing, so the caller's own failure stands).  Nothing without a fence."""
        if self._fence is not None:
            self._fence.raise_if_lost()

    @property
    def lease_lost(self) -> Exception | None:
        """Why the store's fence no longer holds, as far as its renewals found (no database call); ``None`` while it
        holds, or without a fence."""
        return None if self._fence is None else self._fence.lost

    @contextmanager
    def _write(self, action: str) -> Iterator[Connection]:
        """A write transaction: the fence's guard first (the fencing rule); database failures become
        :class:`ReplicationFailure`."""
        with transaction(self._engine, action) as connection:
            if self._fence is not None:
                self._fence.guard(connection)
            yield connection

    def _read(self, action: str) -> AbstractContextManager[Connection]:
        """A transaction that only reads (it takes no lock on SQLite); database failures become
        :class:`ReplicationFailure`."""
        return transaction(self._engine, action, reads_only=True)

    def _unfenced_write(self, action: str) -> AbstractContextManager[Connection]:
        """A write transaction that no fence guards (the class's fencing rule names the two)."""
        return transaction(self._engine, action)
