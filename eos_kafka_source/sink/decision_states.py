"""The states of one batch's commit decision, and the only transitions allowed between them.

A decision is keyed by (lineage, batch id): the lineage is Spark's query id for a streaming
write (stable across restarts, new after a checkpoint reset) or the write id of a batch
write, so a batch id reused by a new query is never taken for a replay (invariant 8).

What each file under ``decisions/<lineage>/`` means, and who writes it (all on the driver):

==========================  ==========  =====================================================
file                        state       written by
==========================  ==========  =====================================================
``<batch>.json``            DECIDED     ``commit()``, before the first EndTxn (created only if
                                        absent: two drivers cannot both decide a batch)
``<batch>.done`` lost=[]    DONE        ``commit()`` / roll-forward, after the last EndTxn
``<batch>.done`` with       LOST        the same, when the log shows some decided
``lost_handoffs``                       transactions aborted; the replay may rewrite them
``<batch>.done`` with only  DONE        a loss reported once and final (no replay matched)
``lost``
``<batch>.recovery``        RECOVERING  a replay's ``commit()``: its transactions chosen to
                                        replace the lost ones, before their EndTxn
(no file)                   VOID        ``commit()`` when the log shows that none of the
                                        decided transactions committed: the batch replays
==========================  ==========  =====================================================

DECIDED covers "committing": EndTxns may be in flight or interrupted; only the log (or a
retried EndTxn answering NONE) tells which committed. Nothing but these transitions may
change a decision; :func:`transition` refuses the rest, so a bug shows as an error naming
the state and the event, not as a silently rewritten decision.
"""

from __future__ import annotations

import enum


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
    SOME_ABORTED = "some aborted"  # the log shows some aborted, the rest committed
    NONE_COMMITTED = "none committed"  # the log shows every decided transaction aborted
    UNKNOWN = "unknown"  # some outcome still unknown: keep the state, fail the batch
    REPLACEMENT = "replacement recorded"  # a replay's same-digest transactions chosen
    NO_REPLACEMENT = "no replacement"  # the replay did not write the same rows: loss final
    REWRITTEN = "rewritten"  # the recovery transactions committed (lost ones still listed)
    REPLAYED = "replayed"  # the batch ran again; its new transactions are aborted
    PRUNED = "pruned"  # an old finished decision removed


#: (state, event) -> next state. Anything missing is a bug, refused by :func:`transition`.
TRANSITIONS: dict[tuple[State, Event], State] = {
    (State.NEW, Event.DECIDE): State.DECIDED,
    (State.DECIDED, Event.ALL_COMMITTED): State.DONE,
    (State.DECIDED, Event.SOME_ABORTED): State.LOST,
    (State.DECIDED, Event.NONE_COMMITTED): State.VOID,
    (State.DECIDED, Event.UNKNOWN): State.DECIDED,
    (State.DECIDED, Event.REPLAYED): State.DECIDED,  # rolled forward first, then replayed
    (State.LOST, Event.REPLACEMENT): State.RECOVERING,
    (State.LOST, Event.NO_REPLACEMENT): State.DONE,
    (State.LOST, Event.REPLAYED): State.LOST,
    (State.RECOVERING, Event.REWRITTEN): State.DONE,
    (State.RECOVERING, Event.UNKNOWN): State.RECOVERING,
    (State.RECOVERING, Event.REPLAYED): State.RECOVERING,
    (State.DONE, Event.REPLAYED): State.DONE,
    (State.DONE, Event.PRUNED): State.VOID,
    (State.VOID, Event.DECIDE): State.DECIDED,  # a withdrawn batch replays as a new one
}

#: States whose decided (or recovery) transactions must still be committed before any task
#: re-initialises their ids: prepare() and abort() roll them forward (invariant 2).
UNFINISHED = frozenset({State.DECIDED, State.RECOVERING})


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


def commit_event(committed: int, aborted: int, unknown: int) -> Event:
    """The event for finishing a DECIDED batch's transactions, from their outcomes."""
    if unknown:
        return Event.UNKNOWN
    if aborted and not committed:
        return Event.NONE_COMMITTED
    if aborted:
        return Event.SOME_ABORTED
    return Event.ALL_COMMITTED
