"""Encode a v2 record batch straight from Arrow columns, with no per-record Python work.

The sink's hot path: Spark hands a task Arrow batches, and for records without headers
every part of a record is a column operation: the varints of small numbers (lengths,
offset and timestamp deltas) come from a lookup table (``pc.take``), and one
``binary_join_element_wise`` lays the records out back to back, which is the batch's
records section. The output is byte-for-byte what :func:`~eos_kafka_source.records.
encode_batch` writes for the same records (tests pin this).

:func:`encode_arrow` returns None when a batch is outside what the table covers (a
record or key longer than ~32 KB, timestamps more than ~16 s apart) or has headers; the
caller then uses ``encode_batch`` on Python lists.
"""

from __future__ import annotations

from array import array

import pyarrow as pa
import pyarrow.compute as pc

from eos_kafka_source.records.encode import compress, frame_batch
from eos_kafka_source.records.header import TRANSACTIONAL_MASK

#: Unsigned values below this have their base-128 varint in the lookup table.
TABLE_SIZE = 1 << 16
_table: pa.Array | None = None
_offset_table: pa.Array | None = None
_EMPTY = pa.scalar(b"", pa.binary())
_ZERO = pa.scalar(b"\x00", pa.binary())  # record attributes; a zero delta; no headers
_NULL_LENGTH = pa.scalar(b"\x01", pa.binary())  # zigzag(-1): a null key or value


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _varints() -> pa.Array:
    """Base-128 varints of 0..TABLE_SIZE-1 (zigzag is applied before the lookup).

    Built from byte patterns rather than 65,536 calls to :func:`_varint` (a Python worker
    builds it once; tests check it against :func:`_varint`).
    """
    global _table
    if _table is None:
        _table = _build_varints()
    return _table


def _build_varints() -> pa.Array:
    # 0..127: one byte; 128..16383: two; 16384..65535: three (TABLE_SIZE is 1 << 16).
    low = bytes(range(0x80, 0x100))  # a continued group's low 7 bits, i = 0..127 mod 128
    two = bytearray(2 * (16384 - 128))
    two[0::2] = low * 127
    two[1::2] = b"".join(bytes((high,)) * 128 for high in range(1, 128))
    three = bytearray(3 * (TABLE_SIZE - 16384))
    three[0::3] = low * ((TABLE_SIZE - 16384) // 128)
    three[1::3] = b"".join(bytes((0x80 | mid,)) * 128 for mid in range(128)) * 3
    three[2::3] = b"".join(bytes((high,)) * 16384 for high in range(1, 4))
    offsets = array("i", range(129))
    offsets.extend(range(130, 128 + 2 * (16384 - 128) + 1, 2))
    offsets.extend(range(len(two) + 128 + 3, len(two) + 128 + len(three) + 1, 3))
    data = bytes(range(128)) + two + three
    return pa.Array.from_buffers(pa.binary(), TABLE_SIZE,
                                 [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _offset_deltas(n: int) -> pa.Array:
    """Zigzag varints of the offset deltas 0..n-1."""
    global _offset_table
    if _offset_table is None:
        _offset_table = _varints().take(pa.array(range(0, TABLE_SIZE, 2), pa.int32()))
    return _offset_table.slice(0, n)


def _zigzag_of_non_negative(values: pa.Array) -> pa.Array:
    return pc.multiply(values, 2)


def _fits(zigzagged: pa.Array) -> bool:
    bounds = pc.min_max(zigzagged)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    return low is None or (low >= 0 and high < TABLE_SIZE)


def _length_column(data: pa.Array) -> tuple[pa.Array, pa.Array] | None:
    """(varint of each length, or of -1 for null; byte count of the data) or None."""
    lengths = pc.binary_length(data)
    zz = _zigzag_of_non_negative(lengths)
    if not _fits(zz):
        return None
    encoded = pc.take(_varints(), zz)
    if data.null_count:
        encoded = pc.if_else(pc.is_null(data), _NULL_LENGTH, encoded)
        lengths = lengths.fill_null(0)
    return encoded, lengths


def encode_arrow(
    keys: pa.Array | None,
    values: pa.Array,
    timestamps_ms: pa.Array | int,
    *,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    transactional: bool,
    compression: int = 0,
    compression_level: int | None = None,
) -> bytes | None:
    """One v2 batch at base offset 0 (as ``encode_batch``), or None.

    ``compression`` is a codec id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd): the
    records section is built column-wise as ever, then compressed whole (at
    ``compression_level``, see :func:`~eos_kafka_source.records.encode.compress`).

    ``keys`` and ``values`` are binary arrays of the same length (``keys`` None: every
    key null); ``timestamps_ms`` an int64 array of the same length, or one int for all.
    """
    n = len(values)
    if not n or n > TABLE_SIZE // 2:
        return None
    table = _varints()
    value_part = _length_column(values)
    if value_part is None:
        return None
    value_lengths, value_bytes = value_part
    if keys is None:
        key_lengths: pa.Array | pa.Scalar = _NULL_LENGTH
        key_data: pa.Array | pa.Scalar = _EMPTY
        key_bytes: pa.Array | int = 0
        key_varint: pa.Array | int = 1
    else:
        key_part = _length_column(keys)
        if key_part is None:
            return None
        key_lengths, key_bytes = key_part
        key_data = keys.fill_null(b"") if keys.null_count else keys
        key_varint = pc.binary_length(key_lengths)
    if isinstance(timestamps_ms, int):
        first_ts = max_ts = timestamps_ms
        ts_deltas: pa.Array | pa.Scalar = _ZERO
        ts_varint: pa.Array | int = 1
    else:
        first_ts = timestamps_ms[0].as_py()
        max_ts = pc.max(timestamps_ms).as_py()
        delta = pc.subtract(timestamps_ms, first_ts)
        zz = pc.if_else(pc.less(delta, 0), pc.subtract(pc.multiply(delta, -2), 1),
                        pc.multiply(delta, 2))
        if not _fits(zz):
            return None
        ts_deltas = pc.take(table, zz)
        ts_varint = pc.binary_length(ts_deltas)
    offset_deltas = _offset_deltas(n)
    body = pc.add(pc.add(pc.binary_length(offset_deltas), pc.binary_length(value_lengths)),
                  value_bytes)
    body = pc.add(pc.add(pc.add(body, key_varint), key_bytes), ts_varint)
    body = pc.add(body, 2)  # record attributes and the header count
    body_zz = _zigzag_of_non_negative(body)
    if not _fits(body_zz):
        return None
    records = pc.binary_join_element_wise(
        pc.take(table, body_zz), _ZERO, ts_deltas, offset_deltas, key_lengths, key_data,
        value_lengths, values.fill_null(b"") if values.null_count else values, _ZERO, _EMPTY,
    )
    section: bytes | memoryview = _section(records, n)
    attributes = TRANSACTIONAL_MASK if transactional else 0
    if compression:
        section = compress(compression, section, compression_level)
        attributes |= compression
    return frame_batch(0, attributes, n, first_ts, max_ts, producer_id, producer_epoch,
                       base_sequence, section)


def _section(records: pa.Array, n: int) -> memoryview:
    """The concatenated bytes of a binary array's ``n`` values, without a copy."""
    _, offsets, data = records.buffers()
    assert offsets is not None and data is not None
    bounds = memoryview(offsets).cast("i")  # int32 offsets of a binary array
    first, last = bounds[records.offset], bounds[records.offset + n]
    return memoryview(data)[first:last]

