"""Kafka's protocol error codes eoskafka meets, and what each asks of the client.

:class:`Code` names them (``kafka/common/protocol/Errors.java``); :func:`classify` says what
an answer asks for, as Kafka's ``TransactionManager.EndTxnHandler.handleResponse`` decides
it for a transactional request:

- ``DONE``: NONE.
- ``RETRY``: re-send to the same node: COORDINATOR_LOAD_IN_PROGRESS and
  CONCURRENT_TRANSACTIONS (the coordinator is the right one, busy or still loading its
  log), and every other retriable code (Kafka re-enqueues any ``RetriableException``).
- ``REFIND``: look the coordinator up again, then re-send: NOT_COORDINATOR,
  COORDINATOR_NOT_AVAILABLE (Kafka's ``lookupCoordinator``), and REQUEST_TIMED_OUT,
  NETWORK_EXCEPTION (the node may be going away). None of them says whether the request
  took effect: a coordinator answers NOT_COORDINATOR also after PrepareCommit reached its
  log, and maps a timed-out log append to COORDINATOR_NOT_AVAILABLE.
- ``REFUSED``: this request is refused for good: PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
  below EndTxn v2), INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING. It says the request
  failed, not that an earlier one did (docs/design.md, invariant 9).
- ``FATAL``: a code named here that no retry helps (not authorised, unsupported, invalid).
- ``UNKNOWN``: a code not named here (Kafka's "Unhandled error in EndTxnResponse").

A leaf module (it imports nothing of eoskafka): ``errors.py`` builds its exception classes
from it, so the client package that sits under everything may import both.
"""

from __future__ import annotations

import enum


class Code(enum.IntEnum):
    """A Kafka protocol error code."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    MESSAGE_TOO_LARGE = 10
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    ILLEGAL_GENERATION = 22
    UNKNOWN_MEMBER_ID = 25
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    NOT_CONTROLLER = 41
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    OPERATION_NOT_ATTEMPTED = 55
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88  # OffsetFetch require_stable, classic coordinator
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    UNKNOWN_TOPIC_ID = 100
    TRANSACTIONAL_ID_NOT_FOUND = 105


C = Code

#: Codes whose exception Kafka marks retriable (a ``RetriableException``).
RETRIABLE = frozenset({
    C.CORRUPT_MESSAGE, C.UNKNOWN_TOPIC_OR_PARTITION, C.LEADER_NOT_AVAILABLE,
    C.NOT_LEADER_OR_FOLLOWER, C.REQUEST_TIMED_OUT, C.NETWORK_EXCEPTION,
    C.COORDINATOR_LOAD_IN_PROGRESS, C.COORDINATOR_NOT_AVAILABLE, C.NOT_COORDINATOR,
    C.NOT_ENOUGH_REPLICAS, C.NOT_ENOUGH_REPLICAS_AFTER_APPEND, C.NOT_CONTROLLER,
    C.CONCURRENT_TRANSACTIONS, C.FENCED_LEADER_EPOCH, C.UNKNOWN_LEADER_EPOCH,
    C.UNSTABLE_OFFSET_COMMIT, C.THROTTLING_QUOTA_EXCEEDED, C.UNKNOWN_TOPIC_ID,
})
#: The authorizer refused: topic, group, cluster, transactional id (never retried).
AUTHORIZATION = frozenset({C.TOPIC_AUTHORIZATION_FAILED, C.GROUP_AUTHORIZATION_FAILED,
                           C.CLUSTER_AUTHORIZATION_FAILED,
                           C.TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
#: "This producer epoch is no longer the current one" (a newer producer fenced it, or the
#: coordinator no longer knows the id).
FENCED = frozenset({C.INVALID_PRODUCER_EPOCH, C.INVALID_PRODUCER_ID_MAPPING,
                    C.UNKNOWN_PRODUCER_ID, C.PRODUCER_FENCED})
#: Partition requests (Fetch, ListOffsets, Produce): look the partition's leader up again.
LEADER_MOVED = frozenset({C.LEADER_NOT_AVAILABLE, C.NOT_LEADER_OR_FOLLOWER,
                          C.FENCED_LEADER_EPOCH, C.UNKNOWN_LEADER_EPOCH})


class Action(enum.Enum):
    """What an answer asks of the client (module docstring)."""

    DONE = "done"
    RETRY = "retry in place"
    REFIND = "find the coordinator again"
    REFUSED = "refused for good"
    FATAL = "fatal"
    UNKNOWN = "unknown"


_REFIND = frozenset({C.COORDINATOR_NOT_AVAILABLE, C.NOT_COORDINATOR, C.REQUEST_TIMED_OUT,
                     C.NETWORK_EXCEPTION})
_REFUSED = frozenset({C.INVALID_PRODUCER_EPOCH, C.INVALID_TXN_STATE,
                      C.INVALID_PRODUCER_ID_MAPPING, C.PRODUCER_FENCED})
_KNOWN = frozenset(int(c) for c in Code)


def classify(code: int) -> Action:
    """What a coordinator's answer ``code`` asks for (module docstring)."""
    if code == C.NONE:
        return Action.DONE
    if code in _REFIND:
        return Action.REFIND
    if code in _REFUSED:
        return Action.REFUSED
    if code in RETRIABLE:
        return Action.RETRY
    if code in _KNOWN:
        return Action.FATAL
    return Action.UNKNOWN


def name_of(code: int) -> str:
    """Kafka's name for ``code`` (``ERROR_<code>`` for one not named here)."""
    return Code(code).name if code in _KNOWN else f"ERROR_{code}"
