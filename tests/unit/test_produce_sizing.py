"""Pure logic of the task's Produce path: which answers are retried, how batches and requests
are cut by bytes. No broker: what Kafka does with them is in tests/broker/test_leaders_move.py."""

from __future__ import annotations

import pyarrow as pa
import pytest

from eos_kafka_source.sink.task.batching import (
    BATCH_OVERHEAD,
    RECORD_OVERHEAD,
    pack_requests,
    record_sizes,
    split_by_bytes,
)
from eos_kafka_source.sink.task.produce import Verdict, verdict
from eos_kafka_source.wire.retry import backoff_s


@pytest.mark.parametrize(("code", "earlier", "expected"), [
    (0, False, Verdict.ACKED),
    (46, False, Verdict.ACKED),   # DUPLICATE_SEQUENCE_NUMBER: written before, by this producer
    (6, False, Verdict.RETRY),    # NOT_LEADER_OR_FOLLOWER
    (19, False, Verdict.RETRY),   # NOT_ENOUGH_REPLICAS
    (20, False, Verdict.RETRY),   # NOT_ENOUGH_REPLICAS_AFTER_APPEND
    (7, False, Verdict.RETRY),    # REQUEST_TIMED_OUT
    (45, True, Verdict.RETRY),    # OUT_OF_ORDER after an earlier batch failed: follows it
    (45, False, Verdict.FATAL),   # OUT_OF_ORDER on the next expected batch: records lost
    (47, False, Verdict.FATAL),   # INVALID_PRODUCER_EPOCH: fenced
    (90, True, Verdict.FATAL),    # PRODUCER_FENCED
    (10, False, Verdict.FATAL),   # MESSAGE_TOO_LARGE
    (32, False, Verdict.FATAL),   # INVALID_TIMESTAMP
])
def test_produce_verdicts(code: int, earlier: bool, expected: Verdict) -> None:
    assert verdict(code, earlier) is expected


def test_backoff_grows_and_is_capped() -> None:
    waits = [backoff_s(i) for i in range(10)]
    assert waits == sorted(waits) and waits[0] == 0.05 and waits[-1] == 1.0


def test_record_sizes_bound_the_encoding() -> None:
    values = pa.array([b"a" * 10, None, b"b" * 500_000], pa.binary())
    keys = pa.array([b"k", b"kk", None], pa.binary())
    headers = [[("h", b"vv")], None, []]
    sizes = record_sizes(values, keys, headers).to_pylist()
    assert sizes == [10 + 1 + RECORD_OVERHEAD + 1 + 2 + 10, 2 + RECORD_OVERHEAD,
                     500_000 + RECORD_OVERHEAD]


def test_mostly_small_values_with_a_few_big_ones_on_one_key() -> None:
    """What the sink met: thousands of small values and a few of 500 KB in one partition. The
    average size let a batch gather all the big ones (over max.message.bytes)."""
    sizes = [100] * 3000 + [500_000] * 6 + [100] * 3000
    limit = 1_048_588
    slices = split_by_bytes(sizes, limit, 10_000)
    assert slices[0][0] == 0 and slices[-1][1] == len(sizes)
    assert all(a[1] == b[0] for a, b in zip(slices, slices[1:], strict=False))  # contiguous
    assert all(sum(sizes[s:e]) + BATCH_OVERHEAD <= limit for s, e in slices)
    assert len(slices) == 4  # the big ones spread over batches, one or two a batch


def test_a_record_larger_than_the_limit_gets_a_batch_alone() -> None:
    assert split_by_bytes([10, 2000, 10], 1000, 100) == [(0, 1), (1, 2), (2, 3)]


def test_counts_alone_decide_for_small_records() -> None:
    assert split_by_bytes([10] * 7, 1_000_000, 3) == [(0, 3), (3, 6), (6, 7)]
    assert split_by_bytes([], 1000, 3) == []


def test_requests_stay_under_the_request_limit() -> None:
    """200 partitions on one broker: one request of every batch would be 200 x the limit."""
    batches = [(f"p{i}", 900_000) for i in range(200)]
    requests = pack_requests(batches, 1_048_576)
    assert len(requests) == 200 and [b for r in requests for b in r] == [b for b, _ in batches]
    small = pack_requests([(i, 10_000) for i in range(200)], 1_048_576)
    assert len(small) == 2 and all(len(r) * 10_000 <= 1_048_576 for r in small)
    assert pack_requests([("big", 5_000_000)], 1_048_576) == [["big"]]
