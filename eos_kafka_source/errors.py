"""Our exception hierarchy: one base, a stable condition name, and Kafka error codes.

Every error a user can see derives from :class:`EosKafkaError`, carries a stable
``condition`` (an upper-case name, like Spark's error classes but ours) and a
message that names the problem and the fix. Kafka protocol error codes map to
:class:`KafkaProtocolError` subclasses via :func:`for_code`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import ClassVar, ParamSpec, TypeVar

from .kafka_codes import AUTHORIZATION, RETRIABLE, Code

_P = ParamSpec("_P")
_R = TypeVar("_R")


class EosKafkaError(Exception):
    """Base of every error raised by eoskafka."""

    condition: ClassVar[str] = "EOSKAFKA_ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(f"[{self.condition}] {message}")
        self.message = message


def user_facing(hook: Callable[_P, _R]) -> Callable[_P, _R]:
    """Driver-side Spark hooks: our own errors reach the user without their stack.

    Spark puts the hook's Python traceback into the message the user reads, after
    its own one-line header; an :class:`EosKafkaError` already names the problem and
    the fix, and a dozen frames of ours would push that line down. So it is
    re-raised with no frames but this one (its condition is then the fourth line,
    the first with ``spark.sql.execution.pyspark.udf.hideTraceback.enabled=true``);
    the full stack goes to the log at DEBUG. Other exceptions keep their stack.
    """

    @functools.wraps(hook)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return hook(*args, **kwargs)
        except EosKafkaError as exc:
            logging.getLogger("eos_kafka_source").debug("%s failed", hook.__qualname__,
                                                        exc_info=True)
            raise exc.with_traceback(None) from None

    return wrapper


class ConfigError(EosKafkaError, ValueError):
    """An option is unknown, malformed or conflicts with another."""

    condition = "EOSKAFKA_INVALID_OPTION"


class SchemaError(EosKafkaError, ValueError):
    """Input columns of a write do not fit the sink."""

    condition = "EOSKAFKA_INVALID_INPUT_SCHEMA"


class BrokerUnreachableError(EosKafkaError):
    """No broker answered within the deadline."""

    condition = "EOSKAFKA_BROKER_UNREACHABLE"


class AuthenticationError(BrokerUnreachableError):
    """The broker refused the SASL credentials, or the TLS handshake failed for good."""

    condition = "EOSKAFKA_AUTHENTICATION_FAILED"


class InvalidTimestampError(SchemaError):
    """The broker refused a record's timestamp (too far in the future or the past)."""

    condition = "EOSKAFKA_INVALID_TIMESTAMP"


class ConnectionDroppedError(EosKafkaError):
    """The broker closed the connection instead of answering a request."""

    condition = "EOSKAFKA_CONNECTION_DROPPED"


class TopicNotFoundError(EosKafkaError):
    """A topic named by the user does not exist."""

    condition = "EOSKAFKA_TOPIC_NOT_FOUND"


class DataLossError(EosKafkaError):
    """Offsets the query needs are gone (retention, deletion, truncation)."""

    condition = "EOSKAFKA_DATA_LOSS"


class AvailableNowBacklogError(EosKafkaError):
    """pyspark 4.0/4.1 end an AvailableNow run at the source's first answer: refused when
    that would leave data unread (source/available_now.py)."""

    condition = "EOSKAFKA_AVAILABLE_NOW_BACKLOG_TOO_LARGE"


class RecordTooLargeError(EosKafkaError):
    """A record does not fit the broker's or the topic's size limit."""

    condition = "EOSKAFKA_RECORD_TOO_LARGE"


class CorruptRecordError(EosKafkaError):
    """A record batch failed its CRC or could not be parsed."""

    condition = "EOSKAFKA_CORRUPT_RECORD"


class TransactionLostError(EosKafkaError):
    """A handed-off transaction can no longer be committed (fenced or expired)."""

    condition = "EOSKAFKA_TRANSACTION_LOST"


class TransactionOutcomeUnknownError(EosKafkaError):
    """EndTxn's outcome is not known (coordinator moved or unreachable): not a failure.

    The decision stays recorded and undone; the batch fails and the restarted driver
    rolls it forward (docs/design.md, the driver's commit).
    """

    condition = "EOSKAFKA_TRANSACTION_OUTCOME_UNKNOWN"


class HangingTransactionError(EosKafkaError):
    """A decided transaction hangs on a partition (KIP-664), as ``kafka-transactions.sh
    find-hanging`` judges one: no coordinator lists the partition for it, and its last write
    there is older than the maximum transaction timeout, so no marker will come. The
    message names Kafka's command that ends it; the decision stays, and the restarted query
    copies the records from the log once the partition holds the ABORT marker."""

    condition = "EOSKAFKA_HANGING_TRANSACTION"


class DecisionLogConflictError(EosKafkaError):
    """The decision log belongs to another query, or another driver wrote the same decision
    (docs/design.md invariant 8: a decision belongs to one query, not to a batch id)."""

    condition = "EOSKAFKA_DECISION_LOG_CONFLICT"


class DecisionLogFormatError(DecisionLogConflictError):
    """A decision-log file or hand-off was written by a newer eoskafka, in a format this one
    does not know (docs/compatibility.md, "Compatibility promise")."""

    condition = "EOSKAFKA_DECISION_LOG_FORMAT"


class DecisionStoreError(EosKafkaError):
    """The decision log's store failed a read or a write (a full disk, a permission, an
    object store's error): the batch fails here and loses nothing (docs/lifecycle.md)."""

    condition = "EOSKAFKA_DECISION_STORE_FAILED"


class CheckpointElsewhereError(EosKafkaError):
    """The decision log would not be where Spark's checkpoint is (docs/design.md invariant
    15): a path without a scheme that Spark resolved on Hadoop's default filesystem, or a
    prefix claim whose log is on another host's disk. Refused before anything is written."""

    condition = "EOSKAFKA_DECISION_LOG_ELSEWHERE"


class CheckpointUnreadableError(EosKafkaError):
    """Spark's checkpoint files (``metadata``, ``offsets/N``) cannot be read, so a replay
    cannot be told from another batch (invariant 13): refused, never guessed."""

    condition = "EOSKAFKA_CHECKPOINT_UNREADABLE"


class PreviousWriteCompletedError(EosKafkaError):
    """A batch write found an earlier write, interrupted after its commit decision, and
    finished it: the write the user is starting may be its rerun (said once)."""

    condition = "EOSKAFKA_PREVIOUS_WRITE_COMPLETED"


class ReplayMismatchError(EosKafkaError):
    """A batch id came back with another input than its recorded decision: not a replay
    (a rewound checkpoint, a changed source; docs/design.md invariant 13). Refused before
    anything is aborted: skipping it would lose its rows, writing it could duplicate them."""

    condition = "EOSKAFKA_REPLAY_MISMATCH"


class WriteCommittedError(EosKafkaError):
    """A batch write failed after its commit decision and eoskafka finished it: every row
    is committed, although Spark reports the write as failed. Do not rerun it."""

    condition = "EOSKAFKA_WRITE_COMMITTED"


class IdPrefixClashError(EosKafkaError):
    """Two queries would share one transactional-id prefix."""

    condition = "EOSKAFKA_TRANSACTIONAL_ID_CLASH"


class SchemaRegistryError(EosKafkaError):
    """The schema registry could not be reached, refused the sign-in, or gave an answer
    eoskafka cannot use; the message names the URL and the registry's own error."""

    condition = "EOSKAFKA_SCHEMA_REGISTRY"


class SchemaNotFoundError(SchemaRegistryError):
    """The registry holds no schema with that id, no such subject, or no such version."""

    condition = "EOSKAFKA_SCHEMA_NOT_FOUND"


class SchemaIncompatibleError(EosKafkaError):
    """The registry refused a schema under the subject's compatibility level; ``reasons``
    are the registry's own words."""

    condition = "EOSKAFKA_SCHEMA_INCOMPATIBLE"

    def __init__(self, message: str, reasons: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.reasons = reasons


class TimeoutError_(EosKafkaError):
    """An operation did not finish within its deadline."""

    condition = "EOSKAFKA_TIMEOUT"


class PayloadDecodeError(EosKafkaError):
    """A schema'd payload (Avro, Protobuf, JSON Schema) did not decode in FAILFAST mode."""

    condition = "EOSKAFKA_MALFORMED_PAYLOAD"


class PayloadEncodeError(EosKafkaError, ValueError):
    """A row does not fit the schema its column is written with."""

    condition = "EOSKAFKA_PAYLOAD_DOES_NOT_FIT_SCHEMA"


class KafkaProtocolError(EosKafkaError):
    """A Kafka error code returned by a broker."""

    condition = "EOSKAFKA_KAFKA_ERROR"
    code: ClassVar[int] = -1
    name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    retriable: ClassVar[bool] = False

    def __init__(self, context: str) -> None:
        super().__init__(f"Kafka error {self.code} {self.name} on {context}")
        self.context = context


class NotAuthorizedError(KafkaProtocolError):
    """The broker's authorizer refused a request (``kafka_codes.AUTHORIZATION``).

    Never retried. The message's first line names the resource, the operation and the
    ``kafka-acls.sh`` line that grants it (:mod:`eos_kafka_source.acls`); ``resource``
    is (kind, name) when the caller knows it better than its context string says.
    """

    condition = "EOSKAFKA_NOT_AUTHORIZED"

    def __init__(self, context: str, resource: tuple[str, str] | None = None) -> None:
        from .acls import refusal

        self.refusal = refusal(self.code, context, resource)
        EosKafkaError.__init__(self, self.refusal.message(self.code, self.name, context))
        self.context = context


_BY_CODE: dict[int, type[KafkaProtocolError]] = {}


def _define(code: Code) -> type[KafkaProtocolError]:
    cls_name = "".join(part.title() for part in code.name.split("_")) + "Error"
    attrs = {"code": int(code), "name": code.name, "retriable": code in RETRIABLE}
    base = NotAuthorizedError if code in AUTHORIZATION else KafkaProtocolError
    cls = type(cls_name, (base,), attrs)
    _BY_CODE[code] = cls
    # Never over a class of ours of the same name (InvalidTimestampError: the sink's
    # EOSKAFKA_INVALID_TIMESTAMP, not this module's code-32 class).
    globals().setdefault(cls_name, cls)
    return cls


# One class per code eoskafka meets on the data and transaction paths (kafka_codes.py).
for _code in Code:
    if _code is not Code.NONE:
        _define(_code)


def for_code(code: int) -> type[KafkaProtocolError]:
    """The exception class for a Kafka error code (a generic one for unknown codes)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        cls = type(
            f"KafkaError{code}",
            (KafkaProtocolError,),
            {"code": code, "name": f"ERROR_{code}", "retriable": False},
        )
    return cls


def raise_for_code(code: int, context: str) -> None:
    """Raise the mapped exception when ``code`` is not 0 (NONE)."""
    if code:
        raise for_code(code)(context)
