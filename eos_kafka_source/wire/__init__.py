"""The Kafka wire layer: every request eoskafka sends to a broker lives here."""

from .cluster import (
    TopicInfo,
    TopicPartition,
    create_partitions,
    create_topic,
    fetch_metadata,
    find_coordinator,
    find_coordinators,
    leader_of,
    matching_topics,
    require_topics,
)
from .connection import KafkaWire
from .fetch import (
    Bounds,
    Chunk,
    LogCursor,
    fetch,
    fetch_bounds,
    list_earliest,
    list_offsets_for_times,
)
from .txn import (
    TXN_PROTOCOL,
    EndTxnOutcome,
    ProducerIdentity,
    add_partitions_to_txn,
    end_txns,
    init_idempotent,
    init_producer_ids,
    produce_errors,
    produce_request,
)
from .txn_check import verify_txns

__all__ = [
    "TXN_PROTOCOL", "Bounds", "Chunk", "EndTxnOutcome", "KafkaWire", "LogCursor",
    "ProducerIdentity", "TopicInfo", "TopicPartition", "add_partitions_to_txn",
    "create_partitions", "create_topic", "end_txns", "fetch", "fetch_bounds", "fetch_metadata",
    "find_coordinator", "find_coordinators", "init_idempotent", "init_producer_ids",
    "leader_of", "list_earliest", "list_offsets_for_times", "matching_topics", "produce_errors",
    "produce_request",
    "require_topics", "verify_txns",
]
