"""Decode v2 record batches straight into Arrow columns (Spark's Kafka source schema).

Runs on executors inside the source's reader. No per-record objects: records are parsed
into plain column lists and turned into one ``pyarrow.RecordBatch`` by :meth:`to_arrow`.
Two interchangeable paths: aiokafka's compiled reader (``_fast``, ~2.5x faster) when it
imports, and a tight pure-Python loop otherwise or when ``EOSKAFKA_PURE_CODEC=1``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from eos_kafka_source.errors import CorruptRecordError, SchemaError
from eos_kafka_source.records import _fast
from eos_kafka_source.records.header import HEADER_SIZE, BatchHeader, decompress, pure_forced

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def arrow_schema(include_headers: bool) -> pa.Schema:
    """Spark's Kafka source schema in Arrow terms (every field nullable, as in Spark)."""
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", HEADERS_TYPE))
    return pa.schema(fields)


class _Headers:
    """Record headers kept flat: a count per record, then all names and all values.

    Decoding creates no per-record list or tuple: millions of live containers make CPython's
    cyclic GC dominate (measured 5x slower with two headers per record).
    """

    __slots__ = ("counts", "names", "values")

    def __init__(self) -> None:
        self.counts: list[int] = []
        self.names: list[str] = []
        self.values: list[bytes | None] = []

    def truncate(self, records: int) -> None:
        drop = sum(self.counts[records:])
        del self.counts[records:]
        del self.names[len(self.names) - drop :]
        del self.values[len(self.values) - drop :]

    def to_arrow(self) -> pa.Array:
        """list<struct<key, value>>, null for a record without headers (as Spark does)."""
        counts = pa.array(self.counts, pa.int32())
        offsets = pa.concat_arrays([pa.array([0], pa.int32()), pc.cumulative_sum(counts)])
        entries = pa.StructArray.from_arrays(
            [pa.array(self.names, pa.string()), pa.array(self.values, pa.binary())],
            fields=list(HEADERS_TYPE.value_type),
        )
        return pa.ListArray.from_arrays(offsets, entries, HEADERS_TYPE, mask=pc.equal(counts, 0))


class ColumnBuilder:
    """Accumulates decoded records column-wise and emits pyarrow RecordBatches.

    Columns follow Spark's Kafka source: key binary, value binary, topic string, partition
    int32, offset int64, timestamp timestamp[us, UTC] (Kafka ms * 1000), timestampType int32,
    and with ``include_headers`` headers list<struct<key string, value binary>> (null when a
    record has no headers, as Spark does). ``pure`` forces the pure-Python path; by default
    the compiled one is used when aiokafka's extension imports and ``EOSKAFKA_PURE_CODEC``
    is not "1".

    >>> from eos_kafka_source.records import encode_batch, iter_batches
    >>> cb = ColumnBuilder("t", 0, include_headers=False)
    >>> for h, b in iter_batches(encode_batch([None, b"k"], [b"a", b"b"], 5)):
    ...     cb.add_batch(h, b, 0, 2)
    2
    >>> cb.to_arrow().column("key").to_pylist()
    [None, b'k']
    """

    def __init__(
        self,
        topic: str,
        partition: int,
        include_headers: bool,
        schema: pa.Schema | None = None,
        *,
        pure: bool | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        if schema is not None:
            known = set(arrow_schema(include_headers).names)
            unknown = [name for name in schema.names if name not in known]
            if unknown:
                raise SchemaError(
                    f"schema fields {unknown} are not Kafka source columns "
                    f"(include_headers={include_headers}); known: {sorted(known)}"
                )
        self.schema = schema if schema is not None else arrow_schema(include_headers)
        if pure is None:
            pure = pure_forced()
        self.fast = not pure and _fast.AVAILABLE
        self._reset()

    def _reset(self) -> None:
        self._keys: list[bytes | None] = []
        self._values: list[bytes | None] = []
        self._offsets: list[int] = []
        self._timestamps: list[int] = []
        self._ts_types: list[tuple[int, int]] = []  # (timestampType, run length)
        self._headers = _Headers() if self.include_headers else None

    def __len__(self) -> int:
        return len(self._offsets)

    def add_batch(self, header: BatchHeader, batch: memoryview, start: int, end: int) -> int:
        """Decode the records of one batch whose offsets fall in [start, end); return the count.

        Control batches carry no user records and add nothing. With LogAppendTime every
        record's timestamp is the batch's ``max_timestamp``, as the broker defines it.
        """
        if header.is_control or header.last_offset < start or header.base_offset >= end:
            return 0
        codec = header.compression
        before = len(self._offsets)
        try:
            if self.fast and (codec == 0 or _fast.can_decompress(codec)):
                _fast.decode_batch(
                    batch, start, end, self._keys, self._values, self._offsets,
                    self._timestamps, self._headers,
                )  # fmt: skip
            else:
                body = batch[HEADER_SIZE:]
                data = decompress(codec, body) if codec else bytes(body)
                _decode_records(
                    data, header.record_count, header.base_offset, header.first_timestamp,
                    start - header.base_offset, end - header.base_offset,
                    self._keys, self._values, self._offsets, self._timestamps, self._headers,
                )  # fmt: skip
        except CorruptRecordError:
            self._truncate(before)
            raise
        except (IndexError, ValueError, UnicodeDecodeError, _fast.CorruptError) as err:
            self._truncate(before)
            raise CorruptRecordError(
                f"record batch at offset {header.base_offset} does not parse: {err!r}"
            ) from err
        added = len(self._offsets) - before
        if added and header.timestamp_type == 1:
            self._timestamps[before:] = [header.max_timestamp] * added
        if added:
            self._ts_types.append((header.timestamp_type, added))
        return added

    def arrow_batches(self, batches: Iterable[tuple[BatchHeader, memoryview, int]], end: int,
                      rows: int) -> Iterator[pa.RecordBatch]:
        """The records of ``batches`` below ``end`` as Arrow batches of about ``rows`` rows
        (one Kafka batch more can push one a little past it), the last one shorter. Each
        Kafka batch comes with the offset its records start from (:meth:`add_batch`)."""
        for header, batch, start in batches:
            self.add_batch(header, batch, start, end)
            if len(self) >= rows:
                yield self.to_arrow()
        if len(self):
            yield self.to_arrow()

    def _truncate(self, size: int) -> None:
        """Drop a half-decoded batch so a caught error leaves the builder consistent."""
        for column in (self._keys, self._values, self._offsets, self._timestamps):
            del column[size:]
        if self._headers is not None:
            self._headers.truncate(size)

    def to_arrow(self) -> pa.RecordBatch:
        """Build the batch (field names, types and nullability exactly as ``schema``) and reset."""
        n = len(self._offsets)
        ms_type, us_type = pa.timestamp("ms", tz="UTC"), pa.timestamp("us", tz="UTC")
        columns: dict[str, Any] = {
            "key": lambda: pa.array(self._keys, pa.binary()),
            "value": lambda: pa.array(self._values, pa.binary()),
            "topic": lambda: pa.repeat(pa.scalar(self.topic, pa.string()), n),
            "partition": lambda: pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            "offset": lambda: pa.array(self._offsets, pa.int64()),
            "timestamp": lambda: pa.array(self._timestamps, ms_type).cast(us_type),
            "timestampType": self._timestamp_types,
            "headers": lambda: self._headers.to_arrow(),  # type: ignore[union-attr]
        }
        arrays = []
        for field in self.schema:
            array = columns[field.name]()
            if array.type != field.type:
                array = array.cast(field.type)
            if not field.nullable and array.null_count:
                raise SchemaError(
                    f"column {field.name!r} is declared non-nullable but "
                    f"{array.null_count} record(s) have a null {field.name}"
                )
            arrays.append(array)
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _timestamp_types(self) -> pa.Array:
        kinds = {kind for kind, _ in self._ts_types}
        if len(kinds) <= 1:  # the usual case: one topic-wide setting
            return pa.repeat(pa.scalar(kinds.pop() if kinds else 0, pa.int32()), len(self))
        return pa.array([kind for kind, run in self._ts_types for _ in range(run)], pa.int32())


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """Zigzag varint at ``pos`` (the 1- and 2-byte cases are inlined by the hot loop)."""
    shift = 0
    value = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")


def _decode_records(
    data: bytes,
    count: int,
    base_offset: int,
    first_ts: int,
    lo: int,
    hi: int,
    keys: list[bytes | None],
    values: list[bytes | None],
    offsets: list[int],
    timestamps: list[int],
    headers: _Headers | None,
) -> None:
    """Parse ``count`` records of an uncompressed records blob, keeping offset deltas in [lo, hi).

    The hot loop: varints inlined for the 1- and 2-byte cases, each record's length used to jump to
    the next record (headers are not even walked unless wanted), results appended to lists.
    """
    varint = _varint
    add_key, add_value = keys.append, values.append
    add_offset, add_ts = offsets.append, timestamps.append
    pos = 0
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:
            b = (b & 0x7F) | (data[pos + 1] << 7)
            length = (b >> 1) ^ -(b & 1)
            pos += 2
        else:
            length, pos = varint(data, pos)
        end = pos + length
        pos += 1  # record attributes: unused by Kafka
        b = data[pos]
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:
            b = (b & 0x7F) | (data[pos + 1] << 7)
            ts_delta = (b >> 1) ^ -(b & 1)
            pos += 2
        else:
            ts_delta, pos = varint(data, pos)
        b = data[pos]
        if b < 0x80:
            delta = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:
            b = (b & 0x7F) | (data[pos + 1] << 7)
            delta = (b >> 1) ^ -(b & 1)
            pos += 2
        else:
            delta, pos = varint(data, pos)
        if delta < lo or delta >= hi:
            pos = end
            continue
        b = data[pos]
        if b < 0x80:
            size = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:
            b = (b & 0x7F) | (data[pos + 1] << 7)
            size = (b >> 1) ^ -(b & 1)
            pos += 2
        else:
            size, pos = varint(data, pos)
        if size < 0:
            key = None
        else:
            key = data[pos : pos + size]
            pos += size
        b = data[pos]
        if b < 0x80:
            size = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:
            b = (b & 0x7F) | (data[pos + 1] << 7)
            size = (b >> 1) ^ -(b & 1)
            pos += 2
        else:
            size, pos = varint(data, pos)
        if size < 0:
            value = None
        else:
            value = data[pos : pos + size]
            pos += size
        if headers is not None:
            if data[pos] == 0:  # no headers: the common case, kept inline
                headers.counts.append(0)
                pos += 1
            else:
                pos = _read_headers(data, pos, headers)
            if pos != end:
                raise CorruptRecordError(f"record at delta {delta} is {pos - end:+d} bytes off")
        elif pos > end:
            raise CorruptRecordError(f"record at delta {delta} overruns its length {length}")
        pos = end
        add_key(key)
        add_value(value)
        add_offset(base_offset + delta)
        add_ts(first_ts + ts_delta)
    if pos != len(data):
        raise CorruptRecordError(
            f"{len(data) - pos} bytes left over after the batch's {count} records"
        )


def _read_headers(data: bytes, pos: int, headers: _Headers) -> int:
    count, pos = _varint(data, pos)
    if count < 0:
        raise CorruptRecordError(f"negative record header count {count}")
    headers.counts.append(count)
    add_name, add_value = headers.names.append, headers.values.append
    for _ in range(count):
        size, pos = _varint(data, pos)
        if size < 0:
            raise CorruptRecordError("record header key is null")
        add_name(data[pos : pos + size].decode("utf-8"))
        pos += size
        size, pos = _varint(data, pos)
        if size < 0:
            add_value(None)
        else:
            add_value(data[pos : pos + size])
            pos += size
    return pos
