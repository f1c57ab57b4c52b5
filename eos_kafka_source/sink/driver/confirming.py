"""Every decided transaction's COMMIT is confirmed from the log (docs/design.md, invariant 9).

EndTxn's NONE is not proof: Kafka's ``kafka-transactions.sh abort`` writes an ABORT marker
straight to one partition while the coordinator still holds the transaction Ongoing, and
the commit that follows answers NONE and misses that partition. So after every EndTxn
round, live commits and roll-forwards alike, each answered transaction's partitions are
asked for their outcome: COMMIT everywhere stays **done**; an ABORT moves it to **lost**
(its records are copied back from the log by recovery before the commit returns); no
marker yet by the deadline, or a log that cannot be read now, moves it to **unknown** (the
decision is kept).

On Kafka one small read_committed Fetch per partition and first offset tells, without
reading the records (``wire/txn_outcome.py``). Where the broker keeps no aborted-transaction
index (Tansu), for a partition whose Fetch failed, and for a marker still missing while
its partition's log stood still for :data:`FAST_WAIT_S` (a hanging transaction,
txn_log.py), its markers are read instead
(:mod:`.txn_log`). Partitions whose records and marker were deleted once the transaction
was over, and hand-offs that do not say where their records are, keep NONE's word: there
is nothing left to read or to copy.
Runs on: the driver (commit worker, planning worker's roll-forward, recovery).
"""

from __future__ import annotations

import logging
import time

from ...errors import EosKafkaError, NotAuthorizedError, TransactionOutcomeUnknownError
from ...wire import KafkaWire, TopicPartition
from ...wire.cluster import fresh_leaders
from ...wire.txn_outcome import Place, lists_aborted_transactions, txn_outcomes
from ..handoff import TxnHandoff
from .committer import FinishReport
from .txn_log import LogOutcome, read_log

log = logging.getLogger(__name__)

#: Seconds the Fetch path waits on a partition whose log does not move before the marker
#: scan takes over there.
FAST_WAIT_S = 2.0


def confirm(wire: KafkaWire, report: FinishReport, *, deadline_s: float) -> None:
    """Move each of ``report.done`` whose log does not show COMMIT everywhere to lost or
    unknown (module docstring)."""
    deadline = time.monotonic() + deadline_s
    # Each hand-off's places, worked out once (a batch of 1,000 tasks over 8 partitions
    # has 8,000 of them).
    placed = [(h, _places(h) if h.open else None) for h in report.done]
    asked = [p for h, places in placed if places is not None for p in places]
    # Markers land a while after EndTxn answers; one still missing while its partition's
    # log stood still for FAST_WAIT_S is left to the marker scan, which also looks for a
    # hanging transaction (txn_log.py).
    fast = _ask_kafka(wire, asked, deadline) if asked else {}
    done: list[TxnHandoff] = []
    for handoff, places in placed:
        if not handoff.open:
            done.append(handoff)
            continue
        found = [(p, fast.get(p)) for p in places or ()]
        if places is not None and all(commit is not None for _, commit in found):
            verdict = _verdict(report, handoff, found)
        else:
            verdict = _from_markers(wire, report, handoff, deadline)
        if verdict:
            done.append(handoff)
    report.done = done


def _places(handoff: TxnHandoff) -> list[Place] | None:
    """Where the transaction starts in each partition; None when the hand-off cannot say."""
    firsts = {(t, p): o for t, p, o in handoff.first_offsets}
    try:
        return [Place(t, p, firsts[(t, p)], handoff.producer_id)
                for t, p, _ in handoff.partitions]
    except KeyError:
        return None


def _ask_kafka(wire: KafkaWire, places: list[Place],
               deadline: float) -> dict[Place, bool | None]:
    """The outcomes Kafka's aborted-transaction index gives for ``places``; {} where the
    broker keeps none or the round failed (the markers are read instead)."""
    try:
        if not lists_aborted_transactions(wire):
            return {}
        return txn_outcomes(wire, _leaders(wire, places, deadline), places, deadline=deadline,
                            stall_s=FAST_WAIT_S)
    except NotAuthorizedError:
        raise  # a missing READ ACL on the output topic is named (docs/acls.md)
    except EosKafkaError as exc:
        log.info("eoskafka: confirming the commits of %d place(s) from Kafka's "
                 "aborted-transaction index failed (%s); reading their markers", len(places),
                 exc)
        wire.close()
        return {}


def _leaders(wire: KafkaWire, places: list[Place], deadline: float) -> dict[TopicPartition, int]:
    """Each partition's leader: as this worker last saw it (wire/known.py; a moved leader
    answers with an error and its partition's markers are read), or from Metadata."""
    out: dict[TopicPartition, int] = {}
    for topic in sorted({p.topic for p in places}):
        info = wire.known_topic(topic)
        parts = {p.partition for p in places if p.topic == topic}
        if info is None or any(info.leaders.get(n, -1) < 0 for n in parts):
            info = fresh_leaders(wire, [topic], deadline=max(deadline - time.monotonic(), 1.0))[
                topic]
        out.update({(topic, n): info.leaders[n] for n in parts})
    return out


def _verdict(report: FinishReport, handoff: TxnHandoff,
             found: list[tuple[Place, bool | None]]) -> bool:
    """Sort one transaction by its partitions' markers (all known); True when it stays
    done."""
    aborted = [f"{p.topic}-{p.partition}" for p, commit in found if commit is False]
    if aborted:
        _lost(report, handoff, "EndTxn answered NONE, but the log: ABORT marker in "
              f"{', '.join(aborted)} (an operator's abort of those partitions?)",
              partly=len(aborted) < len(found))
        return False
    return True


def _lost(report: FinishReport, handoff: TxnHandoff, why: str, *, partly: bool) -> None:
    """An ABORT found for a transaction EndTxn said committed: lost, and, when the other
    partitions committed, partly committed (its decision is never withdrawn)."""
    report.lost.append((handoff, why))
    if partly:
        report.partly_committed.add(handoff.transactional_id)


def _from_markers(wire: KafkaWire, report: FinishReport, handoff: TxnHandoff,
                  deadline: float) -> bool:
    """The marker scan (Tansu, a failed Fetch, a marker still missing, an older hand-off);
    True when it stays done. A log that cannot be read now is read again
    (:func:`.txn_log.read_log`)."""
    try:
        found = read_log(wire, handoff, deadline_s=max(deadline - time.monotonic(), 1.0))
    except TransactionOutcomeUnknownError as exc:
        report.unknown.append((handoff, f"EndTxn answered NONE; {exc}"))
        return False
    said = f"EndTxn answered NONE, but the log: {found.why}"
    if found.aborted:
        _lost(report, handoff, said, partly=len(found.aborted) < len(found.partitions))
        return False
    if found.pending:
        report.unknown.append((handoff, said))
        return False
    if found.outcome is not LogOutcome.COMMITTED:
        log.warning("eoskafka: %s: taking EndTxn's NONE as committed; the log cannot tell: %s",
                    handoff.transactional_id, found.why)
    return True
