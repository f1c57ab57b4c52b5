"""Hanging transactions (KIP-664), judged exactly as Kafka's ``kafka-transactions.sh find-hanging``.

A partition can hold a producer's open transaction that no coordinator will ever end, so
its last stable offset never moves again. Kafka's tool (``TransactionsCommand``) calls an
open transaction in a partition hanging when **both** hold:

1. the producer's last write there (DescribeProducers ``lastTimestamp``) is older than the
   maximum transaction timeout (the tool's ``--max-transaction-timeout``; here the
   brokers' ``transaction.max.timeout.ms``, Kafka's default of 15 minutes when they do not
   say); a younger one is not even a candidate;
2. no coordinator lists the partition for it: its producer id is in no ListTransactions
   answer, the coordinator does not know the transactional id, or DescribeTransactions
   does not list the partition (it lists every partition of an Ongoing transaction, and
   those still waiting for their marker in PrepareCommit or PrepareAbort).

Nothing else is hanging, however long ago the transaction started: a coordinator that
still lists the partition writes its marker (it retries until the leader takes it), and
a producer that wrote within the timeout may still be in a transaction its coordinator
is about to list or end. eoskafka never acts more boldly than that (docs/design.md,
invariant 18). One refinement keeps it from racing a commit whose markers are being
written: the coordinator is asked first, and the leaders again after it; a partition
still open after its coordinator stopped listing it stays open (a coordinator leaves
PrepareCommit only once every marker is written).

Nothing but a marker written to that partition ends a hanging transaction:
``kafka-transactions.sh abort`` (WriteTxnMarkers ABORT, which needs CLUSTER_ACTION) or
:func:`abort_hanging`. Runs on: the driver (confirming a commit's markers) and
``eoskafka txns``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kafka.protocol.admin.configs import DescribeConfigsRequest
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.producer.transaction import WriteTxnMarkersRequest

from ..errors import EosKafkaError, KafkaProtocolError, for_code
from ..kafka_codes import Code
from .cluster import TopicPartition, fresh_leaders, require_topics
from .connection import KafkaWire
from .coordinated import with_coordinator
from .retry import LOST_NODE

log = logging.getLogger(__name__)

#: Kafka's default ``transaction.max.timeout.ms``, and find-hanging's default
#: ``--max-transaction-timeout``: used when the brokers do not say theirs.
DEFAULT_MAX_TIMEOUT_MS = 900_000
MAX_TIMEOUT_KEY = "transaction.max.timeout.ms"
_BROKER_RESOURCE = 4
_max_timeouts: dict[tuple[str, ...], int] = {}


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

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class Verdict:
    """Whether one open transaction in one partition hangs, and why (words that hold for
    this case only)."""

    producer: OpenProducer
    transactional_id: str | None
    hanging: bool
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


@dataclass
class Search:
    """What :func:`find_hanging` found, and what it could not ask."""

    hanging: list[Verdict] = field(default_factory=list)
    #: Partitions, or transactional ids, that could not be asked now, with why.
    unasked: list[str] = field(default_factory=list)


def judge(producer: OpenProducer, transactional_id: str | None, view: object | None, *,
          now_ms: int, max_timeout_ms: int) -> Verdict:
    """Whether ``producer``'s open transaction hangs in its partition, as find-hanging
    judges: last written longer than ``max_timeout_ms`` ago, and no coordinator lists the
    partition. ``transactional_id`` None: no coordinator lists the producer id; ``view``
    None: its coordinator does not know the id, else its DescribeTransactions entry."""
    idle_ms = now_ms - producer.last_timestamp_ms
    idle = f"its last write here was {idle_ms / 1000:.0f} s ago"
    if idle_ms <= max_timeout_ms:
        return Verdict(producer, transactional_id, False,
                       f"{idle}, within the maximum transaction timeout ({max_timeout_ms} ms): "
                       "its coordinator may still end it")
    older = f"{idle}, longer than any transaction may last ({MAX_TIMEOUT_KEY}={max_timeout_ms})"
    if transactional_id is None:
        return Verdict(producer, None, True, f"no coordinator lists a transaction of producer "
                       f"id {producer.producer_id}, and {older}: no marker will come")
    if view is None:
        return Verdict(producer, transactional_id, True,
                       f"its coordinator does not know {transactional_id}, and {older}: no "
                       "marker will come")
    state = view.transaction_state  # type: ignore[attr-defined]
    listed = {(t.topic, p) for t in view.topics for p in t.partitions}  # type: ignore[attr-defined]
    if producer.tp in listed:
        return Verdict(producer, transactional_id, False,
                       f"its coordinator still lists this partition (state {state}): it "
                       "writes the marker, retrying until the partition's leader takes it")
    return Verdict(producer, transactional_id, True,
                   f"its coordinator (state {state}, producer {view.producer_id} epoch "  # type: ignore[attr-defined]
                   f"{view.producer_epoch}) does not list this partition, and {older}: "  # type: ignore[attr-defined]
                   "no marker will come")


def max_transaction_timeout_ms(wire: KafkaWire) -> int:
    """The brokers' ``transaction.max.timeout.ms`` (DescribeConfigs of a broker: DESCRIBE_CONFIGS
    on the cluster), remembered per cluster; Kafka's default when they do not say."""
    key = tuple(wire.config.bootstrap_servers)
    if key not in _max_timeouts:
        _max_timeouts[key] = _ask_max_timeout(wire)
    return _max_timeouts[key]


def _ask_max_timeout(wire: KafkaWire) -> int:
    try:
        version = wire.version(DescribeConfigsRequest)
        node = wire.any_node()
        answer = wire.request(node, DescribeConfigsRequest[version](
            resources=[DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=_BROKER_RESOURCE, resource_name=str(node),
                configuration_keys=None)],
            include_synonyms=False, include_documentation=False), f"DescribeConfigs {node}")
        (result,) = answer.results
        if result.error_code:
            raise for_code(result.error_code)(f"DescribeConfigs broker {node}")
        values = {c.name: c.value for c in result.configs}
        return int(values[MAX_TIMEOUT_KEY])
    except (EosKafkaError, *LOST_NODE, KeyError, TypeError, ValueError) as exc:
        log.info("eoskafka: the brokers' %s could not be read (%s); taking Kafka's default, "
                 "%d ms", MAX_TIMEOUT_KEY, exc, DEFAULT_MAX_TIMEOUT_MS)
        return DEFAULT_MAX_TIMEOUT_MS


def open_producers(wire: KafkaWire, partitions: Iterable[TopicPartition],
                   unasked: list[str] | None = None
                   ) -> dict[TopicPartition, list[OpenProducer]] | None:
    """Producers with an open transaction, per partition (DescribeProducers at each leader).
    A partition without a leader, whose leader answered an error or could not be reached
    is left out (and named in ``unasked``). None without DescribeProducers."""
    wanted = sorted(set(partitions))
    try:
        version = wire.version(DescribeProducersRequest)
    except KafkaProtocolError:
        return None
    leaders = require_topics(wire, sorted({t for t, _ in wanted})) if wanted else {}
    by_leader: dict[int, dict[str, list[int]]] = {}
    for topic, partition in wanted:
        leader = leaders[topic].leaders.get(partition, -1)
        by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)
    Topic = DescribeProducersRequest.TopicRequest
    out: dict[TopicPartition, list[OpenProducer]] = {}
    skipped = unasked if unasked is not None else []
    for leader, topics in sorted(by_leader.items()):
        names = [f"{t}-{p}" for t, ps in sorted(topics.items()) for p in ps]
        if leader < 0:
            skipped += [f"{n}: no leader" for n in names]
            continue
        try:
            answer = wire.request(leader, DescribeProducersRequest[version](topics=[
                Topic(name=t, partition_indexes=sorted(ps)) for t, ps in sorted(topics.items())]),
                "DescribeProducers (open transactions)")
        except LOST_NODE as exc:
            skipped += [f"{n}: its leader (broker {leader}) could not be asked ({exc})"
                        for n in names]
            continue
        for topic in answer.topics:
            for part in topic.partitions:
                if part.error_code:
                    skipped.append(f"{topic.name}-{part.partition_index}: DescribeProducers "
                                   f"answered error {part.error_code}")
                    continue
                out[(topic.name, part.partition_index)] = [
                    OpenProducer(topic.name, part.partition_index, p.producer_id,
                                 p.producer_epoch, p.coordinator_epoch,
                                 p.current_txn_start_offset, p.last_timestamp)
                    for p in part.active_producers if p.current_txn_start_offset >= 0]
    return out


def describes_producers(wire: KafkaWire) -> bool:
    """Whether the cluster serves DescribeProducers (Kafka 2.8+; not Tansu 0.6): without it
    no transaction can be judged hanging."""
    try:
        wire.version(DescribeProducersRequest)
    except KafkaProtocolError:
        return False
    return True


def coordinator_view(wire: KafkaWire, transactional_id: str) -> object | None:
    """The coordinator's DescribeTransactions entry for ``transactional_id`` (fields
    transaction_state, producer_id, producer_epoch, topics, transaction_start_time_ms), or
    None when the id is unknown to it. Raises when the coordinator cannot be asked now."""

    def ask(node: int) -> object | None:
        version = wire.version(DescribeTransactionsRequest)
        answer = wire.request(node, DescribeTransactionsRequest[version](
            transactional_ids=[transactional_id]), f"DescribeTransactions {transactional_id}")
        (state,) = answer.transaction_states
        if state.error_code == Code.TRANSACTIONAL_ID_NOT_FOUND:
            return None
        if state.error_code:
            raise for_code(state.error_code)(f"DescribeTransactions {transactional_id}")
        return state

    return with_coordinator(wire, transactional_id, ask, deadline=10.0)[0]


def transactional_ids_of(wire: KafkaWire, producer_ids: Iterable[int],
                         unasked: list[str] | None = None) -> dict[int, str]:
    """Transactional ids of ``producer_ids`` (ListTransactions at every broker, any state); a
    broker that cannot be asked is named in ``unasked`` (or raises without it)."""
    wanted = sorted(set(producer_ids))
    if not wanted:
        return {}
    version = wire.version(ListTransactionsRequest)
    fields: dict[str, object] = {"state_filters": [], "producer_id_filters": wanted}
    if version >= 1:
        fields["duration_filter"] = -1
    nodes = sorted(b.node_id for b in wire.client.cluster.brokers())
    out: dict[int, str] = {}
    for node in nodes:
        try:
            answer = wire.request(node, ListTransactionsRequest[version](**fields),
                                  "ListTransactions")
        except LOST_NODE as exc:
            if unasked is None:
                raise
            unasked.append(f"broker {node}: ListTransactions could not be asked ({exc})")
            continue
        for state in answer.transaction_states:
            out[state.producer_id] = state.transactional_id
    return out


def find_hanging(wire: KafkaWire, partitions: Iterable[TopicPartition], *,
                 names: Mapping[int, str] | None = None,
                 max_timeout_ms: int | None = None) -> Search | None:
    """Every hanging transaction in ``partitions``, as find-hanging finds them (the module
    docstring), and what could not be asked now: partitions whose leader did not answer,
    and candidates whose coordinator did not (neither hanging nor cleared). ``names``:
    transactional ids already known by producer id. None when the cluster cannot say (no
    DescribeProducers)."""
    found = Search()
    producers = open_producers(wire, partitions, found.unasked)
    if producers is None:
        return None
    limit = max_transaction_timeout_ms(wire) if max_timeout_ms is None else max_timeout_ms
    now_ms = int(time.time() * 1000)
    candidates = [p for ps in producers.values() for p in ps
                  if now_ms - p.last_timestamp_ms > limit]
    if not candidates:
        return found
    ids = dict(names or {})
    unnamed = {p.producer_id for p in candidates} - set(ids)
    before = len(found.unasked)
    if unnamed:
        ids.update(transactional_ids_of(wire, unnamed, found.unasked))
    named_all = len(found.unasked) == before  # every broker answered ListTransactions
    views: dict[str, object | None] = {}
    judged: list[tuple[OpenProducer, str | None]] = []
    for producer in candidates:
        tid = ids.get(producer.producer_id)
        if tid is None and not named_all:
            found.unasked.append(f"{producer.topic}-{producer.partition}: producer "
                                 f"{producer.producer_id}'s transactional id could not be "
                                 "looked up (a broker did not answer ListTransactions)")
            continue
        if tid is not None and tid not in views:
            try:
                views[tid] = coordinator_view(wire, tid)
            except (EosKafkaError, *LOST_NODE) as exc:
                found.unasked.append(f"{producer.topic}-{producer.partition}: the "
                                     f"coordinator of {tid} could not be asked ({exc})")
                continue
        if tid is None or tid in views:
            judged.append((producer, tid))
    # The leaders again, after the coordinators: only what is still open stays a candidate.
    again = open_producers(wire, {p.tp for p, _ in judged}, found.unasked) or {}
    still = {(p.tp, p.producer_id, p.start_offset) for ps in again.values() for p in ps}
    now_ms = int(time.time() * 1000)
    for producer, tid in judged:
        if (producer.tp, producer.producer_id, producer.start_offset) not in still:
            continue
        verdict = judge(producer, tid, views.get(tid) if tid else None, now_ms=now_ms,
                        max_timeout_ms=limit)
        if verdict.hanging:
            found.hanging.append(verdict)
    return found


def abort_hanging(wire: KafkaWire, hanging: Verdict) -> bool:
    """Write an ABORT marker for ``hanging`` to its partition, as ``kafka-transactions.sh
    abort`` does. False when the principal may not (CLUSTER_ACTION on the cluster): the
    operator must run :meth:`Verdict.command`."""
    assert hanging.hanging, hanging
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
    if code == Code.CLUSTER_AUTHORIZATION_FAILED:
        return False
    if code:
        raise for_code(code)(f"WriteTxnMarkers (abort of {hanging.describe()})")
    return True
