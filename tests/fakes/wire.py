"""A scripted stand-in for :class:`eos_kafka_source.wire.KafkaWire`: the driver's transactional
requests answered in memory, as Kafka's coordinator and partition leaders answer them, for
table tests of every outcome without a broker (milliseconds; cf. Kafka's ``MockClient``).

:class:`FakeKafka` keeps what a cluster would: each transactional id's coordinator and
transaction (producer id, epoch, state), and each transaction's markers. The real request
code (``wire/txn.py``, ``wire/cluster.py``, ``wire/txn_check.py``, ``wire/txn_outcome.py``)
builds the requests and reads the answers; the fake answers:

- FindCoordinator (v4, batched): the id's coordinator;
- InitProducerId: a new epoch, aborting the id's open transaction (as Kafka fences);
- EndTxn: NONE, PRODUCER_FENCED (another epoch), INVALID_PRODUCER_ID_MAPPING (no such id),
  INVALID_TXN_STATE (the other outcome already), NOT_COORDINATOR (the wrong node);
- DescribeTransactions: the state, producer id and epoch the coordinator holds;
- Fetch, read_committed, from a transaction's first offset (the confirmation): the LSO and
  the aborted transactions, from the markers written.

:meth:`FakeKafka.script` queues answers per request and id ahead of that behaviour: a
:class:`~eos_kafka_source.kafka_codes.Code` answered without effect, :class:`Applied` (the
coordinator did the work, then answered a code, or the connection dropped), or a
``ConnectionDroppedError`` / ``TimeoutError_`` for the whole connection's round.
:meth:`FakeKafka.read_transaction` stands in for the marker scan (``txn_log.py``) over the
same state.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.errors import (
    ConnectionDroppedError,
    TimeoutError_,
    TransactionOutcomeUnknownError,
    for_code,
)
from eos_kafka_source.kafka_codes import Code
from eos_kafka_source.records import encode_batch
from eos_kafka_source.sink.driver.txn_log import LogOutcome, PartitionInLog, TxnInLog
from eos_kafka_source.sink.handoff import TxnHandoff
from eos_kafka_source.wire.connection import VERSION_CAPS, KafkaWire

TopicPartition = tuple[str, int]
ONGOING, COMMITTED, ABORTED = "Ongoing", "CompleteCommit", "CompleteAbort"


@dataclass
class Txn:
    """One transactional id as its coordinator holds it."""

    producer_id: int
    epoch: int
    state: str = ONGOING
    #: (topic, partition) -> the offset of the transaction's first record there.
    firsts: dict[TopicPartition, int] = field(default_factory=dict)
    #: Partitions an operator aborted directly (an ABORT marker while the coordinator
    #: still holds the transaction open).
    aborted_by_hand: set[TopicPartition] = field(default_factory=set)


@dataclass(frozen=True)
class Applied:
    """A scripted answer given after the request took effect (EndTxn: the outcome written)."""

    answer: Code | ConnectionDroppedError | TimeoutError_


Answer = Code | Applied | ConnectionDroppedError | TimeoutError_


class FakeKafka:
    """The cluster's state and the scripted answers (module docstring)."""

    def __init__(self, nodes: Sequence[int] = (1, 2, 3), *, aborted_index: bool = True) -> None:
        self.nodes = list(nodes)
        self.coordinators: dict[str, int] = {}
        #: Each id's current producer epoch and transaction.
        self.txns: dict[str, Txn] = {}
        #: Every transaction there was, by (id, epoch): the log keeps their markers.
        self.history: dict[tuple[str, int], Txn] = {}
        #: Whether the broker keeps Kafka's aborted-transaction index (Tansu does not).
        self.aborted_index = aborted_index
        #: Every request answered: (api, node, key).
        self.log: list[tuple[str, int, str]] = []
        self._scripted: dict[tuple[str, str], deque[Answer]] = {}
        self._next_pid = 1000
        self._next_offset = 0

    # -- set-up -------------------------------------------------------------------------

    def open_txn(self, tid: str, partitions: Sequence[TopicPartition] = (("out", 0),),
                 *, node: int | None = None, batch: int | None = None) -> TxnHandoff:
        """A transaction open on the cluster, as a task leaves it, and its hand-off."""
        node = node if node is not None else self.nodes[len(self.coordinators) % len(self.nodes)]
        self.coordinators.setdefault(tid, node)
        known = self.txns.get(tid)
        if known is not None and known.state == ONGOING:
            known.state = ABORTED  # the task's InitProducerId fences it
        pid = known.producer_id if known else self._new_pid()
        epoch = known.epoch + 1 if known else 0
        firsts = {}
        for tp in partitions:
            firsts[tp] = self._next_offset
            self._next_offset += 10
        self.txns[tid] = self.history[(tid, epoch)] = Txn(pid, epoch, ONGOING, firsts)
        return TxnHandoff(
            transactional_id=tid, producer_id=pid, epoch=epoch, txn_protocol=1, open=True,
            partitions=tuple((t, p, 3) for t, p in partitions), records=3 * len(partitions),
            batch_id=batch, first_offsets=tuple((t, p, o) for (t, p), o in firsts.items()))

    def script(self, api: str, key: str, *answers: Answer) -> None:
        """Queue answers to ``api`` (``EndTxn``, ``FindCoordinator``, ``InitProducerId``,
        ``DescribeTransactions``, ``Fetch``) for ``key`` (a transactional id; a Fetch's
        ``topic-partition``), given before the cluster's own behaviour."""
        self._scripted.setdefault((api, key), deque()).extend(answers)

    def heal(self, key: str) -> None:
        """Drop the answers still scripted for ``key``: the cluster behaves again."""
        for api, k in list(self._scripted):
            if k == key:
                del self._scripted[(api, k)]

    def move(self, tid: str, node: int) -> None:
        self.coordinators[tid] = node

    def state(self, handoff: TxnHandoff) -> str:
        """What became of ``handoff``'s transaction."""
        return self.history[(handoff.transactional_id, handoff.epoch)].state

    def abort_by_hand(self, handoff: TxnHandoff, tp: TopicPartition) -> None:
        """``kafka-transactions.sh abort`` of one partition: an ABORT marker there while the
        coordinator still holds the transaction open."""
        self.history[(handoff.transactional_id, handoff.epoch)].aborted_by_hand.add(tp)

    def read_transaction(self, wire: Any, handoff: TxnHandoff, *, strict: bool = False,
                         **_: Any) -> TxnInLog:
        """The marker scan (``txn_log.read_transaction``) over this cluster's log. Scripted
        answers (``script("ReadLog", tid, ...)``): a LogOutcome, or an exception for a log
        that cannot be read now."""
        scripted = self._next("ReadLog", handoff.transactional_id)
        if isinstance(scripted, BaseException):
            if strict:
                raise TransactionOutcomeUnknownError(f"scripted: {scripted}")
            return TxnInLog(LogOutcome.UNKNOWN, f"could not read the log: {scripted}")
        if isinstance(scripted, LogOutcome):
            return TxnInLog(scripted, f"scripted {scripted.value}")
        txn = self.history[(handoff.transactional_id, handoff.epoch)]
        parts = tuple(
            PartitionInLog(t, p, first, False if (t, p) in txn.aborted_by_hand else
                           {COMMITTED: True, ABORTED: False}.get(txn.state))
            for (t, p), first in txn.firsts.items())
        markers = {q.marker for q in parts}
        outcome = (LogOutcome.UNKNOWN if None in markers else LogOutcome.COMMITTED
                   if markers == {True} else LogOutcome.ABORTED if markers == {False}
                   else LogOutcome.PARTIAL)
        return TxnInLog(outcome, f"markers {sorted(map(str, markers))}", parts)

    def calls(self, api: str) -> list[tuple[int, str]]:
        return [(node, key) for name, node, key in self.log if name == api]

    def wire(self) -> FakeWire:
        return FakeWire(self)

    def _new_pid(self) -> int:
        self._next_pid += 1
        return self._next_pid

    def _next(self, api: str, key: str) -> Answer | None:
        queue = self._scripted.get((api, key))
        return queue.popleft() if queue else None

    # -- answers ------------------------------------------------------------------------

    def answer(self, node: int, request: Any) -> Any:
        """The response to ``request`` sent to ``node``; raises a lost connection."""
        api = type(request).__name__.removesuffix("Request").split("_")[0]
        handler = getattr(self, f"_{api}", None)
        if handler is None:
            raise AssertionError(f"the fake wire does not answer {api}")
        return handler(node, request)

    def _FindCoordinator(self, node: int, request: Any) -> Any:  # noqa: N802
        entries = []
        for key in request.coordinator_keys:
            self.log.append(("FindCoordinator", node, key))
            scripted = self._next("FindCoordinator", key)
            if isinstance(scripted, BaseException):
                raise scripted
            code = scripted if isinstance(scripted, Code) else Code.NONE
            where = self.coordinators.setdefault(key, self.nodes[0])
            entries.append(SimpleNamespace(key=key, error_code=int(code),
                                           node_id=where if code == Code.NONE else -1))
        return SimpleNamespace(coordinators=entries)

    def _InitProducerId(self, node: int, request: Any) -> Any:  # noqa: N802
        tid = request.transactional_id
        self.log.append(("InitProducerId", node, tid))
        code = self._coordinator_says("InitProducerId", node, tid)
        if code is None:
            old = self.txns.get(tid)
            if old is not None and old.state == ONGOING:
                old.state = ABORTED  # the new epoch fences it
            txn = Txn(old.producer_id if old else self._new_pid(), old.epoch + 1 if old else 0,
                      "Empty")
            self.txns[tid] = self.history[(tid, txn.epoch)] = txn
            return SimpleNamespace(error_code=0, producer_id=txn.producer_id,
                                   producer_epoch=txn.epoch)
        return SimpleNamespace(error_code=int(code), producer_id=-1, producer_epoch=-1)

    def _EndTxn(self, node: int, request: Any) -> Any:  # noqa: N802
        tid = request.transactional_id
        self.log.append(("EndTxn", node, tid))
        scripted = self._next("EndTxn", tid)
        if isinstance(scripted, Applied):
            self._end(tid, request)
            scripted = scripted.answer
        if isinstance(scripted, BaseException):
            raise scripted
        if scripted is not None:
            return SimpleNamespace(error_code=int(scripted))
        if self.coordinators.get(tid) != node:
            return SimpleNamespace(error_code=int(Code.NOT_COORDINATOR))
        return SimpleNamespace(error_code=int(self._end(tid, request)))

    def _end(self, tid: str, request: Any) -> Code:
        """What Kafka's coordinator does with an EndTxn (transaction protocol generation 1)."""
        txn = self.txns.get(tid)
        if txn is None or txn.producer_id != request.producer_id:
            return Code.INVALID_PRODUCER_ID_MAPPING
        if txn.epoch != request.producer_epoch:
            return Code.PRODUCER_FENCED
        wanted = COMMITTED if request.committed else ABORTED
        if txn.state == ONGOING:
            txn.state = wanted
            return Code.NONE
        return Code.NONE if txn.state == wanted else Code.INVALID_TXN_STATE

    def _DescribeTransactions(self, node: int, request: Any) -> Any:  # noqa: N802
        states = []
        for tid in request.transactional_ids:
            self.log.append(("DescribeTransactions", node, tid))
            code = self._coordinator_says("DescribeTransactions", node, tid)
            txn = self.txns.get(tid)
            if code is None and txn is None:
                code = Code.TRANSACTIONAL_ID_NOT_FOUND
            states.append(SimpleNamespace(
                transactional_id=tid, error_code=int(code or Code.NONE),
                transaction_state=txn.state if txn and not code else "",
                producer_id=txn.producer_id if txn else -1,
                producer_epoch=txn.epoch if txn else -1))
        return SimpleNamespace(transaction_states=states)

    def _ListTransactions(self, node: int, request: Any) -> Any:  # noqa: N802
        """The open transactions whose coordinator is ``node``."""
        self.log.append(("ListTransactions", node, ""))
        states = [SimpleNamespace(transactional_id=tid, producer_id=txn.producer_id,
                                  transaction_state=txn.state)
                  for tid, txn in self.txns.items()
                  if txn.state == ONGOING and self.coordinators.get(tid) == node]
        return SimpleNamespace(error_code=0, transaction_states=states)

    def _coordinator_says(self, api: str, node: int, tid: str) -> Code | None:
        """A scripted code, NOT_COORDINATOR at the wrong node, or None: go on."""
        scripted = self._next(api, tid)
        if isinstance(scripted, BaseException):
            raise scripted
        if isinstance(scripted, Code):
            return scripted
        return Code.NOT_COORDINATOR if self.coordinators.get(tid) != node else None

    def leader(self, tp: TopicPartition) -> int:
        """Partition ``p``'s leader: the ``p``-th node, round the ring."""
        return self.nodes[tp[1] % len(self.nodes)]

    def _Metadata(self, node: int, request: Any) -> Any:  # noqa: N802
        self.log.append(("Metadata", node, ",".join(t.name for t in request.topics or ())))
        tps = {tp for t in self.history.values() for tp in t.firsts}
        topics: list[Any] = []
        for asked in request.topics or ():
            parts = sorted(p for t, p in tps if t == asked.name)
            topics.append(SimpleNamespace(
                name=asked.name, error_code=0 if parts else int(Code.UNKNOWN_TOPIC_OR_PARTITION),
                partitions=[SimpleNamespace(partition_index=p,
                                            leader_id=self.leader((asked.name, p)))
                            for p in parts]))
        return SimpleNamespace(topics=topics)

    def _Fetch(self, node: int, request: Any) -> Any:  # noqa: N802
        topics = []
        for topic in request.topics:
            parts = []
            for asked in topic.partitions:
                tp = (topic.topic, asked.partition)
                key = f"{tp[0]}-{tp[1]}"
                self.log.append(("Fetch", node, key))
                scripted = self._next("Fetch", key)
                if isinstance(scripted, BaseException):
                    raise scripted
                parts.append(self._partition(tp, asked.fetch_offset, scripted))
            topics.append(SimpleNamespace(topic=topic.topic, partitions=parts))
        return SimpleNamespace(responses=topics)

    def _partition(self, tp: TopicPartition, offset: int, code: Answer | None) -> Any:
        """A read_committed answer from ``offset``: the transaction starting there, its
        batch, and whether its producer aborted it (the LSO stays at an open one)."""
        owner = next((t for t in self.history.values() if t.firsts.get(tp) == offset), None)
        lso, records, aborted = offset, b"", []
        if isinstance(code, Code) and code != Code.NONE:
            return _chunk(tp, int(code), offset, b"", [])
        if owner is not None:
            aborted_here = tp in owner.aborted_by_hand or owner.state == ABORTED
            over = owner.state != ONGOING or tp in owner.aborted_by_hand
            if over:
                lso = offset + 4  # three records and the marker
                records = encode_batch([None] * 3, [b"v"] * 3, 0, producer_id=owner.producer_id,
                                       producer_epoch=owner.epoch, base_sequence=0,
                                       transactional=True, base_offset=offset)
                if aborted_here and self.aborted_index:
                    aborted = [SimpleNamespace(producer_id=owner.producer_id,
                                               first_offset=offset)]
        return _chunk(tp, 0, lso, records, aborted)


def _chunk(tp: TopicPartition, code: int, lso: int, records: bytes, aborted: list) -> Any:
    return SimpleNamespace(partition_index=tp[1], error_code=code, log_start_offset=0,
                           high_watermark=lso, last_stable_offset=lso, records=records,
                           aborted_transactions=aborted)


class FakeWire:
    """What the driver's code uses of a KafkaWire, answered by a :class:`FakeKafka`."""

    # What the process's wires learned (wire/known.py), as a real wire keeps it.
    known_coordinator = KafkaWire.known_coordinator
    learn_coordinator = KafkaWire.learn_coordinator
    forget_coordinator = KafkaWire.forget_coordinator
    known_topic = KafkaWire.known_topic
    known_leader = KafkaWire.known_leader
    learn_topic = KafkaWire.learn_topic
    forget_topic = KafkaWire.forget_topic

    def __init__(self, kafka: FakeKafka, config: ClientConfig | None = None) -> None:
        self.kafka = kafka
        self.config = config or ClientConfig.from_options(
            {"kafka.bootstrap.servers": "fake:9092", "kafka.default.api.timeout.ms": "2000"})
        self.client = SimpleNamespace(cluster=SimpleNamespace(
            broker_metadata=lambda node: SimpleNamespace(host="fake", port=9092)
            if node in kafka.nodes else None,
            brokers=lambda: [SimpleNamespace(node_id=n) for n in kafka.nodes]))
        self.closed = 0

    @classmethod
    def for_config(cls, config: ClientConfig) -> FakeWire:
        """A wire to an empty cluster, made as ``KafkaWire(config)`` is (code that opens its
        own wire, faulted below the wire: the source's planner and partition reader)."""
        return cls(FakeKafka(), config)

    def version(self, request_cls: Any) -> int:
        name = request_cls.__name__
        if name == "DescribeProducersRequest" and not self.kafka.aborted_index:
            raise for_code(Code.UNSUPPORTED_VERSION)(name)
        return VERSION_CAPS.get(name, 0)

    def any_node(self, avoid: Sequence[int] = ()) -> int:
        return next((n for n in self.kafka.nodes if n not in avoid), self.kafka.nodes[0])

    def request_any(self, request: Any, what: str, timeout_ms: int | None = None, *,
                    resend: bool = True) -> Any:
        return self.kafka.answer(self.any_node(), request)

    def request(self, node: int, request: Any, what: str, timeout_ms: int | None = None) -> Any:
        return self.request_many([(node, request)], what, timeout_ms)[0]

    def request_many(self, calls: Sequence[tuple[int, Any]], what: str,
                     timeout_ms: int | None = None) -> list[Any]:
        """Answers in order; a lost connection fails the whole round, as on a real wire."""
        return [self.kafka.answer(node, request) for node, request in calls]

    def send(self, node: int, request: Any, what: str) -> tuple[int, Any]:
        return node, request

    def wait(self, pending: Sequence[tuple[int, Any]], what: str,
             timeout_ms: int | None = None) -> list[Any]:
        return self.request_many(pending, what, timeout_ms)

    def flush(self) -> None:
        pass

    def update_cluster(self, metadata_response: Any) -> None:
        pass

    def sibling(self, index: int) -> FakeWire:
        return self

    def close(self) -> None:
        self.closed += 1

    reconnect = close

    def drop_connection(self, node: int) -> None:
        pass

    def notice_closed(self) -> None:
        pass

    def __enter__(self) -> FakeWire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
