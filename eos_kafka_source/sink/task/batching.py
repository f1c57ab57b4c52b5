"""Sizing record batches and Produce requests by bytes (pure functions, no network).

A partition's records are cut into batches that stay under the topic's
``max.message.bytes`` (and ``producer.batchRecords`` records) whatever their sizes:
one 500 KB value among thousands of small ones gets a batch of its own instead of
swelling the average. Batches bound for one leader are packed into Produce requests
under ``kafka.max.request.size`` (the Java producer's limit, far under the broker's
``socket.request.max.bytes``), so 200 partitions on one broker make several requests,
not one of 200 MiB.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc

T = TypeVar("T")

#: v2 batch header (61 bytes) and a Produce request's framing for one partition, rounded up.
BATCH_OVERHEAD = 128
#: Worst case of a record's framing in a v2 batch: length, attributes, timestamp and offset
#: deltas, key and value lengths, header count (varints).
RECORD_OVERHEAD = 40
#: Per header: name and value lengths (varints).
HEADER_OVERHEAD = 10
#: The brokers' default max.message.bytes (1 MiB + 12), used when the topic's is unknown.
DEFAULT_MAX_MESSAGE_BYTES = 1_048_588


def record_sizes(values: pa.Array, keys: pa.Array | None,
                 headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None) -> pa.Array:
    """An upper bound of each record's encoded size in a v2 batch (int64 array)."""
    sizes = pc.add(pc.fill_null(pc.binary_length(values), 0).cast(pa.int64()), RECORD_OVERHEAD)
    if keys is not None:
        sizes = pc.add(sizes, pc.fill_null(pc.binary_length(keys), 0).cast(pa.int64()))
    if headers is not None:
        extra = [sum(len(k.encode()) + len(v or b"") + HEADER_OVERHEAD for k, v in h)
                 if h else 0 for h in headers]
        sizes = pc.add(sizes, pa.array(extra, pa.int64()))
    return sizes


def split_by_bytes(sizes: pa.Array | Sequence[int], max_bytes: int,
                   max_records: int) -> list[tuple[int, int]]:
    """Cut records into [start, end) slices of at most ``max_records`` records whose sizes sum
    to at most ``max_bytes - BATCH_OVERHEAD``; a record too big on its own gets a slice alone
    (the broker then names it too large)."""
    array = sizes if isinstance(sizes, pa.Array) else pa.array(sizes, pa.int64())
    n = len(array)
    budget = max(max_bytes - BATCH_OVERHEAD, 1)
    max_records = max(max_records, 1)
    if not n:
        return []
    largest = pc.max(array).as_py()
    if largest * min(max_records, n) <= budget:  # the usual case: counts alone decide
        return [(i, min(i + max_records, n)) for i in range(0, n, max_records)]
    ends = pc.cumulative_sum(array).to_pylist()  # ends[i]: bytes of records 0..i
    slices: list[tuple[int, int]] = []
    start, base = 0, 0
    while start < n:
        end = bisect.bisect_right(ends, base + budget, lo=start)
        end = min(max(end, start + 1), start + max_records)
        slices.append((start, end))
        base, start = ends[end - 1], end
    return slices


def pack_requests(items: Sequence[tuple[T, int]], max_request_bytes: int) -> list[list[T]]:
    """Group (item, size) pairs, in order, into requests of at most ``max_request_bytes``
    (each holding at least one item)."""
    requests: list[list[T]] = []
    current: list[T] = []
    total = 0
    for item, size in items:
        if current and total + size > max_request_bytes:
            requests.append(current)
            current, total = [], 0
        current.append(item)
        total += size
    if current:
        requests.append(current)
    return requests
