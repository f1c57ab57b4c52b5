"""Transaction requests: InitProducerId, AddPartitionsToTxn, Produce, EndTxn.

These speak transaction protocol generation 1 (see ``VERSION_CAPS``): the
epoch stays fixed for the life of a transaction and a retried EndTxn with the
same epoch and outcome succeeds. Every hand-off records ``TXN_PROTOCOL``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
)

from ..errors import (
    ConnectionDroppedError,
    KafkaProtocolError,
    NotAuthorizedError,
    TimeoutError_,
    for_code,
)
from ..faults import fault_point
from ..kafka_codes import FENCED, Action, Code, classify
from .cluster import TopicPartition
from .connection import KafkaWire
from .coordinated import with_coordinator, with_coordinators
from .retry import LOST_NODE, TRANSACTION, Deadline, retriable
from .spread import LaneError, lane_errors, request_spread

TXN_PROTOCOL = 1


@dataclass(frozen=True)
class ProducerIdentity:
    """What InitProducerId returned: the producer id and its current epoch."""

    producer_id: int
    epoch: int


def init_producer_ids(
    wire: KafkaWire,
    coordinator: int | Mapping[str, int] | None,
    transactional_ids: Sequence[str],
    timeout_ms: int,
    *,
    deadline_s: Deadline | float | None = None,
) -> dict[str, ProducerIdentity]:
    """InitProducerId for many ids at once (spread over connections like :func:`end_txns`),
    each at its coordinator.

    On a transactional id this bumps the epoch, aborts whatever transaction the
    id held open and fences every older producer using it. ``coordinator`` is where to
    send first (one node for all ids, a node per id, or None to look them up); an id whose
    coordinator moved (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, a dropped connection)
    is looked up again, CONCURRENT_TRANSACTIONS is re-sent, until ``deadline_s``.
    """
    version = wire.version(InitProducerIdRequest)
    ids = list(transactional_ids)
    if coordinator is None or isinstance(coordinator, Mapping):
        known = dict(coordinator or {})
    else:
        known = dict.fromkeys(ids, coordinator)

    def send(calls: Sequence[tuple[str, int]]) -> list[ProducerIdentity | BaseException]:
        requests = [(node, InitProducerIdRequest[version](
            transactional_id=tid, transaction_timeout_ms=timeout_ms,
            producer_id=-1, producer_epoch=-1)) for tid, node in calls]
        responses = request_spread(wire, requests, f"InitProducerId ({len(calls)} ids)")
        return [resp if isinstance(resp, BaseException) else _identity(tid, resp, timeout_ms)
                for (tid, _), resp in zip(calls, responses, strict=True)]

    results, _ = with_coordinators(wire, ids, send, deadline=deadline_s, nodes=known)
    out: dict[str, ProducerIdentity] = {}
    for tid in ids:
        result = results[tid]
        if isinstance(result, BaseException):
            raise result
        out[tid] = result
    return out


def _identity(tid: str, resp: object, timeout_ms: int) -> ProducerIdentity | BaseException:
    code = resp.error_code  # type: ignore[attr-defined]
    if code == Code.NONE:
        return ProducerIdentity(resp.producer_id, resp.producer_epoch)  # type: ignore[attr-defined]
    if code == Code.INVALID_TRANSACTION_TIMEOUT:
        return for_code(code)(
            f"InitProducerId for {tid!r}: kafka.transaction.timeout.ms={timeout_ms} is "
            "more than the broker allows (transaction.max.timeout.ms, 15 minutes by "
            "default); lower the option or raise the broker setting"
        )
    return for_code(code)(f"InitProducerId for transactional id {tid!r}")


def init_idempotent(wire: KafkaWire, *, topic: str | None = None,
                    deadline_s: Deadline | float | None = None) -> ProducerIdentity:
    """A producer id with no transactional id (the at-least-once path); any broker hands one
    out, so a lost broker or a retriable code is retried on another.

    Kafka (3.0+, KIP-679) grants it to a principal with WRITE on any topic, or IDEMPOTENT_WRITE
    on the cluster: a refusal names WRITE on ``topic``, the ACL a sink needs anyway."""
    version = wire.version(InitProducerIdRequest)
    deadline = Deadline.of(deadline_s, wire)
    request = InitProducerIdRequest[version](
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
    )
    while True:
        try:
            resp = wire.request_any(request, "InitProducerId (idempotent)")
            if not resp.error_code:
                return ProducerIdentity(resp.producer_id, resp.producer_epoch)
            kind = for_code(resp.error_code)
            error: BaseException = (
                kind("InitProducerId (idempotent: WRITE on any topic or IDEMPOTENT_WRITE on "
                     "the cluster grants it)", ("TOPIC", topic))
                if issubclass(kind, NotAuthorizedError) and topic
                and resp.error_code == Code.CLUSTER_AUTHORIZATION_FAILED
                else kind("InitProducerId (idempotent)"))
        except LOST_NODE as exc:
            error = exc
        if not retriable(error) or not deadline.pause():
            raise error


def add_partitions_to_txn(
    wire: KafkaWire,
    coordinator: int | None,
    transactional_id: str,
    producer: ProducerIdentity,
    partitions: Sequence[TopicPartition],
    *,
    deadline_s: Deadline | float | None = None,
) -> int:
    """Register partitions with the open transaction before producing to them.

    Follows the coordinator when it moves (the transaction's state moves with it) and
    re-sends on CONCURRENT_TRANSACTIONS, until ``deadline_s``. Returns the coordinator
    that answered, for the next call.
    """
    version = wire.version(AddPartitionsToTxnRequest)
    request = add_partitions_request(version, transactional_id, producer, partitions)

    def send(node: int) -> None:
        resp = wire.request(node, request, f"AddPartitionsToTxn {transactional_id}")
        code = add_partitions_error(resp)
        if code:  # naming the partitions answered with it (a refusal names their topic)
            raise for_code(code)(f"AddPartitionsToTxn {transactional_id} "
                                 f"{_answered(resp, code) or sorted(partitions)}")

    return with_coordinator(wire, transactional_id, send, deadline=deadline_s,
                            node=coordinator)[1]


def add_partitions_request(
    version: int, transactional_id: str, producer: ProducerIdentity,
    partitions: Sequence[TopicPartition],
) -> AddPartitionsToTxnRequest:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return AddPartitionsToTxnRequest[version](
        v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=producer.producer_id,
        v3_and_below_producer_epoch=producer.epoch,
        v3_and_below_topics=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=sorted(ps))
            for t, ps in sorted(by_topic.items())
        ],
    )


#: Codes that say nothing of their own partition: OPERATION_NOT_ATTEMPTED marks the
#: partitions Kafka skipped because another one of the request failed (a topic the principal
#: may not write, among others it may), CONCURRENT_TRANSACTIONS asks to retry.
_SECONDARY = (Code.OPERATION_NOT_ATTEMPTED, Code.CONCURRENT_TRANSACTIONS)


def add_partitions_error(response: object) -> int:
    """The response's error code, NONE if none: the real error, before
    CONCURRENT_TRANSACTIONS, before OPERATION_NOT_ATTEMPTED."""
    codes = {
        r.partition_error_code
        for topic in response.results_by_topic_v3_and_below  # type: ignore[attr-defined]
        for r in topic.results_by_partition
    } - {Code.NONE}
    return max(codes, key=lambda c: (_SECONDARY.index(c) if c in _SECONDARY else 2, c)) \
        if codes else Code.NONE


def _answered(response: object, code: int) -> list[TopicPartition]:
    """The partitions an AddPartitionsToTxn ``response`` answered with ``code``."""
    return sorted(
        (topic.name, r.partition_index)
        for topic in response.results_by_topic_v3_and_below  # type: ignore[attr-defined]
        for r in topic.results_by_partition if r.partition_error_code == code)


def produce_request(
    wire: KafkaWire,
    transactional_id: str | None,
    batches: Mapping[TopicPartition, bytes],
    timeout_ms: int,
) -> ProduceRequest:
    version = wire.version(ProduceRequest)
    by_topic: dict[str, list[ProduceRequest.TopicProduceData.PartitionProduceData]] = {}
    for (topic, partition), records in batches.items():
        by_topic.setdefault(topic, []).append(
            ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=records)
        )
    return ProduceRequest[version](
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=timeout_ms,
        topic_data=[ProduceRequest.TopicProduceData(name=t, partition_data=ps)
                    for t, ps in by_topic.items()],
    )


def produce_errors(response: object) -> dict[TopicPartition, tuple[int, str | None]]:
    """Per-partition (error code, message) of a Produce response; code 0 omitted."""
    out: dict[TopicPartition, tuple[int, str | None]] = {}
    for topic in response.responses:  # type: ignore[attr-defined]
        for part in topic.partition_responses:
            if part.error_code:
                message = getattr(part, "error_message", None)
                out[(topic.name, part.index)] = (part.error_code, message)
    return out


def produce_offsets(response: object) -> dict[TopicPartition, int]:
    """Per-partition base offset a Produce response assigned (-1 when it gave none)."""
    return {(topic.name, part.index): getattr(part, "base_offset", -1)
            for topic in response.responses  # type: ignore[attr-defined]
            for part in topic.partition_responses}


@dataclass(frozen=True)
class EndTxnOutcome:
    """One EndTxn's answer. Only DONE says what became of the transaction: REFIND (a coordinator
    that moved may have written PrepareCommit first) and REFUSED (an earlier attempt may have
    committed) leave it to be found out (docs/design.md, invariant 9)."""

    transactional_id: str
    ok: bool
    error: KafkaProtocolError | ConnectionDroppedError | TimeoutError_ | None = None
    #: The node the request went to (for asking it again after a dropped connection).
    node: int = -1

    @property
    def action(self) -> Action:
        """What this answer asks for (:func:`..kafka_codes.classify`); a dropped connection or
        a timeout: look the coordinator up again (its outcome is unknown)."""
        if self.ok:
            return Action.DONE
        if isinstance(self.error, KafkaProtocolError):
            return classify(self.error.code)
        return Action.REFIND

    @property
    def fenced(self) -> bool:
        return isinstance(self.error, KafkaProtocolError) and self.error.code in FENCED


def end_txns(
    wire: KafkaWire,
    coordinator_of: Mapping[str, int],
    txns: Sequence[tuple[str, ProducerIdentity]],
    commit: bool,
    *,
    deadline_s: float = 60.0,
) -> list[EndTxnOutcome]:
    """EndTxn for many transactions, one answer per transaction, never raises.

    Sent at once over several connections to each coordinator (:mod:`.spread`): each EndTxn
    waits for its PrepareCommit to be replicated, and a broker serves one request per
    connection at a time. A connection that fails affects only the transactions it carried.

    Retries what asks to be retried in place (``Action.RETRY``: CONCURRENT_TRANSACTIONS,
    COORDINATOR_LOAD_IN_PROGRESS) at the same coordinator until ``deadline_s``; every other
    answer is returned as it came, for the caller to sort (see sink.driver.committer). A
    dropped connection (how Tansu answers a stale producer epoch, and what a dying
    coordinator does) and a request timeout are reported as that transaction's error: its
    outcome is unknown.
    """
    version = wire.version(EndTxnRequest)
    outcomes: dict[str, EndTxnOutcome] = {}
    pending = list(txns)
    deadline = Deadline(deadline_s)
    verb = "commit" if commit else "abort"
    while pending:
        calls = [
            (coordinator_of[tid], EndTxnRequest[version](
                transactional_id=tid, producer_id=who.producer_id,
                producer_epoch=who.epoch, committed=commit))
            for tid, who in pending
        ]
        responses = request_spread(wire, calls, f"EndTxn {verb} ({len(calls)} txns)")
        fault_point(f"endtxn.{verb}.answered")
        failed: dict[int, tuple[LaneError, list[tuple[str, ProducerIdentity]]]] = {}
        for item, error in zip(pending, lane_errors(responses), strict=True):
            if error is not None:
                failed.setdefault(id(error), (error, []))[1].append(item)
        for error, items in failed.values():  # each lane that failed, on its own
            if len(items) == 1 or isinstance(error, TimeoutError_):
                for tid, who in items:
                    outcomes[tid] = EndTxnOutcome(tid, False, type(error)(
                        f"EndTxn {verb} {tid} (producer {who.producer_id} epoch {who.epoch}): "
                        f"{error.message}"), coordinator_of[tid])
                continue
            # Find which one the broker rejected: send them one by one.
            for item in items:
                outcomes.update({o.transactional_id: o for o in end_txns(
                    wire, coordinator_of, [item], commit,
                    deadline_s=deadline.left())})
        retry = []
        for (tid, who), resp in zip(pending, responses, strict=True):
            if tid in outcomes:
                continue  # its lane failed: sorted above
            action = classify(resp.error_code)
            if action is Action.DONE:
                outcomes[tid] = EndTxnOutcome(tid, True, node=coordinator_of[tid])
            elif action is Action.RETRY and not deadline.expired:
                retry.append((tid, who))
            else:
                outcomes[tid] = EndTxnOutcome(tid, False, for_code(resp.error_code)(
                    f"EndTxn {verb} {tid} (producer {who.producer_id} epoch {who.epoch})"),
                    coordinator_of[tid])
        if retry:
            deadline.pause()
        pending = retry
    for outcome in outcomes.values():
        if outcome.action is Action.REFIND:
            wire.forget_coordinator(outcome.transactional_id)
        elif outcome.ok:
            wire.learn_coordinator(outcome.transactional_id, outcome.node)
    return [outcomes[tid] for tid, _ in txns]


def coordinator_answers(wire: KafkaWire, node: int, transactional_id: str) -> bool:
    """Whether ``node`` is up and says it is ``transactional_id``'s coordinator.

    Asked right after ``node`` dropped the connection on an EndTxn: a broker that answers
    this at once dropped the EndTxn on purpose (Tansu's answer to a stale epoch); a dead or
    moving coordinator does not answer, or names another node.
    """
    version = wire.version(FindCoordinatorRequest)
    if version >= 4:
        request = FindCoordinatorRequest[version](key_type=TRANSACTION,
                                                  coordinator_keys=[transactional_id])
    else:
        request = FindCoordinatorRequest[version](key=transactional_id, key_type=TRANSACTION)
    try:
        response = wire.request(node, request, f"FindCoordinator {transactional_id} (probe)")
    except (ConnectionDroppedError, TimeoutError_):
        wire.close()
        return False
    entry = response.coordinators[0] if version >= 4 else response
    return not entry.error_code and int(entry.node_id) == node
