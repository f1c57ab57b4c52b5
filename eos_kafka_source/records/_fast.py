"""The compiled codec path: aiokafka's Cython v2 record reader and builder.

The only module that touches ``aiokafka.record._crecords`` (its API is not public); written
against aiokafka 0.11-0.14 and pinned by ``tests/unit/test_records.py``, which runs every
codec test over this path and the pure one. ``AVAILABLE`` is False when the extension does
not import (a pure-Python aiokafka build, or no aiokafka), and callers fall back.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import count as _count
from itertools import repeat as _repeat
from typing import Any

try:
    from aiokafka.codec import has_lz4, has_snappy, has_zstd
    from aiokafka.errors import CorruptRecordException as CorruptError
    from aiokafka.record._crecords import DefaultRecordBatch, DefaultRecordBatchBuilder

    AVAILABLE = True
except ImportError:  # pragma: no cover - depends on the installed aiokafka build
    AVAILABLE = False

    class CorruptError(Exception):  # type: ignore[no-redef]
        """Stand-in so callers can always name the exception."""


_MAX_BATCH = 2**31 - 1
_NO_HEADERS: list[tuple[str, bytes | None]] = []


def can_decompress(codec: int) -> bool:
    """Whether aiokafka's codec helpers (gzip, or cramjam for the rest) handle ``codec``."""
    if not AVAILABLE:
        return False
    if codec == 1:
        return True
    check = {2: has_snappy, 3: has_lz4, 4: has_zstd}.get(codec)
    return bool(check and check())


def decode_batch(
    batch: memoryview,
    start: int,
    end: int,
    keys: list[bytes | None],
    values: list[bytes | None],
    offsets: list[int],
    timestamps: list[int],
    headers: Any,
) -> None:
    """Append the records of one batch with offsets in [start, end) to the columns.

    ``headers`` is decode's flat header store (counts, names, values) or None.
    """
    records = DefaultRecordBatch(batch)
    add_key, add_value = keys.append, values.append
    add_offset, add_ts = offsets.append, timestamps.append
    whole = records.base_offset >= start and records.next_offset <= end
    if whole and headers is None:
        for rec in records:
            add_offset(rec.offset)
            add_ts(rec.timestamp)
            add_key(rec.key)
            add_value(rec.value)
        return
    for rec in records:
        offset = rec.offset
        if start <= offset < end:
            add_offset(offset)
            add_ts(rec.timestamp)
            add_key(rec.key)
            add_value(rec.value)
            if headers is not None:
                entries = rec.headers
                headers.counts.append(len(entries))
                for name, value in entries:
                    headers.names.append(name)
                    headers.values.append(value)


def encode_records(
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    timestamps_ms: Sequence[int] | int,
    headers: Sequence[list[tuple[str, bytes | None]]] | None,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    transactional: bool,
) -> bytearray:
    """One uncompressed v2 batch at base offset 0, CRC set (the caller patches the rest)."""
    builder = DefaultRecordBatchBuilder(
        2, 0, int(transactional), producer_id, producer_epoch, base_sequence, _MAX_BATCH
    )
    append = builder.append
    stamps = _repeat(timestamps_ms) if isinstance(timestamps_ms, int) else timestamps_ms
    hdrs = _repeat(_NO_HEADERS) if headers is None else headers
    for offset, key, value, ts, rec_headers in zip(_count(), keys, values, stamps, hdrs):
        if append(offset, ts, key, value, rec_headers or _NO_HEADERS) is None:
            raise ValueError("record batch exceeds 2 GiB")
    return builder.build()
