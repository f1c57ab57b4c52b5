"""The states of one batch's commit decision, and the only transitions allowed between them.

A decision is keyed by (lineage, batch id): the lineage is Spark's query id for a streaming
write (stable across restarts, new after a checkpoint reset) or the write id of a batch
write, so a batch id reused by a new query is never taken for a replay (invariant 8).

What each file under ``decisions/<lineage>/`` means, and who writes it (all on the driver);
a decision read from its files is in the state the events they record
(:func:`recorded_events`) reach through :data:`TRANSITIONS` (:func:`state_after`):

==========================  ==========  =====================================================
file                        state       written by
==========================  ==========  =====================================================
``<batch>.json``            DECIDED     ``commit()``, before the first EndTxn (created only if
                                        absent: two drivers cannot both decide a batch)
``<batch>.recovery``        RECOVERING  whoever finds decided transactions aborted (``commit()``
beside ``.json``                        or a roll-forward): the recovery transactions that
                                        copy their records from the log, each appended
                                        before its EndTxn
``<batch>.done`` lost=[]    DONE        ``commit()`` / roll-forward, after the last EndTxn
``<batch>.done`` with       DONE        the same, when the log no longer held some aborted
``lost``                                records (retention, compaction): reported once, final
``<batch>.done`` with       LOST        a development build before 0.1.0 (a replay was to rewrite
``lost_handoffs``                       them); now copied from the log when the batch replays
(no file)                   VOID        ``commit()`` when the log shows that none of the
                                        decided transactions committed: the batch replays
==========================  ==========  =====================================================

DECIDED covers "committing": EndTxns may be in flight or interrupted; only the log (or a
retried EndTxn answering NONE, confirmed by the log's markers after a crash) tells which
committed. LOST lives in memory between reading that some decided transactions were aborted
and recording their copy: a crash there leaves DECIDED, and the next run reads the same log
again. RECOVERING stays RECOVERING while its copy goes on (RECOVERY_PARTIAL): a partition
a recovery transaction committed is never copied again, only what is still missing
(invariant 16). Recovery copies from the log, never from a replay (invariant 10):
a replay's own transactions for a decided batch are always aborted. Nothing but these
transitions may change a decision; :func:`transition` refuses the rest, so a bug shows as an
error naming the state and the event, not as a silently rewritten decision.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class State(enum.Enum):
    NEW = "new"  # no decision recorded for this (lineage, batch id)
    DECIDED = "decided"
    DONE = "done"
    LOST = "lost"
    RECOVERING = "recovering"
    VOID = "void"


class Event(enum.Enum):
    DECIDE = "decide"  # the decision is recorded (before any EndTxn)
    ALL_COMMITTED = "all committed"  # every decided transaction committed (answer or log)
    SOME_ABORTED = "some aborted"  # the log shows some (or some partitions) aborted, not all
    NONE_COMMITTED = "none committed"  # the log shows every decided transaction aborted
    UNKNOWN = "unknown"  # some outcome (or the log) still unknown: keep the state, fail
    COPIED = "copied"  # the aborted records, read from the log, written and recorded
    UNRECOVERABLE = "unrecoverable"  # nothing left to copy: what the log lost is final
    RECOVERY_COMMITTED = "recovery committed"  # every copied partition committed
    #: Some of the copy is not committed yet (a bounded copy's next part, or partitions of
    #: a recovery transaction that Kafka aborted): only that is written, in the next
    #: recovery transaction, appended to the record before its EndTxn.
    RECOVERY_PARTIAL = "recovery partial"
    RECOVERY_LOST = "recovery lost"  # a pre-0.1.0 build's replay recovery fell short
    REPLAYED = "replayed"  # the batch ran again; its new transactions are aborted
    PRUNED = "pruned"  # an old finished decision removed


#: (state, event) -> next state. Anything missing is a bug, refused by :func:`transition`.
TRANSITIONS: dict[tuple[State, Event], State] = {
    (State.NEW, Event.DECIDE): State.DECIDED,
    (State.DECIDED, Event.ALL_COMMITTED): State.DONE,
    (State.DECIDED, Event.SOME_ABORTED): State.LOST,
    (State.DECIDED, Event.NONE_COMMITTED): State.VOID,
    (State.DECIDED, Event.UNKNOWN): State.DECIDED,
    (State.LOST, Event.COPIED): State.RECOVERING,
    (State.LOST, Event.UNRECOVERABLE): State.DONE,
    (State.LOST, Event.UNKNOWN): State.LOST,  # the log could not be read now: retry later
    (State.RECOVERING, Event.RECOVERY_COMMITTED): State.DONE,
    (State.RECOVERING, Event.RECOVERY_PARTIAL): State.RECOVERING,
    (State.RECOVERING, Event.RECOVERY_LOST): State.LOST,
    (State.RECOVERING, Event.UNKNOWN): State.RECOVERING,
    (State.DONE, Event.REPLAYED): State.DONE,
    (State.DONE, Event.PRUNED): State.VOID,
    (State.VOID, Event.DECIDE): State.DECIDED,  # a withdrawn batch replays as a new one
}

#: States whose decided (or recovery) transactions must still be committed, or whose aborted
#: records copied, before the batch counts as written: prepare() rolls them forward before
#: any task starts (invariant 2), and abort() and a replay's commit() before anything else.
UNFINISHED = frozenset({State.DECIDED, State.LOST, State.RECOVERING})


@dataclass(frozen=True)
class Finished:
    """Where finishing a decision left it, and what the log could no longer give back
    (descriptions naming transactions, partitions and counts: lost for good)."""

    state: State
    lost: list[str] = field(default_factory=list)


class InvalidTransition(RuntimeError):
    """A decision was asked to change in a way the state machine does not allow (a bug)."""


def transition(state: State, event: Event) -> State:
    """The state after ``event``; raises :class:`InvalidTransition` if it is not allowed."""
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise InvalidTransition(
            f"a decision in state {state.value!r} cannot take event {event.value!r}"
        ) from None


def recorded_events(*, done: bool, lost: bool = False, lost_handoffs: bool = False,
                    recovery: bool = False) -> tuple[Event, ...]:
    """The events a decision's files record, in order (the table above): ``<batch>.json``
    its DECIDE; a ``.recovery`` SOME_ABORTED then COPIED, whatever ``.done`` lies beside it
    (a crash between marking it done and clearing the recovery record: the copy is finished
    again, once per partition); a ``.done`` ALL_COMMITTED, with ``lost`` SOME_ABORTED and
    UNRECOVERABLE, with ``lost_handoffs`` (a development build before 0.1.0) SOME_ABORTED
    alone."""
    if recovery:
        return Event.DECIDE, Event.SOME_ABORTED, Event.COPIED
    if not done:
        return (Event.DECIDE,)
    if lost_handoffs:
        return Event.DECIDE, Event.SOME_ABORTED
    if lost:
        return Event.DECIDE, Event.SOME_ABORTED, Event.UNRECOVERABLE
    return Event.DECIDE, Event.ALL_COMMITTED


def state_after(events: tuple[Event, ...], state: State = State.NEW) -> State:
    """Where ``events`` take a decision, through :data:`TRANSITIONS` (one not allowed
    raises): a decision read from its files is in the state its recorded events reach."""
    for event in events:
        state = transition(state, event)
    return state


def commit_event(committed: int, aborted: int, unknown: int) -> Event:
    """The event for finishing a DECIDED batch's transactions, from their outcomes."""
    if unknown:
        return Event.UNKNOWN
    if aborted and not committed:
        return Event.NONE_COMMITTED
    if aborted:
        return Event.SOME_ABORTED
    return Event.ALL_COMMITTED
