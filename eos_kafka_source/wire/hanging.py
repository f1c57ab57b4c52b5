"""Hanging transactions (KIP-664): a partition holds a producer's open transaction that no
coordinator will ever end, so its last stable offset never moves again.

Kafka's ``kafka-transactions.sh find-hanging`` calls a transaction hanging when a partition's
leader has a producer with an open transaction (DescribeProducers:
``currentTransactionStartOffset`` >= 0) and that producer's coordinator does not hold the
partition in an open transaction of that producer (DescribeTransactions), or the transaction
has been open longer than the longest timeout the brokers allow. Nothing but a marker
written to that partition ends it: ``kafka-transactions.sh abort`` (WriteTxnMarkers ABORT,
which needs CLUSTER_ACTION) or :func:`abort_hanging`. Seen on Kafka 4.4 after coordinator
and leader kills (the failover check): a decided, CompleteCommit transaction whose COMMIT
marker never reached one partition; the driver waited for it without end.

Runs on: the driver (confirming a commit's markers) and ``eoskafka txns``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.producer.transaction import WriteTxnMarkersRequest

from ..errors import EosKafkaError, KafkaProtocolError, for_code
from .admin_txns import OPEN_STATES
from .cluster import TopicPartition, fresh_leaders
from .connection import KafkaWire
from .coordinated import with_coordinator
from .retry import LOST_NODE

log = logging.getLogger(__name__)

#: Kafka's default ``transaction.max.timeout.ms``: an open transaction older than this is
#: hanging whatever its coordinator says (find-hanging's ``--max-transaction-timeout``).
MAX_TRANSACTION_TIMEOUT_MS = 900_000
_CLUSTER_AUTHORIZATION_FAILED = 31
_TRANSACTIONAL_ID_NOT_FOUND = 105


@dataclass(frozen=True)
class OpenProducer:
    """A producer with an open transaction in one partition, as its leader reports it."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int
    last_timestamp_ms: int


@dataclass(frozen=True)
class Hanging:
    """A hanging transaction in one partition, and why it is one."""

    producer: OpenProducer
    transactional_id: str | None
    why: str

    def command(self, bootstrap: str) -> str:
        """Kafka's own command that ends it (an ABORT marker in that partition)."""
        p = self.producer
        return (f"kafka-transactions.sh --bootstrap-server {bootstrap} abort --topic {p.topic} "
                f"--partition {p.partition} --start-offset {p.start_offset}")

    def describe(self) -> str:
        p = self.producer
        who = f" ({self.transactional_id})" if self.transactional_id else ""
        return (f"{p.topic}-{p.partition}: producer {p.producer_id} epoch {p.producer_epoch}"
                f"{who}, open from offset {p.start_offset}: {self.why}")


def open_producers(wire: KafkaWire, partitions: Iterable[TopicPartition]
                   ) -> dict[TopicPartition, list[OpenProducer]] | None:
    """Producers with an open transaction, per partition (DescribeProducers at each leader);
    a partition whose leader answered an error is left out. None without DescribeProducers."""
    wanted = sorted(set(partitions))
    try:
        version = wire.version(DescribeProducersRequest)
    except KafkaProtocolError:
        return None
    leaders = fresh_leaders(wire, sorted({t for t, _ in wanted}))
    by_leader: dict[int, dict[str, list[int]]] = {}
    for topic, partition in wanted:
        leader = leaders[topic].leaders.get(partition, -1)
        by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)
    Topic = DescribeProducersRequest.TopicRequest
    calls = [(leader, DescribeProducersRequest[version](topics=[
        Topic(name=t, partition_indexes=sorted(ps)) for t, ps in sorted(topics.items())]))
        for leader, topics in by_leader.items() if leader >= 0]
    out: dict[TopicPartition, list[OpenProducer]] = {}
    for answer in wire.request_many(calls, "DescribeProducers (open transactions)"):
        for topic in answer.topics:
            for part in topic.partitions:
                if part.error_code:
                    continue
                out[(topic.name, part.partition_index)] = [
                    OpenProducer(topic.name, part.partition_index, p.producer_id,
                                 p.producer_epoch, p.coordinator_epoch,
                                 p.current_txn_start_offset, p.last_timestamp)
                    for p in part.active_producers if p.current_txn_start_offset >= 0]
    return out


def coordinator_view(wire: KafkaWire, transactional_id: str) -> object | None:
    """The coordinator's DescribeTransactions entry for ``transactional_id`` (fields
    transaction_state, producer_id, producer_epoch, topics, transaction_start_time_ms), or
    None when the id is unknown to it. Raises when the coordinator cannot be asked now."""

    def ask(node: int) -> object | None:
        version = wire.version(DescribeTransactionsRequest)
        answer = wire.request(node, DescribeTransactionsRequest[version](
            transactional_ids=[transactional_id]), f"DescribeTransactions {transactional_id}")
        (state,) = answer.transaction_states
        if state.error_code == _TRANSACTIONAL_ID_NOT_FOUND:
            return None
        if state.error_code:
            raise for_code(state.error_code)(f"DescribeTransactions {transactional_id}")
        return state

    return with_coordinator(wire, transactional_id, ask, deadline=10.0)[0]


def judge(producer: OpenProducer, transactional_id: str | None, view: object | None, *,
          now_ms: int, max_timeout_ms: int = MAX_TRANSACTION_TIMEOUT_MS) -> Hanging | None:
    """Whether ``producer``'s open transaction hangs, given its coordinator's ``view``."""
    tp = (producer.topic, producer.partition)
    if transactional_id is None:
        return Hanging(producer, None, "no coordinator lists an open transaction of this "
                       "producer id")
    if view is None:
        return Hanging(producer, transactional_id, "its coordinator does not know the id")
    state = view.transaction_state  # type: ignore[attr-defined]
    held = {(t.topic, p) for t in view.topics for p in t.partitions}  # type: ignore[attr-defined]
    if (state not in OPEN_STATES or view.producer_id != producer.producer_id  # type: ignore[attr-defined]
            or tp not in held):
        return Hanging(producer, transactional_id,
                       f"its coordinator holds state {state} for producer "
                       f"{view.producer_id} epoch {view.producer_epoch} "  # type: ignore[attr-defined]
                       f"without this partition: no marker will come")
    started = view.transaction_start_time_ms  # type: ignore[attr-defined]
    if started > 0 and now_ms - started > max_timeout_ms:
        return Hanging(producer, transactional_id,
                       f"open for {(now_ms - started) / 1000:.0f} s, longer than any "
                       f"transaction may last ({max_timeout_ms} ms)")
    return None


def transactional_ids_of(wire: KafkaWire, producer_ids: Iterable[int]) -> dict[int, str]:
    """Transactional ids of ``producer_ids`` (ListTransactions at every broker, any state)."""
    wanted = sorted(set(producer_ids))
    if not wanted:
        return {}
    version = wire.version(ListTransactionsRequest)
    fields: dict[str, object] = {"state_filters": [], "producer_id_filters": wanted}
    if version >= 1:
        fields["duration_filter"] = -1
    nodes = sorted(b.node_id for b in wire.client.cluster.brokers())
    out: dict[int, str] = {}
    for answer in wire.request_many(
            [(n, ListTransactionsRequest[version](**fields)) for n in nodes], "ListTransactions"):
        for state in answer.transaction_states:
            out[state.producer_id] = state.transactional_id
    return out


def find_hanging(wire: KafkaWire, partitions: Iterable[TopicPartition], *,
                 names: Mapping[int, str] | None = None,
                 max_timeout_ms: int = MAX_TRANSACTION_TIMEOUT_MS) -> list[Hanging] | None:
    """Every hanging transaction in ``partitions``, as ``kafka-transactions.sh find-hanging``
    finds them. ``names``: transactional ids already known by producer id. None when the
    cluster cannot say (no DescribeProducers); a coordinator that cannot be asked now leaves
    its producers out (not hanging, not cleared)."""
    found = open_producers(wire, partitions)
    if found is None:
        return None
    opened = [p for producers in found.values() for p in producers]
    ids = dict(names or {})
    unnamed = {p.producer_id for p in opened} - set(ids)
    if unnamed:
        ids.update(transactional_ids_of(wire, unnamed))
    views: dict[str, object | None] = {}
    out = []
    now_ms = int(time.time() * 1000)
    for producer in opened:
        tid = ids.get(producer.producer_id)
        if tid is not None and tid not in views:
            try:
                views[tid] = coordinator_view(wire, tid)
            except (EosKafkaError, *LOST_NODE) as exc:
                log.info("eoskafka: could not ask the coordinator of %s: %s", tid, exc)
                continue
        hanging = judge(producer, tid, views.get(tid) if tid else None, now_ms=now_ms,
                        max_timeout_ms=max_timeout_ms)
        if hanging is not None:
            out.append(hanging)
    return out


def abort_hanging(wire: KafkaWire, hanging: Hanging) -> bool:
    """Write an ABORT marker for ``hanging`` to its partition, as ``kafka-transactions.sh
    abort`` does. False when the principal may not (CLUSTER_ACTION on the cluster): the
    operator must run :meth:`Hanging.command`."""
    p = hanging.producer
    version = wire.version(WriteTxnMarkersRequest)
    Marker = WriteTxnMarkersRequest.WritableTxnMarker
    request = WriteTxnMarkersRequest[version](markers=[Marker(
        producer_id=p.producer_id, producer_epoch=p.producer_epoch, transaction_result=False,
        topics=[Marker.WritableTxnMarkerTopic(name=p.topic, partition_indexes=[p.partition])],
        coordinator_epoch=max(p.coordinator_epoch, 0))])
    leader = fresh_leaders(wire, [p.topic])[p.topic].leaders[p.partition]
    answer = wire.request(leader, request, f"WriteTxnMarkers (abort {p.topic}-{p.partition})")
    codes = {q.error_code for m in answer.markers for t in m.topics for q in t.partitions}
    code = max(codes, default=0)
    if code == _CLUSTER_AUTHORIZATION_FAILED:
        return False
    if code:
        raise for_code(code)(f"WriteTxnMarkers (abort of {hanging.describe()})")
    return True

