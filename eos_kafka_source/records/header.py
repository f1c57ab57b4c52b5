"""Framing of Kafka v2 record batches: split a Fetch response's records bytes into batches.

Runs on executors (source readers) and in tests. Network-free and allocation-light: a batch
is handed on as a ``memoryview`` into the response buffer, never copied here.

Batch layout (``DefaultRecordBatch.java``)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 | crc uint32
    | attributes int16 | lastOffsetDelta int32 | firstTimestamp int64 | maxTimestamp int64
    | producerId int64 | producerEpoch int16 | baseSequence int32 | recordCount int32 | records

The CRC-32C covers attributes..end. Attributes: bits 0-2 compression, bit 3 timestamp type,
bit 4 transactional, bit 5 control. Also here, shared by decode and encode: the codec table,
:func:`decompress` and the switch that forces the pure-Python codec.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from eos_kafka_source.errors import CorruptRecordError

try:
    from crc32c import crc32c
except ImportError:  # pragma: no cover - the crc32c package is a hard dependency
    from kafka.record._crc32c import crc as crc32c  # type: ignore[no-redef]

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61: where the records (or the compressed blob) start
PREFIX_SIZE = 12  # baseOffset + batchLength: batchLength counts the bytes after these
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_DELTA_OFFSET = 23

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

#: Set to "1" to force the pure-Python codec (debugging, or to compare the two paths).
PURE_ENV = "EOSKAFKA_PURE_CODEC"

CODEC_NAMES = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
#: What to install for each codec (aiokafka's helpers use cramjam; kafka-python's use these).
CODEC_PACKAGES = {
    2: "cramjam (or python-snappy)",
    3: "cramjam (or lz4)",
    4: "cramjam (or zstandard)",
}

_PREFIX = struct.Struct(">qi")
_CONTROL_KEY = struct.Struct(">hh")
_LAST_DELTA = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed 61-byte header of one v2 record batch, with ``last_offset`` resolved."""

    base_offset: int
    last_offset: int
    batch_length: int
    partition_leader_epoch: int
    attributes: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    first_timestamp: int
    max_timestamp: int

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def compression(self) -> int:
        """0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime (per record), 1 LogAppendTime (the broker's ``max_timestamp``)."""
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


def iter_batches(
    buf: bytes | bytearray | memoryview, *, check_crc: bool = False
) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Yield (header, whole-batch view) for each complete v2 batch in a Fetch response's records.

    A truncated trailing batch (brokers cut the last batch at ``max_bytes``) is ignored: the
    caller resumes from the last complete batch's ``next_offset``. A magic byte other than 2
    raises even on a truncated batch, so an old-format topic never looks merely empty.

    >>> from eos_kafka_source.records import encode_batch
    >>> [h.last_offset for h, _ in iter_batches(encode_batch([None], [b"v"], 0, base_offset=7))]
    [7]
    """
    view = memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    size = len(view)
    pos = 0
    unpack_prefix = _PREFIX.unpack_from
    unpack_header = HEADER.unpack_from
    while size - pos >= PREFIX_SIZE:
        base_offset, length = unpack_prefix(view, pos)
        if size - pos > MAGIC_OFFSET:
            magic = view[pos + MAGIC_OFFSET]
            if magic != 2:
                raise CorruptRecordError(
                    f"record batch at offset {base_offset} uses message format magic v{magic}; "
                    "legacy v0/v1 message formats are unsupported (Kafka >= 0.11 writes v2; "
                    "a topic with message.format.version < 0.11 must be rewritten)"
                )
        if length < HEADER_SIZE - PREFIX_SIZE:
            raise CorruptRecordError(
                f"record batch at offset {base_offset} declares length {length}, "
                f"shorter than the {HEADER_SIZE}-byte v2 batch header"
            )
        end = pos + PREFIX_SIZE + length
        if end > size:
            return  # truncated trailing batch
        (
            _, _, leader_epoch, _, crc, attributes, last_delta,
            first_ts, max_ts, producer_id, producer_epoch, base_sequence, count,
        ) = unpack_header(view, pos)  # fmt: skip
        if check_crc and crc32c(view[pos + ATTRIBUTES_OFFSET : end]) != crc:
            raise CorruptRecordError(
                f"CRC-32C mismatch in record batch at offset {base_offset} "
                f"(stored {crc:#010x}); the batch is corrupt on the wire or on disk"
            )
        header = BatchHeader(
            base_offset, base_offset + last_delta, end - pos, leader_epoch, attributes,
            producer_id, producer_epoch, base_sequence, count, first_ts, max_ts,
        )  # fmt: skip
        yield header, view[pos:end]
        pos = end


def last_offset(buf: bytes | bytearray | memoryview) -> int | None:
    """The last offset of the last complete v2 batch in ``buf`` (None when there is none):
    what :func:`iter_batches`' last header says, with the same checks, reading only each
    batch's prefix, magic and last offset delta (a confirmation steps over thousands of
    batches to find where an answer ends).

    >>> from eos_kafka_source.records import encode_batch
    >>> last_offset(encode_batch([None, None], [b"v", b"w"], 0, base_offset=7) + b"cut")
    8
    """
    view = memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    size = len(view)
    pos = 0
    last: int | None = None
    unpack_prefix = _PREFIX.unpack_from
    unpack_delta = _LAST_DELTA.unpack_from
    while size - pos >= PREFIX_SIZE:
        base_offset, length = unpack_prefix(view, pos)
        if size - pos > MAGIC_OFFSET and view[pos + MAGIC_OFFSET] != 2:
            next(iter_batches(view[pos:]))  # raises iter_batches' own error
        if length < HEADER_SIZE - PREFIX_SIZE:
            next(iter_batches(view[pos:]))
        end = pos + PREFIX_SIZE + length
        if end > size:
            break  # truncated trailing batch
        last = base_offset + unpack_delta(view, pos + LAST_DELTA_OFFSET)[0]
        pos = end
    return last


def control_is_commit(batch: memoryview | bytes) -> bool:
    """For a control batch: True for a COMMIT marker (type 1), False for ABORT (type 0).

    Brokers write markers uncompressed with one record whose key is (version int16, type
    int16). Any other type (KRaft-internal ones never appear in user topics) raises rather
    than guessing, because a wrong guess would drop or expose a transaction's records.
    """
    view = memoryview(batch)
    attributes = struct.unpack_from(">h", view, ATTRIBUTES_OFFSET)[0]
    if not attributes & CONTROL_MASK:
        raise CorruptRecordError("control_is_commit() called on a batch that is not a control")
    if attributes & COMPRESSION_MASK:
        raise CorruptRecordError("control batch is compressed; brokers never write that")
    try:
        pos = _skip_varint(view, HEADER_SIZE)  # record length
        pos = _skip_varint(view, pos + 1)  # record attributes, timestamp delta
        pos = _skip_varint(view, pos)  # offset delta
        key_len, pos = _read_varint(view, pos)
    except IndexError as err:
        raise CorruptRecordError("control batch ends inside its record") from err
    if key_len < _CONTROL_KEY.size or pos + key_len > len(view):
        raise CorruptRecordError(f"control record key of {key_len} bytes is too short")
    _version, control_type = _CONTROL_KEY.unpack_from(view, pos)
    if control_type == CONTROL_COMMIT:
        return True
    if control_type == CONTROL_ABORT:
        return False
    raise CorruptRecordError(f"unknown control record type {control_type} in a user topic")


def _skip_varint(view: memoryview, pos: int) -> int:
    while view[pos] & 0x80:
        pos += 1
    return pos + 1


def _read_varint(view: memoryview | bytes, pos: int) -> tuple[int, int]:
    """Zigzag varint (Kafka's ``varint``/``varlong``) at ``pos``: (value, next position)."""
    shift = 0
    value = 0
    while True:
        byte = view[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")


def pure_forced() -> bool:
    return os.environ.get(PURE_ENV, "") == "1"


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """Inflate a compressed batch's records blob; names the pip package when a codec is missing."""
    if codec == 1:
        try:
            return zlib.decompress(data, wbits=31)
        except zlib.error:
            try:  # multi-member gzip streams
                return gzip.decompress(data)
            except (OSError, EOFError, zlib.error) as err:
                raise CorruptRecordError(f"gzip batch does not inflate: {err}") from err
    name = CODEC_NAMES.get(codec)
    if name is None:
        raise CorruptRecordError(f"unknown compression codec id {codec} in record batch")
    import kafka.codec as kcodec

    modules: list[Any] = [kcodec]
    try:
        import aiokafka.codec as acodec

        modules.append(acodec)
    except ImportError:  # pragma: no cover - aiokafka is a dependency
        pass
    for mod in modules:
        if getattr(mod, f"has_{name}")():
            try:
                return bytes(getattr(mod, f"{name}_decode")(bytes(data)))
            except Exception as err:  # codec libraries raise their own error types
                raise CorruptRecordError(f"{name} batch does not decompress: {err}") from err
    raise CorruptRecordError(
        f"record batch is {name}-compressed but no {name} library is installed; "
        f"run `pip install {CODEC_PACKAGES[codec]}` on the driver and every executor"
    )
