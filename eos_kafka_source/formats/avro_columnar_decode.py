"""Avro's binary decoding of a whole column at once, with numpy: no Python per record.

Every record of a batch is read field by field in step: one numpy pass reads field 1 of
all records (a varint, 8 bytes of a double, a length and its bytes), giving where field 2
starts in each, and so on. It covers what avro_columnar.py encodes (records of primitives,
enums, fixed, logical types, nullable fields), read with the schema they were written
with (no resolution). Anything unexpected (a byte past a record's end, a bad varint, an
enum index out of range, invalid UTF-8) makes :func:`decode` return None, and avro.py reads
the batch record by record with fastavro, which names the row and the reason.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .avro_types import Node


class _Fallback(Exception):
    """A record the column-wise reader does not take (fastavro will say why)."""


_MAX_VARINT = 10


def _varints(data: np.ndarray, pos: np.ndarray, end: np.ndarray) -> tuple[np.ndarray,
                                                                          np.ndarray]:
    """The zigzag varint at each ``pos`` and the position after it."""
    first = data[pos]
    if not (first & 0x80).any():  # every one a single byte
        new = pos + 1
        value = first.astype(np.int64)
    else:
        window = data[pos[:, None] + np.arange(_MAX_VARINT)]
        last = (window & 0x80) == 0
        if not last.any(axis=1).all():
            raise _Fallback
        size = last.argmax(axis=1) + 1
        groups = (window & 0x7F).astype(np.uint64)
        shifts = np.uint64(7) * np.arange(_MAX_VARINT, dtype=np.uint64)
        used = np.arange(_MAX_VARINT)[None, :] < size[:, None]
        unsigned = ((groups << shifts) * used).sum(axis=1, dtype=np.uint64)
        value = unsigned.view(np.int64)
        new = pos + size
    if (new > end).any():
        raise _Fallback
    unsigned = value.view(np.uint64)
    return ((unsigned >> np.uint64(1)) ^ (np.uint64(0) - (unsigned & np.uint64(1)))
            ).view(np.int64), new


def _validity(valid: np.ndarray) -> pa.Buffer | None:
    return None if valid.all() else pa.array(valid).buffers()[1]


def _gather(data: np.ndarray, pos: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.uint8)
    starts = np.repeat(pos, lengths)
    within = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return data[starts + within]


def _bytes(data: np.ndarray, pos: np.ndarray, end: np.ndarray, lengths: np.ndarray,
           kind: pa.DataType) -> tuple[pa.Array, np.ndarray]:
    new = pos + lengths
    if (lengths < 0).any() or (new > end).any():
        raise _Fallback
    offsets = np.zeros(len(pos) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise _Fallback
    arr = pa.Array.from_buffers(kind, len(pos), [None, pa.py_buffer(offsets.astype(np.int32)),
                                                 pa.py_buffer(_gather(data, pos, lengths))])
    if kind == pa.string():
        try:
            arr.validate(full=True)  # UTF-8
        except pa.ArrowInvalid as exc:
            raise _Fallback from exc
    return arr, new


def _fixed_width(data: np.ndarray, pos: np.ndarray, end: np.ndarray, dtype: type,
                 width: int) -> tuple[pa.Array, np.ndarray]:
    new = pos + width
    if (new > end).any():
        raise _Fallback
    raw = data[pos[:, None] + np.arange(width)].copy().view(np.dtype(dtype).newbyteorder("<"))
    return pa.array(raw.reshape(-1).astype(dtype, copy=False)), new


def _value(data: np.ndarray, pos: np.ndarray, end: np.ndarray, node: Node
           ) -> tuple[pa.Array, np.ndarray]:
    """A non-null value per row, as raw_type(node) holds it."""
    kind = node.kind
    if kind == "record":
        children = []
        for _, child in node.children:
            arr, pos = _field(data, pos, end, child)
            children.append(arr)
        if not children:
            return pa.array([{}] * len(pos), pa.struct([])), pos
        fields = [pa.field(n, a.type, c.nullable)
                  for (n, c), a in zip(node.children, children, strict=True)]
        return pa.StructArray.from_arrays(children, fields=fields), pos
    if kind == "boolean":
        new = pos + 1
        if (new > end).any():
            raise _Fallback
        byte = data[pos]
        if (byte > 1).any():
            raise _Fallback
        return pa.array(byte.astype(bool)), new
    if kind in ("int", "date"):
        value, new = _varints(data, pos, end)
        if ((value < -2**31) | (value >= 2**31)).any():
            raise _Fallback
        return pa.array(value.astype(np.int32)), new
    if kind in ("long", "time-micros") or kind.startswith(("timestamp", "local-timestamp")):
        value, new = _varints(data, pos, end)
        return pa.array(value), new
    if kind == "float":
        return _fixed_width(data, pos, end, np.float32, 4)
    if kind == "double":
        return _fixed_width(data, pos, end, np.float64, 8)
    if kind in ("string", "bytes") or (kind == "decimal" and node.size is None):
        lengths, pos = _varints(data, pos, end)
        return _bytes(data, pos, end, lengths, pa.string() if kind == "string" else
                      pa.binary())
    if kind == "enum":
        index, new = _varints(data, pos, end)
        if ((index < 0) | (index >= len(node.symbols))).any():
            raise _Fallback
        return pa.array(node.symbols, pa.string()).take(pa.array(index)), new
    if kind in ("fixed", "decimal"):
        assert node.size is not None
        return _bytes(data, pos, end, np.full(len(pos), node.size, np.int64), pa.binary())
    raise _Fallback


def _field(data: np.ndarray, pos: np.ndarray, end: np.ndarray, node: Node
           ) -> tuple[pa.Array, np.ndarray]:
    """A field's values: a nullable one's union branch first, then its value where set."""
    if node.null_index < 0:
        return _value(data, pos, end, node)
    branch, pos = _varints(data, pos, end)
    if ((branch != 0) & (branch != 1)).any():
        raise _Fallback
    present = branch != node.null_index
    if present.all():
        return _value(data, pos, end, node)
    rows = np.flatnonzero(present)
    values, moved = _value(data, pos[rows], end[rows], node)
    pos = pos.copy()
    pos[rows] = moved
    return spread(values, present), pos


def spread(values: pa.Array, present: np.ndarray) -> pa.Array:
    """``values`` at the rows where ``present``, null elsewhere. A null struct keeps values
    in its children (as ``pa.array`` leaves them): Spark refuses a null in a non-nullable
    field even under a null parent, which ``take`` with null indices would put there."""
    rows = np.flatnonzero(present)
    if len(rows) == len(present):
        return values
    if not len(rows):
        return pa.array([None] * len(present), values.type)
    index = np.zeros(len(present), np.int64)
    index[rows] = np.arange(len(rows))
    taken = values.take(pa.array(index))
    if pa.types.is_struct(values.type):
        return pa.StructArray.from_arrays([taken.field(i) for i in range(taken.type.num_fields)],
                                          fields=list(values.type), mask=pa.array(~present))
    if taken.null_count:
        return pc.if_else(pa.array(present), taken, pa.scalar(None, values.type))
    return pa.Array.from_buffers(values.type, len(present), [
        pa.array(present).buffers()[1], *taken.buffers()[1:]])


def decode(data: np.ndarray, starts: np.ndarray, ends: np.ndarray, node: Node
           ) -> pa.Array | None:
    """The records at ``data[starts[i]:ends[i]]`` as ``raw_type(node)``; None when any
    does not read this way (the caller then reads record by record)."""
    padded = np.concatenate([data, np.zeros(_MAX_VARINT, np.uint8)])
    try:
        values, _ = _field(padded, starts.astype(np.int64), ends.astype(np.int64), node)
    except _Fallback:
        return None
    return values
