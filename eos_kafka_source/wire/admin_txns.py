"""Kafka's admin view of transactions and producers (KIP-664): ListTransactions to find every
open transaction under a prefix, DescribeProducers to find where a producer's open
transaction starts in a partition, DescribeTransactions to ask a coordinator whether a
transaction may still be open on a partition.

All are read-only. ListTransactions goes to every broker (each coordinates a share of
the transactional ids) and returns only the ids the principal may DESCRIBE, which a
prefixed TRANSACTIONAL_ID ACL with WRITE implies; Kafka 4.1+ (KIP-1152, request v2)
filters by a pattern itself, older brokers answer every id and the caller filters.
DescribeProducers goes to a partition's leader and needs READ on the topic.
A broker without them (Tansu 0.6.0) makes both return None: the callers fall back.
Runs on: the driver (ListTransactions, fencing), executors (DescribeProducers, hand-off).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)

from ..errors import KafkaProtocolError
from ..kafka_codes import Code
from .cluster import TopicPartition, fetch_metadata, find_coordinators
from .connection import KafkaWire
from .retry import LOST_NODE

log = logging.getLogger(__name__)

#: Transaction states in which a transaction holds its partitions' LSO back.
OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")


def _version(wire: KafkaWire, request_cls: type) -> int | None:
    try:
        return wire.version(request_cls)
    except KafkaProtocolError as exc:
        if exc.code == Code.UNSUPPORTED_VERSION:
            return None
        raise


def list_open_transactions(wire: KafkaWire, pattern: str) -> dict[str, int] | None:
    """Open transactions whose id fully matches regular expression ``pattern``: id ->
    producer id. None when the cluster cannot say for sure (no ListTransactions, a broker
    that did not answer, or answered with an error): the caller must fall back."""
    version = _version(wire, ListTransactionsRequest)
    if version is None:
        return None
    fetch_metadata(wire, [])  # every broker, not only the bootstrap ones
    nodes = sorted(b.node_id for b in wire.client.cluster.brokers())
    fields: dict[str, object] = {"state_filters": list(OPEN_STATES), "producer_id_filters": []}
    if version >= 1:
        fields["duration_filter"] = -1
    if version >= 2:
        fields["transactional_id_pattern"] = pattern
    request = ListTransactionsRequest[version](**fields)
    try:
        answers = wire.request_many([(node, request) for node in nodes], "ListTransactions")
    except LOST_NODE as exc:
        log.info("eoskafka: ListTransactions incomplete (%s); probing instead", exc)
        return None
    wanted = re.compile(pattern)
    out: dict[str, int] = {}
    for node, answer in zip(nodes, answers, strict=True):
        if answer.error_code:
            # COORDINATOR_LOAD_IN_PROGRESS and the like: this broker's share is unknown.
            log.info("eoskafka: ListTransactions on node %d answered error %d; probing instead",
                     node, answer.error_code)
            return None
        for state in answer.transaction_states:
            if state.transaction_state in OPEN_STATES and wanted.fullmatch(
                    state.transactional_id):
                out[state.transactional_id] = state.producer_id
    return out


def txn_start_offsets(wire: KafkaWire, leaders: Mapping[TopicPartition, int],
                      producer_id: int) -> dict[TopicPartition, int] | None:
    """Where ``producer_id``'s open transaction starts in each partition (its
    ``currentTxnStartOffset``); partitions that did not say are left out. None when the
    cluster has no DescribeProducers."""
    version = _version(wire, DescribeProducersRequest)
    if version is None:
        return None
    by_leader: dict[int, dict[str, list[int]]] = {}
    for (topic, partition), leader in leaders.items():
        by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)
    Topic = DescribeProducersRequest.TopicRequest
    calls = [(leader, DescribeProducersRequest[version](topics=[
        Topic(name=t, partition_indexes=sorted(ps)) for t, ps in sorted(topics.items())]))
        for leader, topics in by_leader.items()]
    out: dict[TopicPartition, int] = {}
    for answer in wire.request_many(calls, "DescribeProducers"):
        for topic in answer.topics:
            for part in topic.partitions:
                if part.error_code:
                    continue  # a leader that moved: the caller falls back for it
                for producer in part.active_producers:
                    if (producer.producer_id == producer_id
                            and producer.current_txn_start_offset >= 0):
                        out[(topic.name, part.partition_index)] = \
                            producer.current_txn_start_offset
    return out


def coordinator_may_hold(wire: KafkaWire, transactional_id: str, producer_id: int,
                         tp: TopicPartition) -> bool | None:
    """Whether the coordinator of ``transactional_id`` may still hold a transaction of
    ``producer_id`` on ``tp`` whose marker is not written yet. False when it holds none
    (another state, another producer id, that partition's marker written, or the id
    expired); None when it cannot say (no DescribeTransactions, an error): the caller must
    then take the transaction for possibly open. Conservative: a later transaction of the
    same producer on ``tp`` counts as possibly this one."""
    version = _version(wire, DescribeTransactionsRequest)
    if version is None:
        return None
    node = find_coordinators(wire, [transactional_id])[transactional_id]
    answer = wire.request(node, DescribeTransactionsRequest[version](
        transactional_ids=[transactional_id]), f"DescribeTransactions {transactional_id}")
    for state in answer.transaction_states:
        if state.transactional_id != transactional_id:
            continue
        if state.error_code == Code.TRANSACTIONAL_ID_NOT_FOUND:
            return False
        if state.error_code:
            return None
        # While preparing, ``topics`` lists only the partitions still without a marker.
        return (state.transaction_state in OPEN_STATES and state.producer_id == producer_id
                and any(t.topic == tp[0] and tp[1] in t.partitions for t in state.topics))
    return None
