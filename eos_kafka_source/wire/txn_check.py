"""Is a handed-over transaction still live and ours? Asked of its coordinator before the
driver decides (invariant 3: a transaction fenced after its hand-off fails the batch).

Kafka (2.8+) answers DescribeTransactions: one read-only request per coordinator for all
of its ids, so a batch of 1,000 tasks costs three requests, not 1,000. A transaction is
live when its coordinator holds it ``Ongoing`` under the producer id and epoch its task
handed over; a zombie's or a retry's InitProducerId, an operator's fence and Kafka's
transaction timeout all bump the epoch or end the transaction. A broker without
DescribeTransactions (Tansu) is asked with AddPartitionsToTxn instead, re-adding the
partitions the transaction holds: a no-op while it is live, PRODUCER_FENCED once fenced.

Runs on: the driver (commit worker).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafka.protocol.admin.transactions import DescribeTransactionsRequest
from kafka.protocol.producer import AddPartitionsToTxnRequest

from ..errors import KafkaProtocolError, for_code
from ..kafka_codes import Action, Code, classify
from .cluster import TopicPartition
from .connection import KafkaWire
from .retry import Deadline
from .spread import lane_errors, request_spread
from .txn import (
    ProducerIdentity,
    add_partitions_error,
    add_partitions_request,
)

#: A transaction the coordinator holds open (Kafka's TransactionState name).
ONGOING = "Ongoing"

Check = tuple[str, ProducerIdentity, Sequence[TopicPartition]]


def verify_txns(
    wire: KafkaWire,
    coordinator_of: Mapping[str, int],
    txns: Sequence[Check],
    *,
    deadline_s: float | None = None,
) -> list[KafkaProtocolError | None]:
    """Whether each open transaction is still live and ours; None when it is.

    A dead transaction's error says why (PRODUCER_FENCED with the state and epoch the
    coordinator holds, or TRANSACTIONAL_ID_NOT_FOUND). CONCURRENT_TRANSACTIONS and
    COORDINATOR_LOAD_IN_PROGRESS are retried here; the answers of a coordinator that moved
    (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE) are returned for the caller to look the
    coordinator up again. A dropped connection raises, and so does a refused
    authorisation (TRANSACTIONAL_ID DESCRIBE, implied by the WRITE the sink needs).
    """
    deadline = Deadline.of(deadline_s, wire)
    version = _describe_version(wire)
    if version is None:
        found = _add_partitions_check(wire, coordinator_of, txns, deadline)
    else:
        found = _describe_check(wire, version, coordinator_of, txns, deadline)
    for (tid, _, _), error in zip(txns, found, strict=True):
        if error is not None and classify(error.code) is Action.REFIND:
            wire.forget_coordinator(tid)
        elif error is None:
            wire.learn_coordinator(tid, coordinator_of[tid])
    return found


def _describe_version(wire: KafkaWire) -> int | None:
    try:
        return wire.version(DescribeTransactionsRequest)
    except KafkaProtocolError as exc:
        if exc.code == Code.UNSUPPORTED_VERSION:
            return None
        raise


def _describe_check(wire: KafkaWire, version: int, coordinator_of: Mapping[str, int],
                    txns: Sequence[Check], deadline: Deadline) -> list[KafkaProtocolError | None]:
    handed = {tid: who for tid, who, _ in txns}
    results: dict[str, KafkaProtocolError | None] = {}
    pending = list(handed)
    while pending:
        by_node: dict[int, list[str]] = {}
        for tid in pending:
            by_node.setdefault(coordinator_of[tid], []).append(tid)
        calls = [(node, DescribeTransactionsRequest[version](transactional_ids=ids))
                 for node, ids in by_node.items()]
        responses = wire.request_many(calls, f"DescribeTransactions (check {len(pending)} txns)")
        retry: set[str] = set()
        for resp in responses:
            for state in resp.transaction_states:  # type: ignore[attr-defined]
                tid = state.transactional_id
                if tid not in handed:
                    continue
                code = state.error_code
                if classify(code) is Action.RETRY and not deadline.expired:
                    retry.add(tid)
                elif code == Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                    raise for_code(code)(f"DescribeTransactions {tid}: checking the batch's "
                                         "transactions before committing them")
                else:
                    results[tid] = _judge(tid, handed[tid], code, state)
        for tid in pending:  # an answer that left an id out: the caller looks it up again
            if tid not in results and tid not in retry:
                results[tid] = for_code(Code.COORDINATOR_NOT_AVAILABLE)(
                    f"DescribeTransactions gave no answer for {tid}")
        if retry:
            deadline.pause()
        pending = list(retry)
    return [results[tid] for tid, _, _ in txns]


def _judge(tid: str, who: ProducerIdentity, code: int,
           state: object) -> KafkaProtocolError | None:
    """One DescribeTransactions answer against what the task handed over."""
    if classify(code) in (Action.RETRY, Action.REFIND):
        return for_code(code)(f"DescribeTransactions check of {tid} (producer "
                              f"{who.producer_id} epoch {who.epoch})")
    if code == Code.TRANSACTIONAL_ID_NOT_FOUND:  # the id expired or never ran
        return for_code(code)(f"transaction {tid} (producer {who.producer_id} epoch "
                              f"{who.epoch}) is no longer live: the coordinator has no such id")
    if code:
        return for_code(code)(f"transaction {tid} (producer {who.producer_id} epoch "
                              f"{who.epoch}) is no longer live")
    held = (state.transaction_state, state.producer_id,  # type: ignore[attr-defined]
            state.producer_epoch)  # type: ignore[attr-defined]
    if held == (ONGOING, who.producer_id, who.epoch):
        return None
    return for_code(Code.PRODUCER_FENCED)(
        f"transaction {tid} (producer {who.producer_id} epoch {who.epoch}) is no longer "
        f"live: its coordinator holds state {held[0]}, producer {held[1]} epoch {held[2]}")


def _add_partitions_check(wire: KafkaWire, coordinator_of: Mapping[str, int],
                          txns: Sequence[Check],
                          deadline: Deadline) -> list[KafkaProtocolError | None]:
    """AddPartitionsToTxn again with the partitions the transaction already holds (spread
    over connections like EndTxn). Only before a decision: on a transaction already
    committed it would begin a new one."""
    version = wire.version(AddPartitionsToTxnRequest)
    results: dict[str, KafkaProtocolError | None] = {}
    pending = list(txns)
    while pending:
        calls = [(coordinator_of[tid], add_partitions_request(version, tid, who, parts))
                 for tid, who, parts in pending]
        responses = request_spread(wire, calls, f"AddPartitionsToTxn (check {len(calls)} txns)")
        lost = next((e for e in lane_errors(responses) if e is not None), None)
        if lost is not None:
            raise lost
        retry = []
        for (tid, who, parts), resp in zip(pending, responses, strict=True):
            code = add_partitions_error(resp)
            if classify(code) is Action.RETRY and not deadline.expired:
                retry.append((tid, who, parts))
                continue
            results[tid] = for_code(code)(
                f"transaction {tid} (producer {who.producer_id} epoch {who.epoch}) is no "
                "longer live" if classify(code) is not Action.REFIND else
                f"AddPartitionsToTxn check of {tid} (producer {who.producer_id} epoch "
                f"{who.epoch})") if code else None
        if retry:
            deadline.pause()
        pending = retry
    return [results[tid] for tid, _, _ in txns]
