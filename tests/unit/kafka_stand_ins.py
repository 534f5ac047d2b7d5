"""Recording stand-ins for the confluent-kafka clients of a copy task, so the chunk-transaction loop runs in memory.

A :class:`StandInCluster` holds partition logs, committed group offsets and transactions, and hands out the
``Consumer`` and ``Producer`` classes a module under test is given in place of confluent-kafka's (with pytest's
``monkeypatch``).  They behave as librdkafka does where airmirror's contracts depend on it:

* **Logs.**  Offsets are assigned in the order records reach the log; every commit or abort writes one marker
  per partition the transaction wrote to, which takes an offset and holds no record.  A ``read_committed``
  consumer sees committed and non-transactional records only, up to the last stable offset (the first offset
  of a transaction still open), and reports ``_PARTITION_EOF`` there once per arrival.  :meth:`StandInCluster.delete`
  moves a partition's log start up, as retention and ``DeleteRecords`` do: a read below it gets librdkafka's
  ``_AUTO_OFFSET_RESET`` ("Offset out of range", under ``auto.offset.reset=error``) and stays where it is.
* **Topics.**  :meth:`StandInCluster.delete_topic` deletes a topic as librdkafka's consumers see it: a read of it
  hears nothing more, and ``list_topics()`` no longer lists it.
* **Transactions.**  ``init_transactions()`` fences every earlier producer of the same ``transactional.id``
  (their next transactional call or delivery fails with a fatal ``_FENCED`` error, as librdkafka reports a
  fencing) and aborts the open transaction it left.  Offsets sent with ``send_offsets_to_transaction`` become
  the group's committed offsets (with their metadata) only when the transaction commits.
* **Deliveries.**  ``produce()`` queues; ``poll()``/``flush()`` deliver the queue in produce order, calling the
  record's own ``on_delivery`` callback (else the producer's; neither: no report) with a
  :class:`~confluent_kafka.Message` carrying the record's offset on the log.
  A failed delivery makes the transaction abortable: a later ``produce()`` raises ``_STATE`` ("Erroneous state"),
  and the records queued behind it stay queued (``flush`` returns their count) until ``abort_transaction()`` purges
  them (reported with ``_PURGE_QUEUE``).
* **Injected faults.**  :meth:`StandInCluster.fail` makes a later call of a producer method raise a
  :class:`~confluent_kafka.KafkaException` with a real :class:`~confluent_kafka.KafkaError` (fatal, retriable
  or abortable as built; :func:`fenced`, :func:`timed_out`, :func:`abortable`), optionally after the call took
  effect (a commit the broker made whose answer was lost).  :meth:`StandInCluster.fail_delivery` fails the
  delivery of a later record of one partition, :meth:`StandInCluster.refuse` every delivery of one record,
  :meth:`StandInCluster.write_between` appends another writer's record between two deliveries, and
  :meth:`StandInCluster.before` runs an action before a later call (another attempt's fencing, say).

Every producer call is recorded in :attr:`StandInCluster.calls` as ``(transactional id, method)``, and every consumer
commit as ``(group, "commit")``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from confluent_kafka import TIMESTAMP_CREATE_TIME, KafkaError, KafkaException, Message, TopicPartition

OFFSET_INVALID = -1001
TOPIC_ID = "dst1"
"""The id of every stand-in topic until it is recreated (the remote topic id the copy tests' ranges carry)."""
TRANSACTIONAL_CALLS = ("begin_transaction", "send_offsets_to_transaction", "commit_transaction", "abort_transaction")


def fenced() -> KafkaError:
    """The error librdkafka raises once a newer producer with the same ``transactional.id`` fenced this one."""
    return KafkaError(KafkaError._FENCED, "Producer fenced by newer instance", fatal=True)


def timed_out() -> KafkaError:
    """A transactional call that did not finish in time: retriable, the transaction stays open."""
    return KafkaError(KafkaError._TIMED_OUT, "Transactional API operation timed out", retriable=True)


def abortable(code: int = KafkaError.TRANSACTION_ABORTABLE) -> KafkaError:
    """An error after which the transaction can only be aborted (``txn_requires_abort()``)."""
    return KafkaError(code, "Transaction requires abort", txn_requires_abort=True)


class Clock:
    """A clock that moves only when told: ``time()`` (epoch seconds) and ``monotonic()``, as the ``time`` module
    offers them; give it to a module in place of ``time``."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Transaction:
    """One producer transaction: what it wrote (``(topic, partition, offset)``), the group offsets it sent, and how
    it ended (``open``, ``committed`` or ``aborted``)."""

    transactional_id: str
    records: list[tuple[str, int, int]] = field(default_factory=list)
    offsets: dict[str, list[TopicPartition]] = field(default_factory=dict)
    state: str = "open"

    def partitions(self) -> list[tuple[str, int]]:
        return sorted({(topic, partition) for topic, partition, _ in self.records})


@dataclass(frozen=True)
class Entry:
    """One offset of a partition log: a record (``message``) or a transaction marker (``message`` is ``None``)."""

    message: Message | None
    transaction: Transaction | None

    def visible(self, read_committed: bool) -> bool:
        if self.message is None:
            return False
        return not read_committed or self.transaction is None or self.transaction.state == "committed"


@dataclass(frozen=True)
class GroupMetadata:
    """What ``consumer_group_metadata()`` returns: opaque to the code under test, it names the group."""

    group_id: str


@dataclass
class Fault:
    method: str
    skip: int
    error: KafkaError | None = None
    applied: bool = False
    action: Callable[[], object] | None = None


@dataclass
class DeliveryFault:
    remote: tuple[str, int]
    skip: int
    error: KafkaError | None
    key: bytes | None = None
    """A fault of every delivery of the record with this key, however often it is produced, rather than of one."""


class StandInCluster:
    """One Kafka cluster in memory; :attr:`Consumer` and :attr:`Producer` are its client classes."""

    def __init__(
        self, clock: Clock | None = None, *, records_per_poll: int = 1000, seconds_per_poll: float = 0.0
    ) -> None:
        self.clock = clock or Clock()
        self.records_per_poll = records_per_poll
        self.seconds_per_poll = seconds_per_poll
        self.logs: dict[tuple[str, int], list[Entry]] = {}
        self.log_starts: dict[tuple[str, int], int] = {}
        self.out_of_range: set[tuple[str, int]] = set()
        self.deleted: set[str] = set()
        self.offline: set[tuple[str, int]] = set()
        """Partitions whose leader is down: their reads hear nothing, though metadata lists their topic."""
        self.topic_errors: dict[str, KafkaError] = {}
        """Topic-level errors metadata reports (a leader not available yet, say)."""
        """Topics deleted from the cluster: their reads hear nothing (as librdkafka's), metadata omits them."""
        """Partitions whose next fetch is refused as out of range whatever the log start (then served again)."""
        self.groups: dict[str, dict[tuple[str, int], TopicPartition]] = {}
        self.transactions: list[Transaction] = []
        self.epochs: dict[str, int] = {}
        self.calls: list[tuple[str, str]] = []
        self.consumers: list[StandInConsumer] = []
        self.faults: list[Fault] = []
        self.delivery_faults: list[DeliveryFault] = []
        self.topic_ids: dict[str, str] = {}
        """Topic ids other than :data:`TOPIC_ID`, which every topic has until :meth:`recreate_topic`."""
        self.described: list[list[str]] = []
        """The topics of every ``describe_topics`` call, in order."""
        cluster = self

        class Consumer(StandInConsumer):
            def __init__(self, config: Mapping[str, Any]) -> None:
                super().__init__(cluster, config)

        class Producer(StandInProducer):
            def __init__(self, config: Mapping[str, Any]) -> None:
                super().__init__(cluster, config)

        class AdminClient(StandInAdmin):
            def __init__(self, config: Mapping[str, Any]) -> None:
                super().__init__(cluster)

        self.Consumer = Consumer
        self.Producer = Producer
        self.AdminClient = AdminClient

    # Writing and reading logs directly

    def log(self, topic: str, partition: int) -> list[Entry]:
        return self.logs.setdefault((topic, partition), [])

    def append(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        *,
        headers: list[tuple[str, bytes]] | None = None,
        timestamp: int = 1_000,
        leader_epoch: int | None = 0,
        transaction: Transaction | None = None,
    ) -> int:
        """Append one record (non-transactional unless ``transaction``); returns its offset."""
        log = self.log(topic, partition)
        offset = len(log)
        fields: dict[str, Any] = {"topic": topic, "partition": partition, "offset": offset, "key": key, "value": value}
        fields.update(headers=headers, timestamp=(TIMESTAMP_CREATE_TIME, timestamp))
        if leader_epoch is not None:  # a record written by a transactional producer here has none
            fields["leader_epoch"] = leader_epoch
        message = Message(**fields)
        log.append(Entry(message, transaction))
        return offset

    def fill(self, topic: str, partition: int, count: int, *, value_size: int = 10) -> list[int]:
        """Append ``count`` records keyed ``k{n}`` with values of ``value_size`` bytes; returns their offsets."""
        first = len(self.log(topic, partition))
        return [
            self.append(topic, partition, f"k{n}".encode(), f"v{n}".encode().ljust(value_size, b"."))
            for n in range(first, first + count)
        ]

    def recreate_topic(self, topic: str, partitions: int = 1) -> None:
        """Delete ``topic`` and create it again under its name: empty logs and another topic id."""
        for partition in range(partitions):
            self.logs[(topic, partition)] = []
        self.topic_ids[topic] = f"{self.topic_ids.get(topic, TOPIC_ID)}+"

    def delete_topic(self, topic: str) -> None:
        """Delete ``topic``: a consumer assigned to it hears nothing more, and metadata no longer lists it."""
        self.deleted.add(topic)

    def delete(self, topic: str, partition: int, below: int) -> None:
        """Delete the partition's records below offset ``below`` (its new log start)."""
        self.log_starts[(topic, partition)] = below

    def skip(self, topic: str, partition: int, count: int = 1) -> None:
        """Append ``count`` offsets that a read_committed reader never returns (aborted records, markers)."""
        aborted = Transaction("someone-else", state="aborted")
        for _ in range(count):
            self.append(topic, partition, b"aborted", b"aborted", transaction=aborted)

    def committed_records(self, topic: str, partition: int) -> list[Message]:
        """What a read_committed consumer reads of the partition, in offset order."""
        return [e.message for e in self.log(topic, partition) if e.message is not None and e.visible(True)]

    def stable_end(self, topic: str, partition: int) -> int:
        """The last stable offset: the first offset of a transaction still open, else the log end."""
        log = self.log(topic, partition)
        return next(
            (o for o, e in enumerate(log) if e.transaction is not None and e.transaction.state == "open"), len(log)
        )

    # Faults and other attempts

    def fail(self, method: str, error: KafkaError, *, at: int = 1, applied: bool = False) -> None:
        """Make the ``at``-th call of producer ``method`` from now on raise ``error``; with ``applied`` the call
        takes effect first (a commit the broker made, whose answer never came)."""
        self.faults.append(Fault(method, at - 1, error=error, applied=applied))

    def before(self, method: str, action: Callable[[], object], *, at: int = 1) -> None:
        """Run ``action`` right before the ``at``-th call of producer ``method`` from now on."""
        self.faults.append(Fault(method, at - 1, action=action))

    def fail_delivery(self, topic: str, partition: int, error: KafkaError, *, at: int = 1) -> None:
        """Fail the delivery of the ``at``-th record delivered to ``topic``/``partition`` from now on."""
        self.delivery_faults.append(DeliveryFault((topic, partition), at - 1, error))

    def refuse(self, topic: str, partition: int, key: bytes, error: KafkaError) -> None:
        """Fail every delivery of the record keyed ``key`` to ``topic``/``partition`` (one the broker refuses
        whenever it comes, a record too large, say)."""
        self.delivery_faults.append(DeliveryFault((topic, partition), 0, error, key))

    def write_between(self, topic: str, partition: int, *, at: int) -> None:
        """Append a record of another writer to ``topic``/``partition`` right before the ``at``-th record delivered
        there from now on: the transaction's records after it do not follow the ones before on the log."""
        self.delivery_faults.append(DeliveryFault((topic, partition), at - 1, None))

    def fence(self, transactional_id: str) -> None:
        """What a newer producer's ``init_transactions()`` does: fence the older ones, abort their transaction."""
        self.epochs[transactional_id] = self.epochs.get(transactional_id, 0) + 1
        for transaction in self.transactions:
            if transaction.transactional_id == transactional_id and transaction.state == "open":
                self.end(transaction, "aborted")

    def end(self, transaction: Transaction, state: str) -> None:
        """Commit or abort ``transaction``: a marker in each partition it wrote, its offsets on commit."""
        for topic, partition in transaction.partitions():
            self.log(topic, partition).append(Entry(None, transaction))
        transaction.state = state
        if state == "committed":
            for group, offsets in transaction.offsets.items():
                stored = self.groups.setdefault(group, {})
                for tp in offsets:
                    stored[(tp.topic, tp.partition)] = tp

    def committed(self) -> list[Transaction]:
        return [t for t in self.transactions if t.state == "committed"]

    def called(self, method: str) -> int:
        """How many times any producer called ``method``."""
        return sum(1 for _, name in self.calls if name == method)

    def _due(self, method: str) -> Fault | None:
        for fault in self.faults:
            if fault.method == method:
                if fault.skip:
                    fault.skip -= 1
                    return None
                self.faults.remove(fault)
                return fault
        return None

    def _delivery_error(self, queued: Queued) -> KafkaError | None:
        """The error the delivery of ``queued`` meets, after any other writer's record due before it."""
        remote = (queued.topic, queued.partition)
        for fault in self.delivery_faults:
            if fault.remote != remote:
                continue
            if fault.key is not None:
                if fault.key == queued.key:
                    return fault.error
                continue
            if fault.skip:
                fault.skip -= 1
                return None
            self.delivery_faults.remove(fault)
            if fault.error is None:
                self.append(*remote, b"another writer", b"x")
            return fault.error
        return None


class StandInAdmin:
    """An admin client of a :class:`StandInCluster`: ``describe_topics`` gives the topic ids."""

    def __init__(self, cluster: StandInCluster) -> None:
        self.cluster = cluster

    def describe_topics(self, topics: Any, request_timeout: float = -1) -> dict[str, Any]:
        names = list(topics.topic_names)
        self.cluster.described.append(names)
        described: dict[str, Any] = {}
        for name in names:
            future: Future[SimpleNamespace] = Future()
            if name in self.cluster.deleted:
                future.set_exception(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
            else:
                future.set_result(SimpleNamespace(topic_id=self.cluster.topic_ids.get(name, TOPIC_ID)))
            described[name] = future
        return described


class StandInConsumer:
    """A consumer of a :class:`StandInCluster` (see the module docstring); it records its assignments."""

    def __init__(self, cluster: StandInCluster, config: Mapping[str, Any]) -> None:
        self.cluster = cluster
        self.config = dict(config)
        self.read_committed = config.get("isolation.level", "read_committed") == "read_committed"
        self.positions: dict[tuple[str, int], int] = {}
        self.eof_at: dict[tuple[str, int], int] = {}
        self.assignments: list[tuple[str, int, int]] = []
        self.closed = False
        self.fetched: list[Message] | None = None
        """What the last :meth:`poll` fetched beyond the message it returned, for the :meth:`consume` after it."""
        cluster.consumers.append(self)

    def incremental_assign(self, partitions: Sequence[TopicPartition]) -> None:
        for tp in partitions:
            self.positions[(tp.topic, tp.partition)] = tp.offset
            self.eof_at.pop((tp.topic, tp.partition), None)
            self.assignments.append((tp.topic, tp.partition, tp.offset))

    def incremental_unassign(self, partitions: Sequence[TopicPartition]) -> None:
        for tp in partitions:
            self.positions.pop((tp.topic, tp.partition), None)
        gone = {(tp.topic, tp.partition) for tp in partitions}
        if self.fetched is not None:
            self.fetched = [m for m in self.fetched if (m.topic(), m.partition()) not in gone]

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        self.positions.clear()
        self.incremental_assign(partitions)

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """Right after a :meth:`poll`, what it fetched beyond its message (a librdkafka consumer's local queue, taken
        without waiting); else one fetch (:meth:`fetch`)."""
        if self.fetched is not None:
            taken, self.fetched = self.fetched[:num_messages], None
            return taken
        return self.fetch(num_messages)

    def poll(self, timeout: float = -1) -> Message | None:
        """The first message of one fetch of the cluster's ``records_per_poll`` (``None`` when it has none); the rest
        stay fetched for the :meth:`consume` right after."""
        fetched = self.fetch(self.cluster.records_per_poll)
        self.fetched = fetched[1:]
        return fetched[0] if fetched else None

    def fetch(self, num_messages: int) -> list[Message]:
        """Up to ``num_messages`` (and the cluster's ``records_per_poll``) visible records from the positions, and
        an end-of-partition where a read arrives at the end; moves the cluster's clock by ``seconds_per_poll``."""
        cluster = self.cluster
        cluster.clock.advance(cluster.seconds_per_poll)
        wanted = min(num_messages, cluster.records_per_poll)
        got: list[Message] = []
        for key, position in list(self.positions.items()):
            if key[0] in cluster.deleted or key in cluster.offline:
                continue
            if position < cluster.log_starts.get(key, 0) or key in cluster.out_of_range:
                cluster.out_of_range.discard(key)
                got.append(Message(topic=key[0], partition=key[1], offset=position, error=out_of_range(position)))
                continue
            log = cluster.log(*key)
            end = cluster.stable_end(*key) if self.read_committed else len(log)
            while position < end and len(got) < wanted:
                entry = log[position]
                position += 1
                if entry.visible(self.read_committed):
                    assert entry.message is not None
                    got.append(entry.message)
            self.positions[key] = position
            if position >= end and self.eof_at.get(key) != end:
                self.eof_at[key] = end
                got.append(Message(topic=key[0], partition=key[1], offset=end, error=end_of_partition()))
        return got

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> SimpleNamespace:
        """The cluster's topics, as ``ClusterMetadata.topics`` lists them: a ``TopicMetadata`` each, with its error
        and its partitions (leader -1 for those :attr:`StandInCluster.offline`)."""
        cluster = self.cluster
        names = {t for t, _ in cluster.logs} - cluster.deleted
        partitions: dict[str, dict[int, SimpleNamespace]] = {}
        for t, p in cluster.logs:
            leader = -1 if (t, p) in cluster.offline else 1
            partitions.setdefault(t, {})[p] = SimpleNamespace(id=p, leader=leader, error=None)
        return SimpleNamespace(
            topics={
                name: SimpleNamespace(topic=name, error=cluster.topic_errors.get(name), partitions=partitions[name])
                for name in names
            }
        )

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> tuple[int, int]:
        """The low watermark and the high watermark (the last stable offset for a read_committed consumer, as
        librdkafka answers it)."""
        key = (partition.topic, partition.partition)
        high = self.cluster.stable_end(*key) if self.read_committed else len(self.cluster.log(*key))
        return self.cluster.log_starts.get(key, 0), high

    def committed(self, partitions: Sequence[TopicPartition], timeout: float = -1) -> list[TopicPartition]:
        stored = self.cluster.groups.get(self.config["group.id"], {})
        return [
            stored.get((tp.topic, tp.partition), TopicPartition(tp.topic, tp.partition, OFFSET_INVALID))
            for tp in partitions
        ]

    def commit(self, offsets: Sequence[TopicPartition] | None = None, asynchronous: bool = True) -> None:
        """A commit outside any group generation, as a standalone consumer makes it: stored at once, metadata and
        all, and recorded in :attr:`StandInCluster.calls` as ``(group, "commit")``."""
        group = self.config["group.id"]
        self.cluster.calls.append((group, "commit"))
        stored = self.cluster.groups.setdefault(group, {})
        for tp in offsets or []:
            stored[(tp.topic, tp.partition)] = tp

    def consumer_group_metadata(self) -> GroupMetadata:
        return GroupMetadata(self.config["group.id"])

    def close(self) -> None:
        self.closed = True


def end_of_partition() -> KafkaError:
    return KafkaError(KafkaError._PARTITION_EOF, "Broker: No more messages")


def out_of_range(offset: int) -> KafkaError:
    """librdkafka's report of a fetch below the log start under ``auto.offset.reset=error``."""
    return KafkaError(
        KafkaError._AUTO_OFFSET_RESET,
        f"Fetch from broker 1 failed at offset {offset} (leader epoch 0): Broker: Offset out of range",
    )


@dataclass
class Queued:
    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    headers: Any
    timestamp: int
    transaction: Transaction
    on_delivery: Callable[[KafkaError | None, Message], None] | None = None


class StandInProducer:
    """A transactional producer of a :class:`StandInCluster` (see the module docstring)."""

    def __init__(self, cluster: StandInCluster, config: Mapping[str, Any]) -> None:
        self.cluster = cluster
        self.config = dict(config)
        self.transactional_id: str = config["transactional.id"]
        self.on_delivery: Callable[[KafkaError | None, Message], None] | None = config.get("on_delivery")
        self.epoch: int | None = None
        self.transaction: Transaction | None = None
        self.queue: deque[Queued] = deque()
        self.fatal: KafkaError | None = None
        self.requires_abort: KafkaError | None = None

    # The transactional API

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> None:
        self._record("list_topics")

    def init_transactions(self, timeout: float = -1) -> None:
        self._call("init_transactions")
        self.cluster.fence(self.transactional_id)
        self.epoch = self.cluster.epochs[self.transactional_id]

    def begin_transaction(self) -> None:
        self._call("begin_transaction")
        self._raise_abortable()  # inside a failed transaction: its error, as librdkafka
        if self.epoch is None or self.transaction is not None:
            raise KafkaException(KafkaError(KafkaError._STATE, "Operation not valid in state"))
        self.transaction = Transaction(self.transactional_id)
        self.cluster.transactions.append(self.transaction)

    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int = -1,
        timestamp: int = 0,
        headers: Any = None,
        on_delivery: Callable[[KafkaError | None, Message], None] | None = None,
    ) -> None:
        self._record("produce")
        if self.fatal is not None:
            raise KafkaException(KafkaError(KafkaError._FATAL, "Fatal error: " + self.fatal.str(), fatal=True))
        if self.transaction is None:
            raise KafkaException(KafkaError(KafkaError._STATE, "No transaction in progress"))
        if self.requires_abort is not None:
            raise KafkaException(KafkaError(KafkaError._STATE, "Unable to produce message: Local: Erroneous state"))
        self.queue.append(Queued(topic, partition, key, value, headers, timestamp, self.transaction, on_delivery))

    def send_offsets_to_transaction(
        self, offsets: Sequence[TopicPartition], group_metadata: GroupMetadata, timeout: float = -1
    ) -> None:
        fault = self._call("send_offsets_to_transaction")
        self._raise_abortable()
        assert self.transaction is not None
        self.transaction.offsets.setdefault(group_metadata.group_id, []).extend(offsets)
        self._raise_applied(fault)

    def commit_transaction(self, timeout: float = -1) -> None:
        fault = self._call("commit_transaction")
        self._deliver()
        if self.fatal is not None:
            raise KafkaException(self.fatal)
        self._raise_abortable()
        if self.transaction is None:
            raise KafkaException(KafkaError(KafkaError._STATE, "No transaction in progress"))
        self.cluster.end(self.transaction, "committed")
        self.transaction = None
        self._raise_applied(fault)

    def abort_transaction(self, timeout: float = -1) -> None:
        self._call("abort_transaction")
        if self.transaction is None:
            raise KafkaException(KafkaError(KafkaError._STATE, "No transaction in progress"))
        purged = KafkaError(KafkaError._PURGE_QUEUE, "Purged in queue")
        while self.queue:
            self._report(purged, self.queue.popleft(), -1)
        self.cluster.end(self.transaction, "aborted")
        self.transaction = None
        self.requires_abort = None

    def poll(self, timeout: float = -1) -> int:
        return self._deliver()

    def flush(self, timeout: float = -1) -> int:
        """Deliver what can be delivered; the count still queued (behind a failed delivery)."""
        self._deliver()
        return len(self.queue)

    def __len__(self) -> int:
        return len(self.queue)

    # Faults and deliveries

    def _record(self, method: str) -> None:
        self.cluster.calls.append((self.transactional_id, method))

    def _call(self, method: str) -> Fault | None:
        """Record a transactional call and raise what it meets: this producer's fatal error, its fencing, or an
        injected fault (one with ``applied`` is returned, to raise after the call's effect)."""
        self._record(method)
        fault = self.cluster._due(method)
        if fault is not None and fault.action is not None:
            fault.action()
            fault = None
        if self.fatal is not None:
            raise KafkaException(self.fatal)
        if self._is_fenced():
            self.fatal = fenced()
            raise KafkaException(self.fatal)
        if fault is None or fault.applied:
            return fault
        self._took(fault)
        raise KafkaException(fault.error)

    def _raise_applied(self, fault: Fault | None) -> None:
        if fault is not None:
            self._took(fault)
            raise KafkaException(fault.error)

    def _took(self, fault: Fault) -> None:
        assert fault.error is not None
        if fault.error.fatal():
            self.fatal = fault.error
        elif fault.error.txn_requires_abort():
            self.requires_abort = fault.error

    def _raise_abortable(self) -> None:
        if self.requires_abort is not None:
            raise KafkaException(self.requires_abort)

    def _is_fenced(self) -> bool:
        return self.epoch is not None and self.cluster.epochs.get(self.transactional_id) != self.epoch

    def _deliver(self) -> int:
        """Deliver the queue in produce order until a delivery fails; returns how many were reported."""
        reported = 0
        while self.queue and self.requires_abort is None and self.fatal is None:
            queued = self.queue[0]
            error = fenced() if self._is_fenced() else self.cluster._delivery_error(queued)
            self.queue.popleft()
            reported += 1
            if error is not None:
                if error.fatal():
                    self.fatal = error
                else:
                    self.requires_abort = abortable(error.code())
                self._report(error, queued, -1)
                continue
            offset = self.cluster.append(
                queued.topic,
                queued.partition,
                queued.key,
                queued.value,
                headers=queued.headers,
                timestamp=queued.timestamp,
                leader_epoch=None,
                transaction=queued.transaction,
            )
            queued.transaction.records.append((queued.topic, queued.partition, offset))
            self._report(None, queued, offset)
        return reported

    def _report(self, error: KafkaError | None, queued: Queued, offset: int) -> None:
        """Call the record's own ``on_delivery``, else the producer's (none: no report, as librdkafka)."""
        report = queued.on_delivery or self.on_delivery
        if report is not None:
            message = Message(
                topic=queued.topic,
                partition=queued.partition,
                offset=offset,
                key=queued.key,
                value=queued.value,
                error=error,
            )
            report(error, message)
