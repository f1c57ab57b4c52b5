"""Avro's binary encoding of a whole Arrow column at once, with numpy and Arrow compute.

A record's encoding is its fields' encodings back to back, so a record column encodes as
one binary column per part (a field's union branch index, a string's length, its bytes,
a number's varint) joined row by row in one ``binary_join_element_wise`` over the whole
record, nested records flattened into it: ints and longs as zigzag varints built with
numpy, floats and doubles as their little-endian bytes, strings and bytes as a varint
length then the bytes, a nullable field (a two-branch union with null) as its branch index
then the value. A part is null in the rows that do not write it (a null field's value, the
fields of a null nested record) and the join skips it there. No Python runs per record.

It covers records of primitives, enums, fixed, logical types and nullable fields; a schema
with arrays, maps or other unions is written by fastavro record by record (avro.py). A
value that does not fit (a null where the schema has none, an enum symbol it lacks, a fixed
of the wrong size) makes :func:`encode` return None, and avro.py then writes the column
record by record, which names the row and the field.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .avro_types import Node

_EMPTY = pa.scalar(b"", pa.binary())
_SIMPLE = {"boolean", "int", "long", "float", "double", "string", "bytes", "enum", "fixed",
           "date", "timestamp-millis", "timestamp-micros", "local-timestamp-millis",
           "local-timestamp-micros", "decimal", "time-micros"}
#: The smallest zigzag value that needs k + 2 bytes, at index k.
_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], np.uint64)
#: The continuation bits of a varint of s bytes (s <= 8) laid in a little-endian word.
_CONTINUE = np.array([sum(0x80 << (8 * j) for j in range(s - 1)) if s else 0
                      for s in range(9)], np.uint64)
_SEVEN = np.uint64(0x7F)

# A part of a record's encoding: a binary column (null where the row does not write it) or
# one value every row writes.
Part: TypeAlias = pa.Array | pa.Scalar


def supported(node: Node) -> bool:
    """Whether :func:`encode` can write columns of this schema."""
    if node.union_size and not (node.union_size == 2 and node.null_index >= 0):
        return False
    if node.kind == "record":
        return all(supported(c) for _, c in node.children)
    return node.kind in _SIMPLE


def _bytes_column(lengths: np.ndarray, data: np.ndarray, validity: pa.Buffer | None
                  ) -> pa.Array:
    offsets = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return _binary_of(offsets, data, validity)


def _same_width(n: int, width: int, data: np.ndarray, validity: pa.Buffer | None
                ) -> pa.Array:
    """A binary column of ``n`` values of ``width`` bytes each."""
    return _binary_of(np.arange(0, (n + 1) * width, width, dtype=np.int32), data, validity)


def _binary_of(offsets: np.ndarray, data: np.ndarray, validity: pa.Buffer | None
               ) -> pa.Array:
    return pa.Array.from_buffers(pa.binary(), len(offsets) - 1, [
        validity, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))])


def _mask(arr: pa.Array) -> np.ndarray | None:
    """The rows of ``arr`` that are not null; None when all are not."""
    if not arr.null_count:
        return None
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _both(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    return a if b is None else a & b


def _bitmap(live: np.ndarray | None) -> pa.Buffer | None:
    return None if live is None else pa.array(live, pa.bool_()).buffers()[1]


def varints(values: np.ndarray, validity: pa.Buffer | None = None) -> pa.Array:
    """Avro's zigzag varint of each int64, as a binary column."""
    v = values.astype(np.int64, copy=False)
    z = ((v << 1) ^ (v >> 63)).view(np.uint64)
    n = len(z)
    width = max(1, (int(z.max()).bit_length() + 6) // 7) if n else 1
    if width == 1:
        return _same_width(n, 1, z.astype(np.uint8), validity)
    size = np.searchsorted(_LIMITS[:width - 1], z, side="right") + 1
    if width <= 8:  # each varint built in one little-endian word, 7 bits a byte
        word = z & _SEVEN
        for b in range(1, width):
            word |= ((z >> np.uint64(7 * b)) & _SEVEN) << np.uint64(8 * b)
        word |= _CONTINUE[size]
        grid = word.astype("<u8", copy=False).view(np.uint8).reshape(n, 8)[:, :width]
    else:
        k = np.arange(width, dtype=np.uint64)
        grid = ((z[:, None] >> (np.uint64(7) * k)) & _SEVEN).astype(np.uint8)
        grid |= ((np.arange(width)[None, :] < size[:, None] - 1) * 0x80).astype(np.uint8)
    if int(size.min()) == width:
        return _same_width(n, width, grid.reshape(-1), validity)
    return _bytes_column(size, grid[np.arange(width)[None, :] < size[:, None]], validity)


def _numbers(arr: pa.Array, dtype: type) -> np.ndarray:
    """The values of a numeric column (nulls as 0: their encodings are masked anyway)."""
    filled = arr.fill_null(0) if arr.null_count else arr
    return np.asarray(filled.to_numpy(zero_copy_only=False), dtype=dtype)


def _fixed_width(arr: pa.Array, dtype: type, width: int, live: np.ndarray | None
                 ) -> pa.Array:
    values = _numbers(arr, dtype).astype(np.dtype(dtype).newbyteorder("<"), copy=False)
    return _same_width(len(arr), width, values.view(np.uint8), _bitmap(live))


def _binary(arr: pa.Array, live: np.ndarray | None) -> tuple[pa.Array, np.ndarray]:
    """``arr``'s bytes as a binary column null where not ``live`` (no copy), and each
    row's length."""
    binary = arr if pa.types.is_binary(arr.type) else arr.cast(pa.binary())
    buffers = binary.buffers()
    offsets = np.frombuffer(buffers[1], np.int32, count=len(binary) + 1,
                            offset=binary.offset * 4)
    if live is None and not binary.null_count:
        return binary, np.diff(offsets)
    if live is None:
        live = _mask(binary)
    part = pa.Array.from_buffers(pa.binary(), len(binary), [
        _bitmap(live), pa.py_buffer(offsets), buffers[2]])
    return part, np.diff(offsets)


def _value(arr: pa.Array, node: Node, live: np.ndarray | None, parts: list[Part]) -> bool:
    """Appends the parts of each ``live`` row's value (every row's when None); False where
    a live row's value cannot be written."""
    kind = node.kind
    if kind == "record":
        return all(_field(arr.field(i), child, live, parts)
                   for i, (_, child) in enumerate(node.children))
    if kind == "boolean":
        parts.append(_fixed_width(arr.cast(pa.uint8()), np.uint8, 1, live))
    elif kind in ("int", "long", "date", "time-micros") or kind.startswith(
            ("timestamp", "local-timestamp")):
        parts.append(varints(_numbers(arr, np.int64), _bitmap(live)))
    elif kind == "float":
        parts.append(_fixed_width(arr, np.float32, 4, live))
    elif kind == "double":
        parts.append(_fixed_width(arr, np.float64, 8, live))
    elif kind in ("string", "bytes") or (kind == "decimal" and node.size is None):
        part, lengths = _binary(arr, live)
        parts += [varints(lengths, part.buffers()[0]), part]
    elif kind == "enum":  # a symbol the enum lacks is null in the index
        index = pc.index_in(arr, value_set=pa.array(node.symbols, pa.string()))
        found = _mask(index)
        if found is not None and not (found if live is None else found | ~live).all():
            return False
        parts.append(varints(_numbers(index, np.int64), _bitmap(live)))
    elif kind in ("fixed", "decimal"):
        part, lengths = _binary(arr, live)
        wrong = lengths != node.size
        if (wrong if live is None else wrong & live).any():
            return False
        parts.append(part)
    else:
        return False
    return True


def _field(arr: pa.Array, node: Node, live: np.ndarray | None, parts: list[Part]) -> bool:
    """A field's parts: a nullable one's union branch index first."""
    valid = _mask(arr)
    present = _both(live, valid)
    if node.null_index >= 0:
        value_branch = 2 * (1 - node.null_index)  # zigzag varints of 0 and 1: 0x00, 0x02
        if present is None:
            parts.append(pa.scalar(bytes([value_branch]), pa.binary()))
        else:
            branch = np.where(present, value_branch, 2 * node.null_index).astype(np.uint8)
            parts.append(_same_width(len(arr), 1, branch, _bitmap(live)))
    elif valid is not None and not (valid if live is None else valid | ~live).all():
        return False  # a null where the schema has none
    return _value(arr, node, present, parts)


def encode(raw: pa.Array, node: Node, header: bytes) -> pa.Array | None:
    """The framed payloads of a raw column (avro_arrow.to_raw), null where a row is null;
    None when some value cannot be written column-wise (the caller then writes row by
    row, which finds and names it)."""
    live = _mask(raw)
    parts: list[Part] = []
    if not _field(raw, node, live, parts):
        return None
    n = len(raw)
    # The header is in every row, never null: a row whose parts are all null is dropped
    # from the output by the skipping join (pyarrow 26), which would shift every row after.
    head = np.tile(np.frombuffer(header, np.uint8), n)
    parts.insert(0, _same_width(n, len(header), head, None))
    joined = pc.binary_join_element_wise(*parts, _EMPTY, null_handling="skip")
    if len(joined) != n:
        return None
    return joined if live is None else pc.if_else(pa.array(live), joined, None)
