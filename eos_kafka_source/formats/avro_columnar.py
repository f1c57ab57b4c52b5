"""Avro's binary encoding of a whole Arrow column at once, with numpy and Arrow compute.

A record's encoding is its fields' encodings back to back, so a record column encodes as
one binary column per field joined row by row (``binary_join_element_wise``): ints and
longs as zigzag varints built with numpy, floats and doubles as their little-endian bytes,
strings and bytes as a varint length then the bytes, a nullable field (a two-branch union
with null) as its branch index then the value. No Python runs per record.

It covers records of primitives, enums, fixed, logical types and nullable fields; a schema
with arrays, maps or other unions is written by fastavro record by record (avro.py). A
value that does not fit (a null where the schema has none, an enum symbol it lacks, a fixed
of the wrong size) makes :func:`encode` return None, and avro.py then writes the column
record by record, which names the row and the field.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .avro_types import Node

_EMPTY = pa.scalar(b"", pa.binary())
_SIMPLE = {"boolean", "int", "long", "float", "double", "string", "bytes", "enum", "fixed",
           "date", "timestamp-millis", "timestamp-micros", "local-timestamp-millis",
           "local-timestamp-micros", "decimal", "time-micros"}


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
    return pa.Array.from_buffers(pa.binary(), len(lengths), [
        validity, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))])


def _validity(arr: pa.Array) -> pa.Buffer | None:
    if not arr.null_count:
        return None
    return pa.array(arr.is_valid().to_numpy(zero_copy_only=False)).buffers()[1]


def varints(values: np.ndarray, validity: pa.Buffer | None = None) -> pa.Array:
    """Avro's zigzag varint of each int64, as a binary column."""
    v = values.astype(np.int64, copy=False)
    z = ((v << 1) ^ (v >> 63)).view(np.uint64)
    size = np.ones(len(z), np.int64)
    width = 1
    while width < 10:
        longer = z >= np.uint64(1 << (7 * width))
        if not longer.any():
            break
        size += longer
        width += 1
    if width == 1:
        return _bytes_column(size, z.astype(np.uint8), validity)
    k = np.arange(width, dtype=np.uint64)
    groups = ((z[:, None] >> (np.uint64(7) * k)) & np.uint64(0x7F)).astype(np.uint8)
    position = np.arange(width)[None, :]
    groups |= ((position < size[:, None] - 1) * 0x80).astype(np.uint8)
    return _bytes_column(size, groups[position < size[:, None]], validity)


def _numbers(arr: pa.Array, dtype: type) -> np.ndarray:
    """The values of a numeric column (nulls as 0: their encodings are masked anyway)."""
    filled = arr.fill_null(0) if arr.null_count else arr
    return np.asarray(filled.to_numpy(zero_copy_only=False), dtype=dtype)


def _fixed_width(arr: pa.Array, dtype: type, width: int) -> pa.Array:
    values = _numbers(arr, dtype).astype(np.dtype(dtype).newbyteorder("<"), copy=False)
    return _bytes_column(np.full(len(arr), width, np.int64), values.view(np.uint8),
                         _validity(arr))


def _length_prefixed(arr: pa.Array) -> pa.Array:
    binary = arr.cast(pa.binary())
    lengths = pc.binary_length(binary)
    return pc.binary_join_element_wise(varints(_numbers(lengths, np.int64), _validity(arr)),
                                       binary, _EMPTY)


def _encode(arr: pa.Array, node: Node) -> pa.Array | None:
    """Each row's encoding, null where the value is null or cannot be written (nulls
    propagate up to the record; :func:`encode` checks only the rows it writes)."""
    kind = node.kind
    if kind == "record":
        parts = []
        for i, (_, child) in enumerate(node.children):
            part = _field(arr.field(i), child)
            if part is None:
                return None
            parts.append(part)
        if not parts:
            return pa.array([b""] * len(arr), pa.binary())
        joined = pc.binary_join_element_wise(*parts, _EMPTY)
        return joined if not arr.null_count else pc.if_else(arr.is_valid(), joined, None)
    if kind == "boolean":
        return _fixed_width(arr.cast(pa.uint8()), np.uint8, 1)
    if kind in ("int", "long", "date", "time-micros") or kind.startswith(
            ("timestamp", "local-timestamp")):
        return varints(_numbers(arr, np.int64), _validity(arr))
    if kind == "float":
        return _fixed_width(arr, np.float32, 4)
    if kind == "double":
        return _fixed_width(arr, np.float64, 8)
    if kind in ("string", "bytes") or (kind == "decimal" and node.size is None):
        return _length_prefixed(arr)
    if kind == "enum":  # a symbol the enum lacks is null, so the row goes record by record
        index = pc.index_in(arr, value_set=pa.array(node.symbols, pa.string()))
        return varints(_numbers(index, np.int64), _validity(index))
    if kind in ("fixed", "decimal"):  # so is a fixed of the wrong size
        binary = arr.cast(pa.binary())
        return pc.if_else(pc.equal(pc.binary_length(binary), node.size), binary, None)
    return None


def _field(arr: pa.Array, node: Node) -> pa.Array | None:
    """A field's encoding: a nullable one with its union branch index first."""
    value = _encode(arr, node)
    if value is None or node.null_index < 0:
        return value
    null_branch = bytes(varints(np.array([node.null_index]))[0].as_py())
    value_branch = bytes(varints(np.array([1 - node.null_index]))[0].as_py())
    tagged = pc.binary_join_element_wise(pa.scalar(value_branch, pa.binary()), value, _EMPTY)
    if not arr.null_count:
        return tagged
    return pc.if_else(arr.is_null(), pa.scalar(null_branch, pa.binary()), tagged)


def encode(raw: pa.Array, node: Node, header: bytes) -> pa.Array | None:
    """The framed payloads of a raw column (avro_arrow.to_raw), null where a row is null;
    None when some value cannot be written column-wise (the caller then writes row by
    row, which finds and names it)."""
    body = _field(raw, node)
    if body is None:
        return None
    if raw.null_count:
        body = pc.if_else(raw.is_valid(), body, pa.scalar(None, pa.binary()))
    if body.null_count != raw.null_count:
        return None  # a null where the schema allows none
    return pc.binary_join_element_wise(pa.scalar(header, pa.binary()), body, _EMPTY)
