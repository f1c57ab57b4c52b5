"""Confluent's wire format: split a binary column into schema ids and bodies, build headers.

A framed payload is a zero "magic" byte, the schema id as 4 big-endian bytes, then (Protobuf
only) the message indexes, then the encoded record. :func:`split` reads the headers of a
whole column at once with numpy over Arrow's buffers, so a batch costs no Python call per
row; rows that are null or not in the wire format are marked, not raised, and the codec
decides what that means.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..errors import PayloadDecodeError

MAGIC = 0
HEADER_SIZE = 5

#: Row states in :attr:`Framed.state`.
OK, NULL, TOO_SHORT, BAD_MAGIC = 0, 1, 2, 3

WHY = {
    TOO_SHORT: "is not in Confluent's wire format (shorter than its 5-byte header)",
    BAD_MAGIC: "is not in Confluent's wire format (its first byte is not 0)",
}


@dataclass(frozen=True)
class Framed:
    """The headers of one binary column, one entry per row.

    ``data`` is the column's value buffer (all rows' bytes back to back); row ``i``'s
    body (after the 5-byte header) is ``data[body_start[i]:end[i]]``. ``schema_ids`` is
    valid only where ``state == OK``.
    """

    data: np.ndarray  # uint8
    state: np.ndarray  # uint8, OK / NULL / TOO_SHORT / BAD_MAGIC
    schema_ids: np.ndarray  # int64
    body_start: np.ndarray  # int64
    end: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.state)

    def body(self, i: int) -> bytes:
        return self.data[self.body_start[i]:self.end[i]].tobytes()

    def id_array(self) -> pa.Array:
        """The schema ids as an Arrow int32 column, null where a row has no header."""
        ok = self.state == OK
        return pa.array(self.schema_ids.astype(np.int32), pa.int32(), mask=~ok)


def _binary(payloads: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(payloads, pa.ChunkedArray):
        payloads = payloads.combine_chunks()
    if pa.types.is_large_binary(payloads.type):
        return payloads
    if not pa.types.is_binary(payloads.type):
        payloads = payloads.cast(pa.binary())
    return payloads


def split(payloads: pa.Array | pa.ChunkedArray) -> Framed:
    """Read the 5-byte header of every row of a binary column, column-wise."""
    arr = _binary(payloads)
    n = len(arr)
    offset_type = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    _, offsets_buf, data_buf = arr.buffers()
    if offsets_buf is None or n == 0:
        empty = np.zeros(0, np.int64)
        return Framed(np.zeros(0, np.uint8), np.zeros(0, np.uint8), empty, empty, empty)
    offsets: np.ndarray = np.frombuffer(offsets_buf, offset_type)[
        arr.offset:arr.offset + n + 1].astype(np.int64)
    data = (np.frombuffer(data_buf, np.uint8) if data_buf is not None
            else np.zeros(0, np.uint8))
    start, end = offsets[:-1], offsets[1:]
    length = end - start
    valid = (np.ones(n, bool) if arr.null_count == 0
             else arr.is_valid().to_numpy(zero_copy_only=False))
    long_enough = valid & (length >= HEADER_SIZE)
    # Index header bytes only where a row has them (0 stands in elsewhere, then is masked).
    at = np.where(long_enough, start, 0)
    if len(data) < HEADER_SIZE:
        data_padded = np.concatenate([data, np.zeros(HEADER_SIZE, np.uint8)])
    else:
        data_padded = data
    head = np.stack([data_padded[at + k] for k in range(HEADER_SIZE)]).astype(np.int64)
    ids = (head[1] << 24) | (head[2] << 16) | (head[3] << 8) | head[4]
    ids = np.where(ids >= 1 << 31, ids - (1 << 32), ids)  # Java's int: signed
    state = np.full(n, OK, np.uint8)
    state[long_enough & (head[0] != MAGIC)] = BAD_MAGIC
    state[valid & ~long_enough] = TOO_SHORT
    state[~valid] = NULL
    ids = np.where(state == OK, ids, 0)
    return Framed(data, state, ids, start + HEADER_SIZE, end)


def fail_fast(kind: str, errors: list[str | None], framed: Framed,
              where: Callable[[int], str]) -> None:
    """FAILFAST's error for the first row with a reason in ``errors`` (``kind``: the
    format's name), naming where the row is, its schema id and why."""
    for i, why in enumerate(errors):
        if why is not None:
            sid = (f"schema id {int(framed.schema_ids[i])}" if framed.state[i] == OK
                   else "no schema id")
            raise PayloadDecodeError(
                f"the {kind} value at {where(i)} ({sid}) does not decode: {why}. Fix the "
                "producer, or read with mode PERMISSIVE to keep such rows as null with their "
                "reason")


def header(schema_id: int, message_indexes: list[int] | None = None) -> bytes:
    """The bytes before an encoded record: magic byte, schema id and (Protobuf) the
    message indexes."""
    out = struct.pack(">bi", MAGIC, schema_id)
    if message_indexes is not None:
        out += write_message_indexes(message_indexes)
    return out


# --- Protobuf's message indexes --------------------------------------------------------
# Which message of the .proto file a record is: the path of indexes from the file's top-level
# messages down to nested ones. Confluent writes a zigzag varint count then one zigzag varint
# per index, except that [0] (the first top-level message, by far the most common) is the
# single byte 0.


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def _write_varint(out: bytearray, value: int) -> None:
    value = _zigzag(value) & 0xFFFFFFFFFFFFFFFF
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _read_varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(data):
            raise ValueError("the message indexes end before their last byte")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("a message index varint is longer than 10 bytes")
    return (result >> 1) ^ -(result & 1), pos


def write_message_indexes(indexes: list[int]) -> bytes:
    """Confluent's encoding of a message-index path (``[0]`` is the single byte 0)."""
    if list(indexes) == [0]:
        return b"\x00"
    out = bytearray()
    _write_varint(out, len(indexes))
    for index in indexes:
        _write_varint(out, index)
    return bytes(out)


def read_message_indexes(data: bytes | memoryview, pos: int = 0) -> tuple[list[int], int]:
    """The message-index path at ``data[pos:]`` and the position after it.

    Raises ValueError when the bytes end early or a count is negative or absurd.
    """
    count, pos = _read_varint(data, pos)
    if count == 0:
        return [0], pos
    if count < 0 or count > len(data) - pos:
        raise ValueError(f"a message-index count of {count} does not fit the payload")
    indexes = []
    for _ in range(count):
        index, pos = _read_varint(data, pos)
        indexes.append(index)
    return indexes, pos


def split_message_indexes(framed: Framed) -> tuple[list[list[int] | None], np.ndarray]:
    """Each OK row's message indexes and where its record starts (after them).

    The common ``[0]`` (a single 0 byte) is found column-wise; only other rows are parsed
    one by one. A row whose indexes do not parse gets None (its start is left unchanged).
    """
    n = len(framed)
    starts = framed.body_start.copy()
    indexes: list[list[int] | None] = [None] * n
    ok = framed.state == OK
    has_byte = ok & (framed.body_start < framed.end)
    at = np.where(has_byte, framed.body_start, 0)
    first = framed.data[at] if len(framed.data) else np.zeros(n, np.uint8)
    zero = has_byte & (first == 0)
    starts[zero] += 1
    for i in np.flatnonzero(zero):
        indexes[i] = [0]
    for i in np.flatnonzero(ok & ~zero):
        body = framed.data[framed.body_start[i]:framed.end[i]].tobytes()
        try:
            path, used = read_message_indexes(body)
        except ValueError:
            continue
        indexes[i] = path
        starts[i] += used
    return indexes, starts
