"""Reading a transaction's outcome from Kafka's aborted-transaction list (wire/txn_outcome.py),
with a scripted Fetch answer: each aborted transaction is listed by its own first offset, so
only an exact match is the same transaction."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pytest

from eos_kafka_source.records import encode_batch, encode_control_batch
from eos_kafka_source.wire import txn_outcome
from eos_kafka_source.wire.fetch import Bounds, Chunk
from eos_kafka_source.wire.txn_outcome import Place, txn_outcomes

PID, EPOCH, TP = 7, 3, ("out", 0)


def _txn(first: int, n: int, commit: bool) -> bytes:
    """``n`` records of producer ``PID`` from ``first``, then its marker."""
    data = encode_batch([None] * n, [b"v"] * n, 0, producer_id=PID, producer_epoch=EPOCH,
                        base_sequence=first, transactional=True, base_offset=first)
    return data + encode_control_batch(commit=commit, producer_id=PID, producer_epoch=EPOCH,
                                       base_offset=first + n, timestamp_ms=0)


def _answer(monkeypatch: pytest.MonkeyPatch, chunk: Chunk) -> list[Mapping[Any, int]]:
    """Every Fetch answers ``chunk`` for ``TP``; returns the offsets asked, per Fetch."""
    asked: list[Mapping[Any, int]] = []

    def send(wire: object, leader: int, wants: Mapping[Any, int], **_: object) -> object:
        asked.append(dict(wants))
        return wants

    monkeypatch.setattr(txn_outcome, "send_fetch", send)
    monkeypatch.setattr(txn_outcome, "receive_fetch", lambda sent: {TP: chunk})
    return asked


@pytest.mark.parametrize("earlier_committed", [False, True])
def test_two_transactions_of_one_producer_id_confirmed_in_one_call(
        monkeypatch: pytest.MonkeyPatch, earlier_committed: bool) -> None:
    """The earlier transaction (offsets 0..9) and the later one (11..20) of one producer id,
    one committed and the other aborted: each reads as its own marker says. Before the
    exact comparison, an earlier ABORT (listed at 0) made the later COMMIT read as ABORT
    too (0 <= 11)."""
    records = _txn(0, 10, earlier_committed) + _txn(11, 10, not earlier_committed)
    aborted = [(PID, 11)] if earlier_committed else [(PID, 0)]
    asked = _answer(monkeypatch, Chunk(0, Bounds(0, 22, 22), records, aborted))
    earlier, later = Place(*TP, 0, PID), Place(*TP, 11, PID)
    got = txn_outcomes(object(), {TP: 1}, [earlier, later],  # type: ignore[arg-type]
                       deadline=time.monotonic() + 5)
    assert got == {earlier: earlier_committed, later: not earlier_committed}
    assert asked == [{TP: 0}]  # one Fetch settled both


def test_another_producers_abort_at_the_same_offset_is_not_ours(
        monkeypatch: pytest.MonkeyPatch) -> None:
    records = _txn(0, 10, True)
    _answer(monkeypatch, Chunk(0, Bounds(0, 11, 11), records, [(PID + 1, 0)]))
    place = Place(*TP, 0, PID)
    assert txn_outcomes(object(), {TP: 1}, [place],  # type: ignore[arg-type]
                        deadline=time.monotonic() + 5) == {place: True}


def _many(n: int, aborted_every: int) -> tuple[bytes, list[Place], list[tuple[int, int]]]:
    """``n`` transactions of producers PID..PID+n-1 one after the other in ``TP`` (2 records
    and a marker each); every ``aborted_every``-th aborted."""
    records, places, aborted = b"", [], []
    for i in range(n):
        first, pid, commit = 3 * i, PID + i, i % aborted_every != 0
        records += encode_batch([None] * 2, [b"v" * 100] * 2, 0, producer_id=pid,
                                producer_epoch=EPOCH, base_sequence=0, transactional=True,
                                base_offset=first)
        records += encode_control_batch(commit=commit, producer_id=pid, producer_epoch=EPOCH,
                                        base_offset=first + 2, timestamp_ms=0)
        places.append(Place(*TP, first, pid))
        if not commit:
            aborted.append((pid, first))
    return records, places, aborted


def test_one_fetch_per_partition_settles_a_thousand_transactions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch of 1,000 tasks puts 1,000 transactions in each partition it writes: one Fetch
    asks for enough bytes to cover them all, so confirming costs a read per partition, not
    one per transaction and partition."""
    records, places, aborted = _many(1000, aborted_every=7)
    asked: list[int] = []

    def send(wire: object, leader: int, wants: Mapping[Any, int], *, max_bytes: int,
             **_: object) -> object:
        asked.append(max_bytes)
        return wants

    end = 3 * len(places)
    monkeypatch.setattr(txn_outcome, "send_fetch", send)
    monkeypatch.setattr(txn_outcome, "receive_fetch", lambda sent: {
        TP: Chunk(0, Bounds(0, end, end), records[:max(asked)], aborted)})
    got = txn_outcomes(object(), {TP: 1}, places,  # type: ignore[arg-type]
                       deadline=time.monotonic() + 5)
    assert len(records) < txn_outcome.PARTITION_CAP and asked == [txn_outcome.PARTITION_CAP]
    assert got == {p: (p.producer_id, p.first) not in aborted for p in places}
    assert sum(v is False for v in got.values()) == len(aborted) == 143


def test_a_partition_whose_log_stands_still_is_given_up_on_while_others_wait(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Markers land a while after EndTxn: a partition whose log keeps moving (markers being
    written) is waited on past ``stall_s``; one where nothing moves (a hanging transaction)
    answers None once ``stall_s`` has passed, long before the deadline."""
    still, moving = ("out", 0), ("out", 1)
    records = _txn(0, 10, True)
    answers = {"n": 0}

    def receive(sent: object) -> dict[Any, Chunk]:
        answers["n"] += 1
        n = answers["n"]
        landed = n >= 12   # the moving partition's marker lands at the 12th answer
        hw = 10 + n       # other producers' markers keep landing before it
        return {still: Chunk(0, Bounds(0, 11, 0), b""),          # held at ours, nothing moves
                moving: Chunk(0, Bounds(0, hw, 11 if landed else 0), records if landed else b"")}

    monkeypatch.setattr(txn_outcome, "send_fetch", lambda *a, **k: None)
    monkeypatch.setattr(txn_outcome, "receive_fetch", receive)
    monkeypatch.setattr(txn_outcome, "WAIT_MS", 1)
    a, b = Place(*still, 0, PID), Place(*moving, 0, PID)
    clock = {"t": 0.0}
    monkeypatch.setattr(txn_outcome.time, "monotonic", lambda: clock["t"])

    real_ask = txn_outcome._ask

    def ask(*args: Any) -> Any:
        clock["t"] += 0.25  # each pass takes a quarter of a second
        return real_ask(*args)

    monkeypatch.setattr(txn_outcome, "_ask", ask)
    got = txn_outcomes(object(), {still: 1, moving: 1}, [a, b],  # type: ignore[arg-type]
                       deadline=60.0, stall_s=2.0)
    assert got == {a: None, b: True}
    assert answers["n"] == 12 and clock["t"] == 3.0


def test_a_partition_that_answers_an_error_leaves_all_its_transactions_to_the_markers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _answer(monkeypatch, Chunk(6, Bounds(0, 0, 0), b""))  # NOT_LEADER_OR_FOLLOWER
    places = [Place(*TP, f, PID + f) for f in (0, 5, 9)]
    assert txn_outcomes(object(), {TP: 1}, places,  # type: ignore[arg-type]
                        deadline=time.monotonic() + 5) == {}
    assert asked == [{TP: 0}]
