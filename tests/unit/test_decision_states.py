"""The decision state machine, by tables (sink/decisions/states.py)."""

from __future__ import annotations

import pytest

from eos_kafka_source.sink.decisions.states import (
    TRANSITIONS,
    UNFINISHED,
    Event,
    InvalidTransition,
    State,
    commit_event,
    recorded_events,
    state_after,
    transition,
)

S, E = State, Event

ALLOWED = [
    (S.NEW, E.DECIDE, S.DECIDED),
    (S.DECIDED, E.ALL_COMMITTED, S.DONE),
    (S.DECIDED, E.SOME_ABORTED, S.LOST),
    (S.DECIDED, E.NONE_COMMITTED, S.VOID),
    (S.DECIDED, E.UNKNOWN, S.DECIDED),
    (S.LOST, E.COPIED, S.RECOVERING),
    (S.LOST, E.UNRECOVERABLE, S.DONE),
    (S.LOST, E.UNKNOWN, S.LOST),  # the log could not be read: not a final loss
    (S.RECOVERING, E.RECOVERY_COMMITTED, S.DONE),
    (S.RECOVERING, E.RECOVERY_PARTIAL, S.RECOVERING),  # only the missing part, appended
    (S.RECOVERING, E.RECOVERY_LOST, S.LOST),  # a pre-0.1.0 build's replay recovery fell short
    (S.RECOVERING, E.UNKNOWN, S.RECOVERING),
    (S.DONE, E.REPLAYED, S.DONE),
    (S.DONE, E.PRUNED, S.VOID),
    (S.VOID, E.DECIDE, S.DECIDED),
]

REFUSED = [
    (S.DONE, E.DECIDE),  # a decided batch is never decided again: a replay is aborted
    (S.DONE, E.ALL_COMMITTED),
    (S.DONE, E.NONE_COMMITTED),  # a done batch is never voided (rows would be written twice)
    (S.LOST, E.NONE_COMMITTED),
    (S.LOST, E.PRUNED),  # a loss is copied (or reported) before anything else
    (S.LOST, E.REPLAYED),  # a replay finishes the recovery first, then aborts its own work
    (S.RECOVERING, E.REPLAYED),
    (S.RECOVERING, E.UNRECOVERABLE),
    (S.LOST, E.RECOVERY_PARTIAL),  # a copy goes on only once its first part is recorded
    (S.DECIDED, E.RECOVERY_PARTIAL),
    (S.DONE, E.RECOVERY_PARTIAL),
    (S.RECOVERING, E.PRUNED),
    (S.DONE, E.COPIED),  # nothing is copied for a finished batch
    (S.DECIDED, E.COPIED),  # only once the log shows the aborted transactions
    (S.DECIDED, E.PRUNED),  # an unfinished decision is never pruned
    (S.DECIDED, E.DECIDE),  # two drivers deciding one batch
    (S.NEW, E.ALL_COMMITTED),
]


@pytest.mark.parametrize(("state", "event", "after"), ALLOWED)
def test_allowed_transitions(state: State, event: Event, after: State) -> None:
    assert transition(state, event) is after


@pytest.mark.parametrize(("state", "event"), REFUSED)
def test_refused_transitions_name_state_and_event(state: State, event: Event) -> None:
    with pytest.raises(InvalidTransition, match=f"{state.value!r}.*{event.value!r}"):
        transition(state, event)


def test_no_transition_leaves_an_unfinished_decision_without_finishing_it() -> None:
    """Only finishing (answers or the log), a committed copy, or a loss the log makes final
    takes a decision out of DECIDED, LOST or RECOVERING."""
    leaving = {(s, e) for (s, e), after in TRANSITIONS.items()
               if s in UNFINISHED and after not in UNFINISHED}
    assert leaving == {(S.DECIDED, E.ALL_COMMITTED), (S.DECIDED, E.NONE_COMMITTED),
                       (S.LOST, E.UNRECOVERABLE), (S.RECOVERING, E.RECOVERY_COMMITTED)}


def test_a_replay_never_stands_in_for_lost_transactions() -> None:
    """Invariant 10: no event makes a replay's transactions part of a decision; a recovery
    comes only from the log (COPIED)."""
    into_recovering = {(s, e) for (s, e), after in TRANSITIONS.items()
                       if after is S.RECOVERING and s is not S.RECOVERING}
    assert into_recovering == {(S.LOST, E.COPIED)}
    assert {s for (s, e) in TRANSITIONS if e is E.REPLAYED} == {S.DONE}


def test_done_is_never_voided_or_decided_again() -> None:
    assert {after for (s, _), after in TRANSITIONS.items() if s is S.DONE} == {S.DONE, S.VOID}
    assert [e for (s, e) in TRANSITIONS if s is S.DONE and TRANSITIONS[(s, e)] is S.VOID] == [
        E.PRUNED]


@pytest.mark.parametrize(("committed", "aborted", "unknown", "event"), [
    (3, 0, 0, E.ALL_COMMITTED),
    (0, 0, 0, E.ALL_COMMITTED),  # nothing open: nothing to commit
    (2, 1, 0, E.SOME_ABORTED),
    (0, 3, 0, E.NONE_COMMITTED),
    (2, 0, 1, E.UNKNOWN),
    (0, 2, 1, E.UNKNOWN),  # one unknown keeps the decision, whatever the others did
])
def test_commit_event(committed: int, aborted: int, unknown: int, event: Event) -> None:
    assert commit_event(committed, aborted, unknown) is event


# -- a decision's state is what its files' events reach ------------------------------------

@pytest.mark.parametrize(("files", "state"), [
    ({"done": False}, S.DECIDED),
    ({"done": True}, S.DONE),
    ({"done": True, "lost": True}, S.DONE),  # what the log lost is final, reported once
    ({"done": True, "lost_handoffs": True}, S.LOST),  # a pre-0.1.0 build's LOST decision
    ({"done": True, "lost": True, "lost_handoffs": True}, S.LOST),
    ({"done": False, "recovery": True}, S.RECOVERING),
    ({"done": True, "recovery": True}, S.RECOVERING),  # crash before the record was cleared
])
def test_the_files_state_comes_from_the_transitions(files: dict[str, bool],
                                                    state: State) -> None:
    assert state_after(recorded_events(**files)) is state


def test_a_decision_reads_its_state_from_the_table() -> None:
    from eos_kafka_source.sink.decisions.log import Decision
    from eos_kafka_source.sink.handoff import TxnHandoff

    h = TxnHandoff("p-0", 7, 1, 1, True, (("out", 0, 5),), records=5)
    assert Decision(1, (h,), False).state is S.DECIDED
    assert Decision(1, (h,), True).state is S.DONE
    assert Decision(1, (h,), True, lost=("x",)).state is S.DONE
    assert Decision(1, (h,), True, lost_handoffs=(h,)).state is S.LOST
    assert Decision(1, (h,), True, recovery=(h,)).state is S.RECOVERING
    assert Decision(1, (h,), False, recovery=()).state is S.RECOVERING


def test_events_that_skip_a_step_are_refused() -> None:
    with pytest.raises(InvalidTransition):
        state_after((E.DECIDE, E.COPIED))
