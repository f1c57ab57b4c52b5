"""What the log says about a handed-off transaction: its outcome, and its records.

"Lost" is a fact read from the log, not a guess from an error code (invariant 9).
PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING, INVALID_TXN_STATE or a dropped connection
say that an EndTxn failed, not that the transaction did not commit: an earlier attempt
whose answer was lost, an operator's fence after the commit, or an id that expired
after it all end that way. The transaction's partitions hold the truth: from the
offset of its first record (the hand-off's ``first_offsets``), the first control batch
of its producer id is its marker: COMMIT or ABORT. No marker up to the high watermark
yet: UNKNOWN (still open, or the coordinator has not written it yet).

The same scan gives the transaction's records, compared when a replay's transaction
would replace a lost one (invariant 10: the same rows, not the same counts).
Runs on: the driver (commit worker, planning worker's roll-forward).
"""

from __future__ import annotations

import enum
import hashlib
import time
from collections import Counter
from dataclasses import dataclass

from kafka.record import MemoryRecords

from ..errors import DataLossError, EosKafkaError
from ..records import control_is_commit
from ..wire import KafkaWire, LogCursor, fetch_bounds
from ..wire.cluster import fresh_leaders
from .handoff import TxnHandoff

#: A record as compared between transactions: (topic, key, value, headers).
Record = tuple[str, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]
_MARKER_WAIT_S = (0.05, 1.0)  # markers land a moment after EndTxn answers (Kafka)


class LogOutcome(enum.Enum):
    COMMITTED = "committed"
    ABORTED = "aborted"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class TxnInLog:
    outcome: LogOutcome
    #: Why, in words (for error messages and logs).
    why: str
    #: The transaction's records, when asked for and every partition could be read.
    records: Counter[Record] | None = None

    def digest(self) -> str:
        """Order-independent digest of the records ("" when they were not read)."""
        if self.records is None:
            return ""
        h = hashlib.sha256()
        for record, count in sorted(self.records.items(), key=repr):
            h.update(repr((record, count)).encode())
        return h.hexdigest()[:32]


def read_transaction(wire: KafkaWire, handoff: TxnHandoff, *, records: bool = False,
                     deadline_s: float = 30.0, wait: bool = True) -> TxnInLog:
    """The outcome (and with ``records``, the records) of ``handoff``'s transaction.

    Waits (``wait``) up to ``deadline_s`` for markers still being written; returns UNKNOWN
    when a
    partition has no marker of the producer by then, or cannot be read from the
    transaction's first record (no ``first_offsets``: an older eoskafka's hand-off;
    retention deleted it)."""
    if not handoff.open:
        return TxnInLog(LogOutcome.COMMITTED, "no transaction: nothing to end",
                        Counter() if records else None)
    firsts = {(t, p): o for t, p, o in handoff.first_offsets}
    missing = [(t, p) for t, p, _ in handoff.partitions if (t, p) not in firsts]
    if missing:
        return TxnInLog(LogOutcome.UNKNOWN, "the hand-off does not say where its records are "
                        f"in {missing} (written by an older eoskafka?)")
    deadline = time.monotonic() + deadline_s
    pause = _MARKER_WAIT_S[0]
    while True:
        found = _scan(wire, handoff, firsts, records, deadline)
        if (found.outcome is not LogOutcome.UNKNOWN or not wait
                or time.monotonic() >= deadline):
            return found
        time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
        pause = min(pause * 2, _MARKER_WAIT_S[1])


def _scan(wire: KafkaWire, handoff: TxnHandoff, firsts: dict[tuple[str, int], int],
          want_records: bool, deadline: float) -> TxnInLog:
    topics = sorted({t for t, _ in firsts})
    info = fresh_leaders(wire, topics, deadline=max(deadline - time.monotonic(), 1.0))
    leaders = {tp: info[tp[0]].leaders[tp[1]] for tp in firsts}
    bounds = fetch_bounds(wire, leaders, dict(firsts))
    kinds: dict[tuple[str, int], bool | None] = {}
    found: Counter[Record] = Counter()
    for tp, first in sorted(firsts.items()):
        b = bounds[tp]
        if b.log_start > first:
            return TxnInLog(LogOutcome.UNKNOWN, f"{tp[0]}-{tp[1]}: the transaction's records "
                            f"(from offset {first}) were deleted (log start {b.log_start})")
        kinds[tp] = None
        cursor = LogCursor(wire, leaders[tp], tp, first, b.high_watermark, read_ahead=False,
                           deadline_s=max(deadline - time.monotonic(), 1.0))
        try:
            for header, view in cursor:
                if header.producer_id != handoff.producer_id:
                    continue
                if header.is_control:
                    kinds[tp] = control_is_commit(view)
                    break
                if want_records:
                    found.update(_records(tp[0], view))
        except (DataLossError, EosKafkaError) as exc:
            return TxnInLog(LogOutcome.UNKNOWN, f"{tp[0]}-{tp[1]}: could not read the log: {exc}")
    seen = set(kinds.values())
    if seen == {True}:
        return TxnInLog(LogOutcome.COMMITTED, "COMMIT markers in every partition",
                        found if want_records else None)
    if seen == {False}:
        return TxnInLog(LogOutcome.ABORTED, "ABORT markers in every partition",
                        found if want_records else None)
    if True in seen and False in seen:
        raise AssertionError(  # Kafka writes one outcome to every partition of a transaction
            f"{handoff.describe()}: COMMIT and ABORT markers both found: {kinds}")
    pending = sorted(f"{t}-{p}" for (t, p), k in kinds.items() if k is None)
    return TxnInLog(LogOutcome.UNKNOWN, f"no marker yet in {', '.join(pending)}",
                    found if want_records else None)


def _records(topic: str, view: memoryview) -> list[Record]:
    out: list[Record] = []
    for batch in MemoryRecords(bytes(view)):
        for r in batch:
            out.append((topic, r.key, r.value, tuple((k, v) for k, v in r.headers)))
    return out
