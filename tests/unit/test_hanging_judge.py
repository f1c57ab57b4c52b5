"""The judge of a hanging transaction (wire/hanging.py ``judge``), as Kafka's
``kafka-transactions.sh find-hanging`` judges one (``TransactionsCommand``): the producer's
last write in the partition older than the maximum transaction timeout, **and** no
coordinator listing the partition. The driver (sink/driver/hanging_txns.py) and
``eoskafka txns`` both judge with it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from eos_kafka_source.wire.hanging import OpenProducer, judge

NOW = 10_000_000_000
MIN = 60_000
MAX = 15 * MIN  # Kafka's default transaction.max.timeout.ms
TP = ("out", 2)


def _producer(last_write_ago_ms: int) -> OpenProducer:
    return OpenProducer(*TP, producer_id=7, producer_epoch=3, coordinator_epoch=0,
                        start_offset=120, last_timestamp_ms=NOW - last_write_ago_ms)


def _view(state: str, *partitions: tuple[str, int], started_ago_ms: int = MIN,
          producer_id: int = 7) -> SimpleNamespace:
    topics = [SimpleNamespace(topic=t, partitions=[p for tt, p in partitions if tt == t])
              for t in sorted({t for t, _ in partitions})]
    return SimpleNamespace(transaction_state=state, producer_id=producer_id, producer_epoch=3,
                           topics=topics, transaction_start_time_ms=NOW - started_ago_ms)


NOT_KNOWN = object()  # the coordinator does not know the id (DescribeTransactions 105)

CASES = [
    # (what, last write ago, transactional id, coordinator's view, hanging?)
    ("the reproduction: PrepareCommit holds the partition, the transaction started 20 min "
     "ago, last write 3 s ago", 3_000, "t-1", _view("PrepareCommit", TP, started_ago_ms=20 * MIN),
     False),
    ("PrepareCommit holds the partition, last write 20 min ago (a marker slow past the "
     "timeout)", 20 * MIN, "t-1", _view("PrepareCommit", TP), False),
    ("Ongoing lists the partition, idle for 20 min within a 1 h timeout", 20 * MIN, "t-1",
     _view("Ongoing", TP), False),
    ("CompleteCommit without the partition, last write 3 s ago (markers in flight, or a "
     "stale leader answer)", 3_000, "t-1", _view("CompleteCommit"), False),
    ("CompleteCommit without the partition, last write 16 min ago", 16 * MIN, "t-1",
     _view("CompleteCommit"), True),
    ("PrepareCommit lists only another partition, last write 16 min ago", 16 * MIN, "t-1",
     _view("PrepareCommit", ("out", 1)), True),
    ("another producer id lists the partition (Kafka does not compare ids)", 16 * MIN, "t-1",
     _view("Ongoing", TP, producer_id=99), False),
    ("no coordinator lists the producer id, last write 3 s ago", 3_000, None, None, False),
    ("no coordinator lists the producer id, last write 16 min ago", 16 * MIN, None, None,
     True),
    ("the coordinator does not know the id, last write 16 min ago", 16 * MIN, "t-1",
     NOT_KNOWN, True),
    ("the coordinator does not know the id, last write 1 min ago", MIN, "t-1", NOT_KNOWN,
     False),
    ("last write exactly at the timeout is not older than it", MAX, None, None, False),
]


@pytest.mark.parametrize(("what", "ago", "tid", "view", "hanging"), CASES,
                         ids=[c[0][:60] for c in CASES])
def test_judged_as_find_hanging_judges(what: str, ago: int, tid: str | None, view: object,
                                       hanging: bool) -> None:
    verdict = judge(_producer(ago), tid, None if view is NOT_KNOWN else view, now_ms=NOW,
                    max_timeout_ms=MAX)
    assert verdict.hanging is hanging, (what, verdict.why)


def test_the_words_say_only_what_holds_for_the_case() -> None:
    """A coordinator still committing is never said to have ended the transaction; a young
    write says why it waits; a hanging one names its state and its idle time."""
    waiting = judge(_producer(3_000), "t-1", _view("PrepareCommit", TP), now_ms=NOW,
                    max_timeout_ms=MAX)
    assert "within the maximum transaction timeout" in waiting.why
    assert "no marker will come" not in waiting.why
    listed = judge(_producer(20 * MIN), "t-1", _view("PrepareCommit", TP), now_ms=NOW,
                   max_timeout_ms=MAX)
    assert "still lists this partition (state PrepareCommit)" in listed.why
    hung = judge(_producer(16 * MIN), "t-1", _view("CompleteCommit"), now_ms=NOW,
                 max_timeout_ms=MAX)
    assert "state CompleteCommit" in hung.why and "960 s ago" in hung.why
    assert "transaction.max.timeout.ms=900000" in hung.why
    assert hung.command("b:9092").endswith("--topic out --partition 2 --start-offset 120")
