"""Finishes hand-offs: EndTxn commit or abort for many transactions, sorted by outcome.

Like Kafka's own producer (``TransactionManager.EndTxnHandler``), it keeps "unknown"
apart from "failed":

- **done**: the coordinator answered NONE. Nothing else means committed.
- **refused** (``Action.REFUSED``, ``kafka_codes.py``): PRODUCER_FENCED
  (INVALID_PRODUCER_EPOCH below v2), INVALID_PRODUCER_ID_MAPPING, INVALID_TXN_STATE, and a
  broker that keeps closing the connection on one EndTxn while it answers other requests at
  once (Tansu's answer to a stale epoch). These say the request failed, not that the
  transaction did not commit: the id may have been fenced by an operator, or expired,
  after a commit whose answer was lost. For a commit, the transaction's partitions are
  read (:mod:`.txn_log`): a COMMIT marker of its producer makes it **done**, an ABORT
  marker **lost**, no marker yet keeps it **unknown** (invariant 9).
- **unknown** (``Action.REFIND`` and ``Action.RETRY``): NOT_COORDINATOR,
  COORDINATOR_NOT_AVAILABLE (both can come back after PrepareCommit reached the log: a new
  coordinator then completes the commit), COORDINATOR_LOAD_IN_PROGRESS,
  CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION, a dropped connection, a timeout, no
  coordinator found: look the coordinator up again and retry until the outcome is known or
  ``deadline_s`` passes. Whatever is still unknown then is reported as such, never as lost:
  the caller keeps the decision. An answer no retry helps (``Action.FATAL``, such as
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED, or ``Action.UNKNOWN``, a code Kafka's producer
  does not handle either) ends the retries: what is still open is reported unknown.

A transaction whose partitions disagree (ABORT in some, COMMIT in the others: an operator's
``kafka-transactions.sh abort`` of one partition) is **lost** and noted in ``partly_committed``:
its batch committed something, so its decision is never withdrawn. NONE itself is then
checked against the log (:mod:`.confirming`): that operator's abort leaves the coordinator
committing a transaction one of whose partitions already holds an ABORT marker.

Runs on: the driver (commit/abort workers and the planning worker's recovery).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from ...errors import (
    BrokerUnreachableError,
    ConnectionDroppedError,
    KafkaProtocolError,
    TimeoutError_,
    TransactionOutcomeUnknownError,
)
from ...faults import fault_point
from ...kafka_codes import Action, classify
from ...wire import KafkaWire, ProducerIdentity, end_txns, find_coordinators, verify_txns
from ...wire.retry import Deadline
from ...wire.txn import EndTxnOutcome, coordinator_answers
from ..handoff import TxnHandoff
from .txn_log import LogOutcome, read_log

log = logging.getLogger(__name__)

#: Errors of a whole round (finding coordinators, connecting) that say nothing of outcomes.
_ROUND_ERRORS = (BrokerUnreachableError, ConnectionDroppedError, TimeoutError_,
                 KafkaProtocolError)
#: Times a reachable coordinator may close the connection on one EndTxn before it counts
#: as a rejection (Tansu drops the connection for a stale epoch instead of answering).
_REJECTING_DROPS = 2


@dataclass
class FinishReport:
    done: list[TxnHandoff] = field(default_factory=list)
    #: Definitively not finished with the wanted outcome (fenced, expired, wrong state).
    lost: list[tuple[TxnHandoff, str]] = field(default_factory=list)
    #: Outcome unknown when the deadline passed: maybe committed, maybe not.
    unknown: list[tuple[TxnHandoff, str]] = field(default_factory=list)
    #: Transactional ids among ``lost`` that may have committed: an earlier attempt's outcome
    #: was unknown, or the log no longer holds its records and marker (LogOutcome.GONE).
    uncertain: set[str] = field(default_factory=set)
    #: Transactional ids among ``lost`` that committed in some of their partitions.
    partly_committed: set[str] = field(default_factory=set)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.lost and not self.unknown

    def describe_lost(self) -> list[str]:
        return [f"{h.describe()}: {reason}" for h, reason in self.lost]

    def describe_unknown(self) -> list[str]:
        return [f"{h.describe()}: {reason}" for h, reason in self.unknown]


def finish(wire: KafkaWire, handoffs: list[TxnHandoff], *, commit: bool,
           deadline_s: float = 60.0, coordinators: Mapping[str, int] | None = None
           ) -> FinishReport:
    """EndTxn(commit or abort) every open hand-off, retrying unknown outcomes to the deadline.

    Repeating an EndTxn with the same outcome is harmless (Kafka and Tansu accept it),
    which is what makes retries, roll-forward and double commit safe. ``coordinators``
    (found moments ago, by :func:`liveness`) saves the first lookup; a coordinator that
    moved since answers NOT_COORDINATOR, an unknown outcome, and is looked up again.
    """
    started = time.perf_counter()
    report = _finish(wire, [h for h in handoffs if h.open], commit, Deadline(deadline_s),
                     coordinators)
    report.seconds = time.perf_counter() - started
    return report


def _finish(wire: KafkaWire, pending: list[TxnHandoff], commit: bool,
            deadline: Deadline, known: Mapping[str, int] | None = None) -> FinishReport:
    report = FinishReport()
    unknown: dict[str, str] = {}  # tid -> why its last attempt's outcome is unknown
    drops: dict[str, int] = {}  # tid -> connections a reachable coordinator closed on it
    while pending:
        try:
            tids = [h.transactional_id for h in pending]
            if known is not None and all(t in known for t in tids):
                coordinators = {t: known[t] for t in tids}
            else:
                coordinators = find_coordinators(wire, tids)
            known = None  # later rounds follow a coordinator that moved
            if commit:
                fault_point("commit.before_endtxn")  # a test moves the coordinator here
        except _ROUND_ERRORS as exc:
            if isinstance(exc, KafkaProtocolError) and not exc.retriable:
                raise  # e.g. TRANSACTIONAL_ID_AUTHORIZATION_FAILED: nothing was sent
            wire.close()
            unknown.update({h.transactional_id: f"no coordinator: {exc}" for h in pending})
        else:
            txns = [(h.transactional_id, ProducerIdentity(h.producer_id, h.epoch))
                    for h in pending]
            outcomes = end_txns(wire, coordinators, txns, commit,
                                deadline_s=min(10.0, deadline.left()))
            retry = []
            for handoff, outcome in zip(pending, outcomes, strict=True):
                verdict = _sort(wire, outcome, drops)
                tid = handoff.transactional_id
                if verdict is Action.REFUSED and commit:
                    # The request was refused; whether the transaction committed is in the
                    # log (invariant 9): COMMIT is done, ABORT is lost, none yet unknown.
                    verdict, why = _from_log(wire, handoff, outcome, deadline, report)
                else:
                    why = str(outcome.error)
                if verdict is Action.DONE:
                    report.done.append(handoff)
                elif verdict is Action.REFUSED:
                    report.lost.append((handoff, why))
                else:
                    unknown[tid] = why
                    retry.append(handoff)
            if _gives_up(outcomes):
                report.unknown += [(h, unknown[h.transactional_id]) for h in retry]
                return report
            pending = retry
        if not pending:
            break
        if deadline.expired:
            report.unknown += [(h, unknown[h.transactional_id]) for h in pending]
            log.warning("eoskafka: gave up on %d EndTxn(s) whose outcome is unknown",
                        len(pending))
            break
        log.info("eoskafka: %d EndTxn outcome(s) unknown, looking up coordinators again: %s",
                 len(pending), "; ".join(sorted(set(unknown.values())))[:500])
        deadline.pause()
    return report


def _sort(wire: KafkaWire, outcome: EndTxnOutcome, drops: dict[str, int]) -> Action:
    """What one EndTxn answer asks for: DONE, REFUSED, or anything else: its outcome is
    unknown, ask again (module docstring)."""
    action = outcome.action
    if action in (Action.DONE, Action.REFUSED):
        return action
    if isinstance(outcome.error, ConnectionDroppedError):
        # Ask the broker again, do not assume: a coordinator that answers at once right
        # after closing the connection on this EndTxn closed it on purpose (Tansu's answer
        # to a stale epoch): refused, and the log tells what became of the transaction.
        tid = outcome.transactional_id
        if outcome.node >= 0 and coordinator_answers(wire, outcome.node, tid):
            drops[tid] = drops.get(tid, 0) + 1
            if drops[tid] >= _REJECTING_DROPS:
                return Action.REFUSED
    return action  # a moved coordinator, a timeout, an unexpected code


def _from_log(wire: KafkaWire, handoff: TxnHandoff, outcome: EndTxnOutcome,
              deadline: Deadline, report: FinishReport) -> tuple[Action, str]:
    """A refused commit's verdict, read from the transaction's partitions: DONE, REFUSED,
    or REFIND while no marker says (ask again). A log that cannot be read now is read
    again (:func:`.txn_log.read_log`), within this round's share of the deadline; still
    unreadable, the outcome stays unknown (REFIND), never lost."""
    try:
        found = read_log(wire, handoff, deadline_s=max(min(10.0, deadline.left()), 1.0))
    except TransactionOutcomeUnknownError as exc:
        return Action.REFIND, f"{outcome.error}; {exc}"
    said = f"{outcome.error}; the log: {found.why}"
    if found.outcome is LogOutcome.COMMITTED:
        log.warning("eoskafka: %s was refused but had committed (%s)",
                    handoff.transactional_id, said)
        return Action.DONE, said
    if found.outcome is LogOutcome.PARTIAL:
        report.partly_committed.add(handoff.transactional_id)
        return Action.REFUSED, said
    if found.outcome is LogOutcome.ABORTED:
        return Action.REFUSED, said
    if found.outcome is LogOutcome.GONE:
        # Over, and its records and marker deleted: it may have committed, so its decision
        # is never voided; the log's remaining aborted partitions are copied, the rest lost.
        report.uncertain.add(handoff.transactional_id)
        return Action.REFUSED, said
    return Action.REFIND, said


def _gives_up(outcomes: list[EndTxnOutcome]) -> bool:
    """Whether an answer makes retrying pointless (a fatal or unexpected code)."""
    return any(o.action in (Action.FATAL, Action.UNKNOWN) for o in outcomes)


def outcome_unknown(batch_id: int | None, report: FinishReport, doing: str, *,
                    streaming: bool = True) -> TransactionOutcomeUnknownError:
    """The error for a batch whose EndTxn outcomes stayed unknown: its decision is kept.
    ``streaming=False``: a batch write (never replayed; the next write finishes it)."""
    unknown = report.describe_unknown()
    if not streaming:
        return TransactionOutcomeUnknownError(
            f"the batch write: the outcome of {len(unknown)} EndTxn(s) is unknown after "
            f"{report.seconds:.0f} s of {doing} (their coordinator moved or could not be "
            "reached, or the log could not be read). Its rows may be committed: the decision "
            "is kept, and the next batch write with the same decisionLogLocation finishes it "
            "first and says so (EOSKAFKA_PREVIOUS_WRITE_COMPLETED). Do not rerun this write "
            "before that: it could write every row twice. Check the brokers hosting "
            "__transaction_state. " + "; ".join(unknown))
    return TransactionOutcomeUnknownError(
        f"batch {batch_id}: the outcome of {len(unknown)} EndTxn(s) is unknown after "
        f"{report.seconds:.0f} s of {doing} (their coordinator moved or could not be "
        "reached, or the log could not be read); the decision is kept and the batch fails: "
        "the restarted query rolls it forward before any task starts, committing each "
        "transaction once. Check the brokers hosting __transaction_state. "
        + "; ".join(unknown)
    )


@dataclass(frozen=True)
class Liveness:
    """What :func:`liveness` found."""

    #: The open hand-offs whose transaction can no longer be committed, and why.
    dead: list[tuple[TxnHandoff, str]]
    #: Where each transaction's coordinator answered (for :func:`finish` right after).
    coordinators: dict[str, int]
    #: Seconds spent looking coordinators up, and checking the transactions (benchmarks).
    lookup_s: float = 0.0
    check_s: float = 0.0


def liveness(wire: KafkaWire, handoffs: list[TxnHandoff], *,
             deadline_s: float = 60.0) -> Liveness:
    """Which open hand-offs' transactions can no longer be committed, and why.

    Checked before the decision, so a transaction fenced between its task's hand-off and
    the commit (a zombie or a retried attempt re-initialised its id, or it timed out) fails
    the whole batch, nothing committed, instead of a partial commit that loses that task's
    records. A coordinator that moved is looked up again; one that cannot be reached
    before ``deadline_s`` raises (nothing is decided yet, the batch fails and replays).
    """
    pending = [h for h in handoffs if h.open]
    dead: list[tuple[TxnHandoff, str]] = []
    found: dict[str, int] = {}
    deadline = Deadline(deadline_s)
    lookup_s = check_s = 0.0
    kept = _kept_coordinators(wire, [h.transactional_id for h in pending])
    while pending:
        try:
            started = time.perf_counter()
            coordinators = kept or find_coordinators(wire, [h.transactional_id for h in pending])
            kept = None  # a later round looks up the ones that moved
            looked_up = time.perf_counter()
            lookup_s += looked_up - started
            checks = [(h.transactional_id, ProducerIdentity(h.producer_id, h.epoch),
                       [(t, p) for t, p, _ in h.partitions]) for h in pending]
            errors = verify_txns(wire, coordinators, checks)
            check_s += time.perf_counter() - looked_up
        except _ROUND_ERRORS as exc:
            if (isinstance(exc, KafkaProtocolError) and not exc.retriable) or (
                    deadline.expired):
                raise
            wire.close()
            errors = [None] * len(pending)
            moved = list(pending)
        else:
            moved = []
            for h, e in zip(pending, errors, strict=True):
                if e is not None and classify(e.code) in (Action.REFIND, Action.RETRY):
                    moved.append(h)
                elif e is not None:
                    dead.append((h, str(e)))
                else:
                    found[h.transactional_id] = coordinators[h.transactional_id]
        if moved and not deadline.pause():
            raise TimeoutError_(
                f"could not check {len(moved)} transaction(s) before deciding: their "
                "coordinator kept moving or was unreachable; nothing was committed")
        pending = moved
    return Liveness(dead, found, lookup_s, check_s)


def _kept_coordinators(wire: KafkaWire, tids: list[str]) -> dict[str, int] | None:
    """The coordinators the previous batch's check found for every one of ``tids``, or None
    (wire/known.py). A coordinator that moved since answers NOT_COORDINATOR: the check looks
    it up again, as after a fresh lookup."""
    kept: dict[str, int] = {}
    for tid in tids:
        node = wire.known_coordinator(tid)
        if node is None:
            return None
        kept[tid] = node
    return kept
