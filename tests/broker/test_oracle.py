"""The test oracle itself, against the embedded broker and kafka-python's producer."""

from __future__ import annotations

import pytest

from tests.kafka_helpers import TxnWriter, create_topic, write_plain
from tests.oracle import (
    PartitionView,
    Rec,
    Txn,
    assert_no_open_transactions,
    committed_values,
    committed_view,
    lso_lag,
    tansu_stuck_lso,
)


def test_classifies_committed_aborted_and_plain(bootstrap: str, unique: str) -> None:
    create_topic(bootstrap, unique)
    with TxnWriter(bootstrap, f"{unique}-w") as w:
        c1 = w.committed(unique, [b"c1", b"c2"], partition=0, keys=[b"k1", None])
        a1 = w.aborted(unique, [b"a1", b"a2", b"a3"], partition=0)
        p1 = write_plain(bootstrap, unique, [b"p1"], partition=0)
        c2 = w.committed(unique, [b"c3"], partition=0, headers=[[("h", b"v"), ("e", b"")]])
    view = committed_view(bootstrap, unique)
    assert list(view) == [0]
    pv = view[0]
    assert pv.committed == [
        Rec(c1[0].offset, b"k1", b"c1", ()),
        Rec(c1[1].offset, None, b"c2", ()),
        Rec(p1[0].offset, None, b"p1", ()),
        Rec(c2[0].offset, None, b"c3", (("h", b"v"), ("e", b""))),
    ]
    assert [r.offset for r in pv.aborted] == [m.offset for m in a1]
    assert pv.aborted_values == [b"a1", b"a2", b"a3"]
    assert pv.open == [] and pv.open_producers == set()
    # 6 data records + 3 markers
    assert (pv.log_start, pv.last_stable, pv.high_watermark) == (0, 10, 10)
    assert_no_open_transactions(bootstrap, unique)


def test_interleaved_producers_are_resolved_per_producer(bootstrap: str, unique: str) -> None:
    """Producer A's commit must not resolve producer B's pending records, and vice versa."""
    create_topic(bootstrap, unique)
    with TxnWriter(bootstrap, f"{unique}-a") as a, TxnWriter(bootstrap, f"{unique}-b") as b:
        a.begin_open(unique, [b"a1"], partition=0)
        b.begin_open(unique, [b"b1"], partition=0)
        a.begin_open(unique, [b"a2"], partition=0)
        write_plain(bootstrap, unique, [b"p"], partition=0)
        b.abort_open()
        b.begin_open(unique, [b"b2"], partition=0)
        a.commit_open()
        b.commit_open()
    pv = committed_view(bootstrap, unique)[0]
    assert pv.committed_values == [b"a1", b"a2", b"p", b"b2"]
    assert pv.aborted_values == [b"b1"]
    assert [r.offset for r in pv.committed] == sorted(r.offset for r in pv.committed)
    assert committed_values(bootstrap, unique) == [b"a1", b"a2", b"p", b"b2"]


def test_open_transaction_is_open_until_aborted(bootstrap: str, unique: str) -> None:
    create_topic(bootstrap, unique, partitions=2)
    with TxnWriter(bootstrap, f"{unique}-w") as w:
        w.committed(unique, [b"done"], partition=1)
        meta = w.begin_open(unique, [b"o1", b"o2"], partition=1)
        view = committed_view(bootstrap, unique)
        assert view[0].open == [] and view[0].high_watermark == 0
        pv = view[1]
        assert pv.open_values == [b"o1", b"o2"]
        assert pv.open_producers == {w.producer_id}
        assert pv.committed_values == [b"done"] and pv.aborted == []
        assert pv.last_stable == meta[0].offset < pv.high_watermark
        expected = rf"{unique}-1: open producers \[{w.producer_id}\]"
        with pytest.raises(AssertionError, match=expected):  # no marker is coming: no wait
            assert_no_open_transactions(bootstrap, unique, settle_s=0)
        w.abort_open()
        assert_no_open_transactions(bootstrap, unique)
        pv = committed_view(bootstrap, unique)[1]
        assert pv.aborted_values == [b"o1", b"o2"] and pv.open == []


def test_writer_exit_aborts_what_it_left_open(bootstrap: str, unique: str) -> None:
    create_topic(bootstrap, unique)
    with TxnWriter(bootstrap, f"{unique}-w") as w:
        w.begin_open(unique, [b"left-open"], partition=0)
    assert_no_open_transactions(bootstrap, unique)
    assert committed_view(bootstrap, unique)[0].aborted_values == [b"left-open"]


def test_writer_exit_aborts_after_an_exception(bootstrap: str, unique: str) -> None:
    create_topic(bootstrap, unique)
    with pytest.raises(RuntimeError, match="boom"):
        with TxnWriter(bootstrap, f"{unique}-w") as w:
            w.begin_open(unique, [b"x"], partition=0)
            raise RuntimeError("boom")
    assert_no_open_transactions(bootstrap, unique)


def test_committed_values_across_partitions(bootstrap: str, unique: str) -> None:
    create_topic(bootstrap, unique, partitions=3)
    with TxnWriter(bootstrap, f"{unique}-w") as w:
        w.begin_open(unique, [b"p2-a"], partition=2)
        w.begin_open(unique, [b"p0-a"], partition=0)
        w.commit_open()  # one transaction over two partitions: a marker in each
        w.aborted(unique, [b"p1-x"], partition=1)
        w.committed(unique, [b"p0-b", b"p0-c"], partition=0)
    write_plain(bootstrap, unique, [b"p1-plain"], partition=1, idempotent=True)
    assert committed_values(bootstrap, unique) == [b"p0-a", b"p0-b", b"p0-c", b"p1-plain", b"p2-a"]
    view = committed_view(bootstrap, unique)
    assert view[1].aborted_values == [b"p1-x"]
    assert_no_open_transactions(bootstrap, unique)


# -- the stuck-LSO excuse: exactly the pinned state, nothing else (no broker needed) -------------

def _pinned(**changes: object) -> PartitionView:
    """b spans a@0 (0..3 + marker 6) and a@1 (7..10 + marker 10); b's marker at 11."""
    pv = PartitionView(high_watermark=12, last_stable=7, last_txn_data=7, transactions=[
        Txn(2, 0, 3, 6, True), Txn(2, 1, 7, 10, True), Txn(1, 0, 0, 11, True)])
    for name, value in changes.items():
        setattr(pv, name, value)
    return pv


def test_stuck_lso_signature_matches_the_pinned_state_only() -> None:
    assert tansu_stuck_lso(_pinned()) is not None
    assert tansu_stuck_lso(_pinned(last_stable=12)) is None  # no lag at all
    assert tansu_stuck_lso(_pinned(last_stable=8)) is None  # not a transaction's start
    assert tansu_stuck_lso(_pinned(open_producers={9})) is None
    same_epoch = [Txn(2, 0, 3, 6, True), Txn(2, 0, 7, 10, True), Txn(1, 0, 0, 11, True)]
    assert tansu_stuck_lso(_pinned(transactions=same_epoch)) is None  # not re-initialised
    first_of_id = [Txn(2, 1, 7, 10, True), Txn(1, 0, 0, 11, True)]
    assert tansu_stuck_lso(_pinned(transactions=first_of_id)) is None  # no earlier txn
    unspanned = [Txn(2, 0, 3, 6, True), Txn(2, 1, 7, 10, True), Txn(1, 0, 0, 9, True)]
    assert tansu_stuck_lso(_pinned(transactions=unspanned)) is None  # b ended inside a@1
    assert tansu_stuck_lso(_pinned(high_watermark=16, last_txn_data=12,
                                   transactions=[*_pinned().transactions,
                                                 Txn(3, 0, 12, 15, True)])) is None


def test_stuck_lso_is_never_excused_off_tansu(monkeypatch) -> None:
    view = {0: _pinned()}
    monkeypatch.setenv("EOSKAFKA_TEST_BROKER", "tansu")
    assert [len(x) for x in lso_lag(view)] == [1, 0]
    for kind in ("kafka", "kafka43", "kafka39"):
        monkeypatch.setenv("EOSKAFKA_TEST_BROKER", kind)
        assert [len(x) for x in lso_lag(view)] == [0, 1]
    monkeypatch.setenv("EOSKAFKA_TEST_BROKER", "kafak")
    with pytest.raises(ValueError, match="EOSKAFKA_TEST_BROKER"):
        lso_lag(view)
