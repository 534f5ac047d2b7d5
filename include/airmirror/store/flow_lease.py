"""Flow leases: at most one run replicates a flow at a time.

A run (``airmirror replicate``, an Airflow task, a spark-submit copy job) holds its flow's lease, a row of
``airmirror_flow_leases``, while it works on the flow::

    with store.hold_flow(flow.name, describe_holder("airmirror replicate")) as lease:
        ...                 # sync topics, plan, copy
        lease.check()       # right before committing the batch
        ...                 # commit

Contract:

* **Acquire before changing anything.**  :func:`hold_flow` acquires in ONE transaction: it inserts the row,
  or takes over a row whose lease has expired (``INSERT ... ON CONFLICT (flow) DO UPDATE ... WHERE
  expires_at <= now``).  That is race-free on SQLite (every transaction that may write starts with
  ``BEGIN IMMEDIATE`` and so holds the write lock) and on PostgreSQL (``ON CONFLICT`` locks the row and
  re-checks the ``WHERE`` on its newest version).  If another run holds an unexpired lease it raises
  :class:`FlowBusyError` (a :class:`~airmirror.errors.ReplicationFailure`, exit code 1) naming the flow, the
  holder, since when it holds the flow and when its lease expires; the caller has changed nothing yet.
* **Not re-entrant.**  A second acquisition of a held flow fails, even from the same process with the same
  holder string; every acquisition gets its own ``token``.
* **Time is the database's.**  ``acquired_at``, ``renewed_at`` and ``expires_at`` come from the database
  clock, never the caller's, so clock skew between hosts cannot shorten another run's lease.  An acquisition
  first locks the flow's lease row, then reads that clock, so a lease is never stamped with a time from
  before waiting for another contender (it would be born expired, and taken over at once).
* **Renewal.**  While the ``with`` block runs, a daemon thread renews the lease every ``ttl_seconds / 3``
  (``expires_at = now + ttl_seconds``).  A renewal that fails because the database is unreachable is logged
  and retried at the next tick; the lease survives as long as no other run took it over meanwhile (the row
  still carries our token).  A renewal that finds the row gone or taken over marks the lease *lost*.
* **Lost lease.**  :meth:`FlowLease.check` raises :class:`FlowLeaseLostError` (a :class:`FlowBusyError`)
  once the lease is lost.  It renews in the database first, so when it returns the lease is ours for
  ``ttl_seconds`` more: call it immediately before committing, and do not commit if it raises.
* **Fencing.**  A run writes the metadata DB through its store fenced by the lease
  (:meth:`~airmirror.store.engine.EngineHolder.fenced_by`): :meth:`FlowLease.guard`, the first statement of each
  write transaction, locks the lease row and raises :class:`FlowLeaseLostError` when it no longer carries our
  token, so a run that lost the flow (a frozen VM thawed, a driver stalled past its lease) writes no row after the
  takeover: an acquisition waits for the lease row (PostgreSQL) or the database (SQLite) until the guarded
  transaction ended, so every guarded write lands before the takeover or not at all.
* **Release.**  Leaving the ``with`` block (normally or by an exception) stops the renewal and deletes the
  row if its token is still ours.  A release that fails is logged; the lease then expires after
  ``ttl_seconds``.
* **Crash.**  A holder that dies without releasing (``kill -9``, OOM, lost host) leaves its row; the lease
  expires at most ``ttl_seconds`` after its last renewal and the next run takes over.  A run on the same
  machine (same kernel boot and PID namespace, recorded in ``process``) takes over at once from a holder
  whose process is gone.
* **Holder strings** identify the run for humans: :func:`describe_holder` adds host and pid to what the
  caller passes (e.g. the Airflow dag_id, run_id, task and try).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NoReturn, TypedDict

from sqlalchemy import Connection, Engine, delete, func, select, update
from sqlalchemy.dialects import postgresql, sqlite

from airmirror.errors import ReplicationFailure
from airmirror.model import utc_text
from airmirror.store.engine import transaction
from airmirror.store.schema import flow_leases

log = logging.getLogger(__name__)

DEFAULT_LEASE_TTL_SECONDS = 60.0
"""How long a lease outlives its last renewal; renewals run every third of it."""
_ACQUIRE_ATTEMPTS = 5
"""Rounds of acquisition while the row changes under us (released or taken over between two statements)."""


class _LeaseRow(TypedDict):
    """The ``airmirror_flow_leases`` row a run writes when it acquires a flow's lease."""

    flow: str
    holder: str
    token: str
    process: str | None
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime


@dataclass(frozen=True)
class FlowLeaseRecord:
    """A flow's lease as stored: who holds it, since when, and until when unless renewed."""

    flow: str
    holder: str
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime


def _held_by(current: FlowLeaseRecord) -> str:
    return (
        f"is being replicated by another run (holder {current.holder}, since {utc_text(current.acquired_at)}, "
        f"lease expires {utc_text(current.expires_at)})"
    )


class FlowBusyError(ReplicationFailure):
    """Another run holds the flow's lease.  ``current`` is that lease (``None`` if it vanished meanwhile)."""

    def __init__(self, flow: str, current: FlowLeaseRecord | None, message: str | None = None) -> None:
        self.flow = flow
        self.current = current
        if message is None:
            held = _held_by(current) if current is not None else "is being replicated by another run"
            message = f"flow {flow!r} {held}; nothing was changed; run again once it finishes"
        super().__init__(message)


class FlowLeaseLostError(FlowBusyError):
    """This run's lease expired and another run took the flow over (or released it): do not commit."""

    def __init__(self, flow: str, holder: str, current: FlowLeaseRecord | None) -> None:
        if current is not None:
            message = f"flow {flow!r} {_held_by(current)}: this run (holder {holder}) lost its lease to it"
        else:
            message = f"flow {flow!r}: this run (holder {holder}) lost its lease (it expired and was taken over)"
        super().__init__(
            flow, current, f"{message}; stopping without committing; run again once the other run finishes"
        )


def describe_holder(what: str) -> str:
    """A holder string: ``what`` (e.g. ``"airmirror replicate"`` or the Airflow dag/run/task/try) on this host
    and process."""
    return f"{what} on {socket.gethostname()} pid {os.getpid()}"


@contextmanager
def hold_flow(
    engine: Engine, flow: str, holder: str, *, ttl_seconds: float = DEFAULT_LEASE_TTL_SECONDS
) -> Iterator[FlowLease]:
    """Hold ``flow``'s lease for the ``with`` block, renewing it every ``ttl_seconds / 3`` from a daemon
    thread and releasing it on exit (see the module docstring).  Raises :class:`FlowBusyError` when another
    run holds it."""
    lease = acquire_flow(engine, flow, holder, ttl_seconds=ttl_seconds)
    stop = threading.Event()
    renewer = threading.Thread(target=lease._renew_until, args=(stop,), name=f"airmirror-lease {flow}", daemon=True)
    renewer.start()
    try:
        yield lease
    finally:
        stop.set()
        renewer.join(timeout=ttl_seconds)
        lease.release()


def acquire_flow(
    engine: Engine, flow: str, holder: str, *, ttl_seconds: float = DEFAULT_LEASE_TTL_SECONDS
) -> FlowLease:
    """Acquire ``flow``'s lease WITHOUT renewing it (:func:`hold_flow` renews and releases): the caller must
    call :meth:`FlowLease.renew` at least every ``ttl_seconds`` and :meth:`FlowLease.release` at the end."""
    if not ttl_seconds > 0:
        raise ValueError(f"ttl_seconds must be positive, got {ttl_seconds}")
    if not flow or not holder:
        raise ValueError("a flow lease needs a flow and a holder")
    token, process = uuid.uuid4().hex, _this_process()
    current: _StoredLease | None = None
    for _ in range(_ACQUIRE_ATTEMPTS):
        with transaction(engine, f"acquire the lease of flow {flow!r}") as connection:
            previous = _stored_lease(connection, flow, lock=True)
            now = _database_now(connection)
            row: _LeaseRow = {
                "flow": flow,
                "holder": holder,
                "token": token,
                "process": process,
                "acquired_at": now,
                "renewed_at": now,
                "expires_at": now + timedelta(seconds=ttl_seconds),
            }
            if _insert_or_take_over_expired(connection, row, now):
                if previous is not None:
                    log.warning(
                        "flow %r: took over the lease of %s, which expired at %s",
                        flow,
                        previous.record.holder,
                        utc_text(previous.record.expires_at),
                    )
                return FlowLease(engine, row, ttl_seconds)
            current = _stored_lease(connection, flow)
            if current is None:
                continue  # released between our two statements: try again
            if _has_died(current.process):
                if _take_over(connection, current.token, row):
                    log.warning(
                        "flow %r: took over the lease of %s, whose process is gone", flow, current.record.holder
                    )
                    return FlowLease(engine, row, ttl_seconds)
                continue
        raise FlowBusyError(flow, current.record)
    raise FlowBusyError(flow, None if current is None else current.record)


def current_lease(engine: Engine, flow: str) -> FlowLeaseRecord | None:
    """The flow's lease as stored, expired or not; ``None`` when no run holds it."""
    with transaction(engine, f"read the lease of flow {flow!r}", reads_only=True) as connection:
        stored = _stored_lease(connection, flow)
    return None if stored is None else stored.record


class FlowLease:
    """A held flow lease (see the module docstring); made by :func:`hold_flow` or :func:`acquire_flow`."""

    def __init__(self, engine: Engine, row: _LeaseRow, ttl_seconds: float) -> None:
        self._engine = engine
        self.flow = row["flow"]
        self.holder = row["holder"]
        self.ttl_seconds = ttl_seconds
        self.acquired_at = row["acquired_at"]
        self._token = row["token"]
        self._expires_at = row["expires_at"]
        self._lost: FlowLeaseLostError | None = None
        self._released = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FlowLease(flow={self.flow!r}, holder={self.holder!r}, expires_at={utc_text(self.expires_at)})"

    @property
    def expires_at(self) -> datetime:
        """When the lease expires unless renewed, as of its last successful renewal."""
        with self._lock:
            return self._expires_at

    @property
    def lost(self) -> FlowLeaseLostError | None:
        """Why the lease is lost, once a renewal or :meth:`check` found it taken over; ``None`` while held."""
        with self._lock:
            return self._lost

    def check(self) -> None:
        """Raise :class:`FlowLeaseLostError` unless the lease is still ours; renews it, so that it stays ours
        for ``ttl_seconds`` after this returns.  Database failures raise
        :class:`~airmirror.errors.ReplicationFailure`."""
        self.renew()

    def raise_if_lost(self) -> None:
        """After a failure that a lost lease may explain (a copy job superseded by another run): renew, raising
        :class:`FlowLeaseLostError` if the lease is lost.  A renewal that cannot reach the database proves nothing
        either way: it is logged, and the caller goes on with its own failure."""
        try:
            self.renew()
        except FlowLeaseLostError:
            raise
        except ReplicationFailure as error:
            log.warning("could not tell whether flow %r is still held by %s: %s", self.flow, self.holder, error)

    def renew(self) -> None:
        """Extend the lease to ``ttl_seconds`` from now; raises :class:`FlowLeaseLostError` if it was lost."""
        self._raise_if_released_or_lost()
        with transaction(self._engine, f"renew the lease of flow {self.flow!r}") as connection:
            now = _database_now(connection)
            expires_at = now + timedelta(seconds=self.ttl_seconds)
            renewed = connection.execute(
                update(flow_leases)
                .where(flow_leases.c.flow == self.flow, flow_leases.c.token == self._token)
                .values(renewed_at=now, expires_at=expires_at)
            ).rowcount
            if renewed != 1:
                self._lose(connection)
        with self._lock:
            self._expires_at = expires_at

    def guard(self, connection: Connection) -> None:
        """The fencing guard (:class:`~airmirror.store.engine.WriteFence`), the first statement of a write
        transaction: raise :class:`FlowLeaseLostError`, rolling the transaction back, unless the lease row still
        carries our token.  The row stays locked (PostgreSQL ``FOR UPDATE``; on SQLite the transaction holds the
        database's write lock from its start) until the transaction ends, so no run takes the lease over between
        the guard and the commit: what the transaction writes is written before any takeover.  It only reads: the
        renewal thread keeps the lease alive, and a lease that expired and nobody took over is still ours."""
        self._raise_if_released_or_lost()
        held = connection.execute(
            select(flow_leases.c.token)
            .where(flow_leases.c.flow == self.flow, flow_leases.c.token == self._token)
            .with_for_update()
        ).first()
        if held is None:
            self._lose(connection)

    def _raise_if_released_or_lost(self) -> None:
        if self._released:
            raise RuntimeError(f"the lease of flow {self.flow!r} held by {self.holder} was released")
        lost = self.lost
        if lost is not None:
            raise lost

    def _lose(self, connection: Connection) -> NoReturn:
        """The lease row no longer carries our token: remember why, and raise it."""
        current = _stored_lease(connection, self.flow)
        with self._lock:
            self._lost = FlowLeaseLostError(self.flow, self.holder, None if current is None else current.record)
            raise self._lost

    def release(self) -> bool:
        """Delete the lease if it is still ours; True if it was.  A database failure is logged, not raised:
        the lease then expires after ``ttl_seconds``."""
        if self._released:
            return False
        self._released = True
        try:
            with transaction(self._engine, f"release the lease of flow {self.flow!r}") as connection:
                deleted = connection.execute(
                    delete(flow_leases).where(flow_leases.c.flow == self.flow, flow_leases.c.token == self._token)
                ).rowcount
        except ReplicationFailure as error:
            log.warning("%s; the lease expires by itself at %s", error, utc_text(self.expires_at))
            return False
        return deleted == 1

    def _renew_until(self, stop: threading.Event) -> None:
        """The renewal thread of :func:`hold_flow`."""
        while not stop.wait(self.ttl_seconds / 3):
            try:
                self.renew()
            except FlowLeaseLostError as lost:
                log.error("%s", lost)
                return
            except Exception as error:
                if stop.is_set():
                    return
                log.warning(
                    "could not renew the lease of flow %r held by %s (expires %s): %s; retrying",
                    self.flow,
                    self.holder,
                    utc_text(self.expires_at),
                    error,
                )


@dataclass(frozen=True)
class _StoredLease:
    record: FlowLeaseRecord
    token: str
    process: str | None


def _database_now(connection: Connection) -> datetime:
    """The database server's clock (UTC) at this moment; SQLite's to the millisecond.  On PostgreSQL that is
    ``clock_timestamp()``: ``now()`` is the transaction's start, before any lock wait."""
    if connection.dialect.name == "sqlite":
        value = connection.execute(select(func.strftime("%Y-%m-%d %H:%M:%f", "now"))).scalar_one()
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    moment: datetime = connection.execute(select(func.clock_timestamp())).scalar_one()
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


def _stored_lease(connection: Connection, flow: str, *, lock: bool = False) -> _StoredLease | None:
    """The flow's lease row; with ``lock``, locked until the transaction ends (PostgreSQL ``FOR UPDATE``; a
    SQLite transaction holds the write lock from its start)."""
    query = select(flow_leases).where(flow_leases.c.flow == flow)
    row = connection.execute(query.with_for_update() if lock else query).one_or_none()
    if row is None:
        return None
    record = FlowLeaseRecord(row.flow, row.holder, row.acquired_at, row.renewed_at, row.expires_at)
    return _StoredLease(record, row.token, row.process)


def _insert_or_take_over_expired(connection: Connection, row: _LeaseRow, now: datetime) -> bool:
    """Insert the lease, or overwrite the flow's row if its lease expired by ``now``: one atomic statement."""
    dialect_insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
    lease = dialect_insert(flow_leases).values(**row)
    statement = lease.on_conflict_do_update(
        index_elements=[flow_leases.c.flow],
        set_={name: lease.excluded[name] for name in row if name != "flow"},
        where=flow_leases.c.expires_at <= now,
    ).returning(flow_leases.c.token)
    written_token: str | None = connection.execute(statement).scalar_one_or_none()
    return written_token == row["token"]


def _take_over(connection: Connection, old_token: str, row: _LeaseRow) -> bool:
    """Overwrite the lease acquired as ``old_token`` (its holder died); False if it changed meanwhile."""
    taken = connection.execute(
        update(flow_leases)
        .where(flow_leases.c.flow == row["flow"], flow_leases.c.token == old_token)
        .values(**{name: value for name, value in row.items() if name != "flow"})
    ).rowcount
    return taken == 1


def _this_process() -> str | None:
    """``boot id/PID namespace/pid/start time`` of this process, or None where /proc does not tell."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    start = _start_time(os.getpid())
    return None if start is None else f"{boot}/{namespace}/{os.getpid()}/{start}"


def _start_time(pid: int) -> str | None:
    """The start time of a live process (clock ticks after boot), None if there is none or it is a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, *rest = stat[stat.rindex(")") + 2 :].split()
    return None if state in ("Z", "X", "x") or len(rest) < 19 else rest[18]


def _has_died(process: str | None) -> bool:
    """True only when ``process`` ran on this machine since its last boot, in our PID namespace, and is gone
    (a reused pid has another start time).  Anything else - another machine, another container, no
    /proc - is left to the lease's expiry."""
    mine = _this_process()
    if not process or mine is None:
        return False
    try:
        boot, namespace, pid, start = process.split("/")
        my_boot, my_namespace, *_ = mine.split("/")
        return (boot, namespace) == (my_boot, my_namespace) and _start_time(int(pid)) != start
    except ValueError:
        return False
