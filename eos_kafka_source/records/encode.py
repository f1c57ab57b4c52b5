"""Encode v2 record batches: what a Produce request carries, and synthetic logs for tests.

Runs on executors inside the sink's writer, so speed matters (one batch per partition per
flush). aiokafka's compiled builder (``_fast``) is used when it imports; a pure-Python
encoder otherwise or when ``EOSKAFKA_PURE_CODEC=1`` / ``pure=True``. Both produce
byte-identical record sections; compression is applied here, after either.
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Sequence
from itertools import count as _count
from itertools import repeat as _repeat

from eos_kafka_source.errors import ConfigError
from eos_kafka_source.records import _fast
from eos_kafka_source.records.header import (
    ATTRIBUTES_OFFSET,
    CODEC_NAMES,
    CODEC_PACKAGES,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_MASK,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    PREFIX_SIZE,
    TRANSACTIONAL_MASK,
    crc32c,
    pure_forced,
)

#: Java's default gzip level; 9 (kafka-python's) costs ~3x the CPU for ~2% smaller batches.
GZIP_LEVEL = 6
#: Java's default lz4 level. At this level the Java producer uses lz4's *fast* compressor
#: (``Lz4BlockOutputStream``: ``fastCompressor()`` for the default, ``highCompressor(level)``
#: otherwise); lz4 frame level 9 is HC, ~4x the CPU for ~6% smaller batches.
LZ4_LEVEL = 9
#: Java's (and zstd's) default zstd level.
ZSTD_LEVEL = 3
#: What the Java producer writes; brokers overwrite it on append.
NO_PARTITION_LEADER_EPOCH = -1

_CRC = struct.Struct(">I")
_BASE_OFFSET = struct.Struct(">q")
_CONTROL_VALUE = struct.Struct(">hi")  # version, coordinator epoch
_NO_HEADERS: list[tuple[str, bytes | None]] = []


def _zigzag(value: int) -> bytes:
    """Kafka varint/varlong: zigzag, then base-128 little-endian groups."""
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_CACHED = 1 << 14
#: Encoded varints of 0.._CACHED-1: lengths and offset deltas hit this table, not _zigzag.
_ZZ = [_zigzag(i) for i in range(_CACHED)]


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress a records section at ``level`` (None: the Java producer's default, with its
    meaning: ``kafka.compression.<codec>.level``); raises ConfigError naming the package for
    a missing codec."""
    if codec == 1:
        gz_level = GZIP_LEVEL if level is None or level == -1 else level
        return gzip.compress(data, compresslevel=gz_level, mtime=0)
    name = CODEC_NAMES.get(codec)
    if name is None:
        raise ConfigError(f"unknown compression codec id {codec} (0 none, 1 gzip, 2 snappy, "
                          "3 lz4, 4 zstd)")  # fmt: skip
    try:
        import aiokafka.codec as acodec
    except ImportError:  # pragma: no cover - aiokafka is a dependency
        acodec = None
    if acodec is not None and getattr(acodec, f"has_{name}")():
        encode = getattr(acodec, f"{name}_encode")
        if codec == 3:  # cramjam's lz4 frame: level 0 is lz4's fast compressor
            return bytes(encode(bytes(data), level=0 if level in (None, LZ4_LEVEL) else level))
        if codec == 4:
            return bytes(encode(bytes(data), level=ZSTD_LEVEL if level is None else level))
        return bytes(encode(bytes(data)))
    import kafka.codec as kcodec

    if getattr(kcodec, f"has_{name}")():  # its encoders take no level: the codec's default
        return bytes(getattr(kcodec, f"{name}_encode")(bytes(data)))
    raise ConfigError(f"{name} compression needs `pip install {CODEC_PACKAGES[codec]}`")


def encode_batch(
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    timestamps_ms: Sequence[int] | int,
    headers: Sequence[list[tuple[str, bytes | None]]] | None = None,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    base_offset: int = 0,
    compression: int = 0,
    compression_level: int | None = None,
    pure: bool | None = None,
) -> bytes:
    """One v2 record batch (what a Produce request carries), CRC-32C over attributes..end.

    Offsets deltas run 0..n-1 from ``base_offset`` (brokers reassign it on append). An int
    ``timestamps_ms`` stamps every record. ``pure`` forces the pure-Python encoder.

    >>> batch = encode_batch([None], [b"v"], 1_700_000_000_000, producer_id=7,
    ...                      producer_epoch=0, base_sequence=0, transactional=True)
    >>> len(batch)
    69
    """
    n = len(keys)
    if not n:
        raise ValueError("a record batch needs at least one record")
    if len(values) != n or (headers is not None and len(headers) != n):
        raise ValueError("keys, values and headers must have the same length")
    if not isinstance(timestamps_ms, int) and len(timestamps_ms) != n:
        raise ValueError("timestamps_ms must be an int or have one entry per record")
    if transactional and producer_id < 0:
        raise ValueError("a transactional batch needs a producer id")
    if pure is None:
        pure = pure_forced()
    if not pure and _fast.AVAILABLE:
        built = _fast.encode_records(
            keys, values, timestamps_ms, headers,
            producer_id, producer_epoch, base_sequence, transactional,
        )  # fmt: skip
        if not compression:
            _BASE_OFFSET.pack_into(built, 0, base_offset)
            return bytes(built)
        fields = HEADER.unpack_from(built, 0)
        first_ts, max_ts = fields[7], fields[8]
        records: bytes | memoryview = memoryview(built)[HEADER_SIZE:]
    else:
        if isinstance(timestamps_ms, int):
            first_ts = max_ts = timestamps_ms
        else:
            first_ts, max_ts = timestamps_ms[0], max(timestamps_ms)
        records = _encode_records(keys, values, timestamps_ms, headers, first_ts)
    attributes = TRANSACTIONAL_MASK if transactional else 0
    if compression:
        records = compress(compression, records, compression_level)
        attributes |= compression
    return frame_batch(
        base_offset, attributes, n, first_ts, max_ts,
        producer_id, producer_epoch, base_sequence, records,
    )  # fmt: skip


def encode_control_batch(
    *,
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    base_offset: int,
    timestamp_ms: int,
    coordinator_epoch: int = 0,
) -> bytes:
    """A COMMIT/ABORT marker batch (attributes transactional|control), for synthetic test logs.

    Brokers write these on EndTxn; the record key is (version 0, type) and the value is
    (version 0, coordinator epoch).
    """
    key = struct.pack(">hh", 0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _CONTROL_VALUE.pack(0, coordinator_epoch)
    records = _encode_records([key], [value], timestamp_ms, None, timestamp_ms)
    return frame_batch(
        base_offset, TRANSACTIONAL_MASK | CONTROL_MASK, 1, timestamp_ms, timestamp_ms,
        producer_id, producer_epoch, -1, records,
    )  # fmt: skip


def frame_batch(
    base_offset: int,
    attributes: int,
    n: int,
    first_ts: int,
    max_ts: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    records: bytes | bytearray | memoryview,
) -> bytes:
    """Prepend the 61-byte header to a records section and set the CRC-32C.

    The one framing routine of both encoders; ``records`` is any bytes-like section
    (a memoryview of an Arrow buffer included), copied once, into the result.
    """
    header = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        header, 0, base_offset, HEADER_SIZE + len(records) - PREFIX_SIZE,
        NO_PARTITION_LEADER_EPOCH, 2, 0, attributes, n - 1, first_ts, max_ts, producer_id,
        producer_epoch, base_sequence, n,
    )  # fmt: skip
    if _CRC_CONTINUES:
        crc = crc32c(records, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    else:  # pragma: no cover - only without the crc32c package
        crc = crc32c(bytes(header[ATTRIBUTES_OFFSET:]) + bytes(records))
    _CRC.pack_into(header, CRC_OFFSET, crc)
    return b"".join((header, records))


def _crc_continues() -> bool:
    """Whether ``crc32c(data, value)`` continues a CRC (the crc32c package does)."""
    try:
        return crc32c(b"b", crc32c(b"a")) == crc32c(b"ab")  # type: ignore[call-arg]
    except TypeError:  # pragma: no cover - kafka-python's pure fallback takes one argument
        return False


_CRC_CONTINUES = _crc_continues()


def _encode_records(
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    timestamps_ms: Sequence[int] | int,
    headers: Sequence[list[tuple[str, bytes | None]]] | None,
    first_ts: int,
) -> bytes:
    """The uncompressed records section: per record a varint length then the body."""
    zz, table, cached = _zigzag, _ZZ, _CACHED
    join = b"".join
    parts: list[bytes] = []
    add = parts.append
    stamps = _repeat(first_ts) if isinstance(timestamps_ms, int) else timestamps_ms
    hdrs = _repeat(None) if headers is None else headers
    for offset, key, value, ts, rec_headers in zip(_count(), keys, values, stamps, hdrs):
        delta = ts - first_ts
        if key is None:
            key_len, key = b"\x01", b""
        else:
            size = len(key)
            key_len = table[size] if size < cached else zz(size)
        if value is None:
            value_len, value = b"\x01", b""
        else:
            size = len(value)
            value_len = table[size] if size < cached else zz(size)
        body = join(
            (
                b"\x00",  # record attributes
                table[delta] if 0 <= delta < cached else zz(delta),
                table[offset] if offset < cached else zz(offset),
                key_len,
                key,
                value_len,
                value,
                _encode_headers(rec_headers) if rec_headers else b"\x00",
            )
        )
        size = len(body)
        add(table[size] if size < cached else zz(size))
        add(body)
    return join(parts)


def _encode_headers(headers: list[tuple[str, bytes | None]]) -> bytes:
    table, cached = _ZZ, _CACHED
    out = [table[len(headers)] if len(headers) < cached else _zigzag(len(headers))]
    for name, value in headers:
        raw = name.encode("utf-8")
        out.append(table[len(raw)] if len(raw) < cached else _zigzag(len(raw)))
        out.append(raw)
        if value is None:
            out.append(b"\x01")
        else:
            out.append(table[len(value)] if len(value) < cached else _zigzag(len(value)))
            out.append(value)
    return b"".join(out)
