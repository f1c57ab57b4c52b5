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
