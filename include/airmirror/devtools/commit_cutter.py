"""A TCP proxy in front of a PostgreSQL server that loses the outcome of commits: "commit sent, reply lost".

:class:`CommitCutter` listens on a free 127.0.0.1 port and forwards every connection to the server unchanged.  Once
armed (:meth:`CommitCutter.arm`), the next transaction that ran a statement matching the armed pattern has its
``COMMIT`` forwarded; the server commits and answers, and the proxy drops that answer and closes the connection.
The client sees its commit fail ("server closed the connection unexpectedly") although it took effect: the one
database fault whose outcome a writer cannot know without reading back.

To find a transaction's statements and its commit, the proxy reads PostgreSQL's wire protocol (frontend/backend
protocol 3.0) in both directions without changing a byte: the untyped start-up messages (an ``SSLRequest`` or
``GSSENCRequest`` is answered with one untyped byte, here ``N``: the local servers have no TLS), then typed messages
of a type byte and a length.  A statement is the text of a simple ``Query``, or of the ``Parse`` a ``Bind`` names
(psycopg prepares statements it runs often, and then binds them by name).  A transaction ends at the server's
``CommandComplete`` of ``COMMIT`` or ``ROLLBACK``.  A cut is recorded (:class:`Cut`) before the connection closes.
"""

from __future__ import annotations

import re
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

from airmirror.devtools.local_kafka import free_port

WRITES = r"^\s*(INSERT|UPDATE|DELETE)\b"
"""The default pattern: a transaction that wrote."""


def updates(table: str) -> str:
    """The pattern of a transaction that updated ``table``."""
    return rf"^\s*UPDATE {re.escape(table)}\b"


_UNTYPED_REQUESTS = {80877103, 80877104}
"""Codes of ``SSLRequest`` and ``GSSENCRequest``: answered with one untyped byte, then start-up goes on."""
_HEADER = 5
"""A typed message's type byte and length."""


@dataclass(frozen=True)
class Cut:
    """One cut connection: the statements of the transaction whose commit's answer was dropped."""

    statements: tuple[str, ...]


@dataclass
class _Connection:
    """What the proxy knows of one client connection: its prepared statements and the open transaction's ones."""

    prepared: dict[str, str] = field(default_factory=dict)
    statements: list[str] = field(default_factory=list)
    untyped_replies: int = 0
    doomed: bool = False


_Reader = Callable[[bytes, bool, _Connection], bool]
"""Sees each whole message of one direction (and whether it is typed) before it is forwarded; ``False`` cuts."""


class CommitCutter:
    """The proxy (the module docstring) to ``host``:``port``; :meth:`start` it, point clients at :attr:`port`."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.host = "127.0.0.1"
        self.port = free_port()
        self.cuts: list[Cut] = []
        self._lock = threading.Condition()
        self._pattern: re.Pattern[str] | None = None
        self._left = 0
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()

    def start(self) -> None:
        """Listen and accept connections in a thread of its own until :meth:`close`."""
        listener = socket.create_server((self.host, self.port))
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), name="commit-cutter", daemon=True).start()

    def arm(self, pattern: str = WRITES, cuts: int = 1) -> None:
        """Cut the connections of the next ``cuts`` transactions that ran a statement matching ``pattern`` (a
        regular expression, case-insensitive) right after their commit; arming again replaces what is left."""
        with self._lock:
            self._pattern = re.compile(pattern, re.IGNORECASE)
            self._left = cuts

    def wait(self, cuts: int, timeout: float) -> bool:
        """Whether :attr:`cuts` holds ``cuts`` cuts within ``timeout`` seconds."""
        with self._lock:
            return self._lock.wait_for(lambda: len(self.cuts) >= cuts, timeout)

    def close(self) -> None:
        """Stop listening and close every open connection."""
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            for sock in list(self._sockets):
                _shut(sock)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=30)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._sockets |= {client, server}
            state = _Connection()
            for source, sink, reader in ((client, server, self._from_client), (server, client, self._from_server)):
                threading.Thread(target=self._pump, args=(source, sink, reader, state), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, reader: _Reader, state: _Connection) -> None:
        """Forward whole messages from ``source`` to ``sink``; ``reader`` sees each first and may refuse it (a cut:
        then both sockets close)."""
        pending = bytearray()
        from_server = reader == self._from_server
        typed = from_server
        try:
            while chunk := source.recv(65536):
                pending += chunk
                while (size := _message_size(pending, typed, state, from_server)) is not None:
                    message = bytes(pending[:size])
                    del pending[:size]
                    if not reader(message, typed, state):
                        return
                    typed = typed or not _is_untyped_request(message)
                    sink.sendall(message)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                _shut(sock)
            with self._lock:
                self._sockets -= {source, sink}

    def _from_client(self, message: bytes, typed: bool, state: _Connection) -> bool:
        """Note the statements and the commit a client sends; forward all."""
        if not typed:
            if _is_untyped_request(message):
                state.untyped_replies += 1
            return True
        kind, body = message[:1], message[_HEADER:]
        if kind == b"Q":
            self._ran(state, _cstrings(body, 1)[0])
        elif kind == b"P":
            name, query = _cstrings(body, 2)
            state.prepared[name] = query
        elif kind == b"B":
            _portal, name = _cstrings(body, 2)
            self._ran(state, state.prepared.get(name, ""))
        return True

    def _ran(self, state: _Connection, query: str) -> None:
        word = query.strip().split(None, 1)[0].upper().rstrip(";") if query.strip() else ""
        if word == "COMMIT":
            with self._lock:
                pattern = self._pattern
                if self._left > 0 and pattern is not None and any(pattern.search(s) for s in state.statements):
                    self._left -= 1
                    state.doomed = True
        elif word not in ("BEGIN", "ROLLBACK"):
            state.statements.append(query)

    def _from_server(self, message: bytes, typed: bool, state: _Connection) -> bool:
        """Drop the answer to a doomed commit (and cut); forward anything else."""
        if message[:1] != b"C":
            return True
        tag = _cstrings(message[_HEADER:], 1)[0].split(None, 1)[0] if len(message) > _HEADER else ""
        if tag not in ("COMMIT", "ROLLBACK"):
            return True
        doomed = state.doomed and tag == "COMMIT"
        if doomed:
            with self._lock:
                self.cuts.append(Cut(tuple(state.statements)))
                self._lock.notify_all()
        state.statements, state.doomed = [], False
        return not doomed


def _is_untyped_request(message: bytes) -> bool:
    return len(message) == 8 and struct.unpack("!I", message[4:8])[0] in _UNTYPED_REQUESTS


def _message_size(pending: bytearray, typed: bool, state: _Connection, from_server: bool) -> int | None:
    """The size of the first whole message in ``pending``, ``None`` until it is all there.  From the client, the
    messages before start-up ends have no type byte; from the server, the answers to untyped requests are one byte."""
    if from_server and state.untyped_replies:
        if not pending:
            return None
        state.untyped_replies -= 1
        return 1
    if not typed:
        if len(pending) < 4:
            return None
        size = struct.unpack("!I", pending[:4])[0]
        return size if len(pending) >= size else None
    if len(pending) < _HEADER:
        return None
    size = 1 + struct.unpack("!I", pending[1:_HEADER])[0]
    return size if len(pending) >= size else None


def _cstrings(body: bytes, count: int) -> list[str]:
    """The first ``count`` NUL-terminated strings of ``body``."""
    parts = body.split(b"\0", count)
    return [part.decode("utf-8", "replace") for part in parts[:count]] + [""] * (count - len(parts[:count]))


def _shut(sock: socket.socket) -> None:
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


@contextmanager
def commit_cutter(host: str, port: int) -> Iterator[CommitCutter]:
    """A started :class:`CommitCutter` to ``host``:``port``, closed afterwards."""
    cutter = CommitCutter(host, port)
    cutter.start()
    try:
        yield cutter
    finally:
        cutter.close()
