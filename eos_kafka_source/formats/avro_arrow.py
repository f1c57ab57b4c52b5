"""Between fastavro's values and Arrow columns, column-wise where it can be.

fastavro reads and writes schemas stripped of logical types (avro_types.py), so a date is an
int, a timestamp a long and a decimal its two's-complement bytes. :func:`to_final` turns such
a "raw" column into the Arrow type spark-avro gives it (a view, a multiply, a numpy pass over
the bytes), :func:`to_raw` the reverse for encoding. Only unions Spark shows as
``struct<member0, ...>`` need Python per value (:func:`reading_fix`, :func:`writing_fix`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .avro_branches import member
from .avro_types import Node

Fix = Callable[[Any], Any]

_MILLIS = ("timestamp-millis", "local-timestamp-millis")
_MICROS = ("timestamp-micros", "local-timestamp-micros")
_NANOS = ("time-micros",)  # Spark's TIME: nanoseconds in Arrow, microseconds in Avro
_RAW = {"date": pa.int32(), "decimal": pa.binary()}


def _changes(node: Node) -> bool:
    return any(n.kind in _RAW or n.kind in _MILLIS or n.kind in _MICROS or n.kind in _NANOS
               for n in node.walk())


def raw_type(node: Node) -> pa.DataType:
    """The Arrow type of fastavro's values for ``node`` (logical types not applied)."""
    if node.kind in _RAW:
        return _RAW[node.kind]
    if node.kind in _MILLIS or node.kind in _MICROS or node.kind in _NANOS:
        return pa.int64()
    if not _changes(node):
        return node.arrow
    if node.kind in ("record", "union"):
        return pa.struct([pa.field(n, raw_type(c), c.nullable) for n, c in node.children])
    child = node.children[0][1]
    if node.kind == "array":
        return pa.list_(pa.field("element", raw_type(child), child.nullable))
    return pa.map_(pa.string(), pa.field("value", raw_type(child), child.nullable))


def _mask(arr: pa.Array) -> pa.Array | None:
    return arr.is_null() if arr.null_count else None


def _rebuild(arr: pa.Array, node: Node, convert: Callable[[pa.Array, Node], pa.Array],
             target: pa.DataType | None) -> pa.Array:
    """``arr`` (struct, list or map) with its children converted, typed ``target`` (or as
    the converted children make it)."""
    if node.kind in ("record", "union"):
        children = [convert(arr.field(i), c) for i, (_, c) in enumerate(node.children)]
        if target is None:
            return pa.StructArray.from_arrays(children, names=[n for n, _ in node.children],
                                              mask=_mask(arr))
        return pa.StructArray.from_arrays(children, fields=list(target), mask=_mask(arr))
    child = node.children[0][1]
    if node.kind == "array":
        return pa.ListArray.from_arrays(arr.offsets, convert(arr.values, child), type=target,
                                        mask=_mask(arr))
    return pa.MapArray.from_arrays(arr.offsets, arr.keys, convert(arr.items, child),
                                   type=target, mask=_mask(arr))


def to_final(arr: pa.Array, node: Node) -> pa.Array:
    """fastavro's raw column (as ``pa.array`` built it) as spark-avro's type.

    Raises ValueError when a value does not fit (a decimal beyond its precision, a
    timestamp beyond Spark's range)."""
    if not _changes(node):
        return arr
    kind = node.kind
    if kind == "date":
        return arr.view(pa.date32())
    if kind in _MILLIS or kind in _NANOS:
        try:
            arr = pc.multiply_checked(arr, 1000)
        except pa.ArrowInvalid as exc:
            raise ValueError(f"a {kind} value is beyond Spark's range") from exc
        return arr.view(node.arrow)
    if kind in _MICROS:
        return arr.view(node.arrow)
    if kind == "decimal":
        return _decimal_from_bytes(arr, node.arrow)
    return _rebuild(arr, node, to_final, node.arrow)


def to_raw(arr: pa.Array, node: Node) -> pa.Array:
    """A column of ``node.arrow`` (any field nullability) as the raw values fastavro
    writes with stripped schemas."""
    if not _changes(node):
        return arr
    kind = node.kind
    if kind == "date":
        return arr.view(pa.int32())
    if kind in _MILLIS or kind in _NANOS:
        return _floor_div(arr.view(pa.int64()), 1000)
    if kind in _MICROS:
        return arr.view(pa.int64())
    if kind == "decimal":
        return _decimal_to_bytes(arr, node.size)
    return _rebuild(arr, node, to_raw, None)


def _floor_div(arr: pa.Array, by: int) -> pa.Array:
    """Spark's ``Math.floorDiv`` (micros to millis), column-wise."""
    # count and offset: a child of a null list may have a buffer that is not whole int64s
    values = np.frombuffer(arr.buffers()[1], np.int64, count=len(arr), offset=arr.offset * 8)
    out = np.floor_divide(values, by)
    return pa.Array.from_buffers(pa.int64(), len(arr), [_validity(arr), pa.py_buffer(out)])


def _decimal_from_bytes(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """Big-endian two's-complement bytes (Avro's decimal) to decimal128, with numpy."""
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], np.int32)[arr.offset:arr.offset + n + 1]
    data = (np.frombuffer(arr.buffers()[2], np.uint8) if arr.buffers()[2] is not None
            else np.zeros(0, np.uint8))
    start = offsets[:-1].astype(np.int64)
    lens = np.diff(offsets).astype(np.int64)
    if arr.null_count:
        lens = np.where(arr.is_valid().to_numpy(zero_copy_only=False), lens, 0)
    if (lens > 16).any():  # a fixed wider than 16 bytes: its value may still fit
        start, lens = _narrowed(data, start, lens, target)
    out = np.zeros((n, 16), np.uint8)
    has = lens > 0
    first = data[np.where(has, start, 0)] if len(data) else np.zeros(n, np.uint8)
    out[has & (first >= 0x80)] = 0xFF
    rows = np.repeat(np.arange(n), lens)
    within = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    out[rows, lens[rows] - 1 - within] = data[start[rows] + within]
    result = pa.Array.from_buffers(target, n, [arr.buffers()[0] if arr.offset == 0 else
                                               _validity(arr), pa.py_buffer(out)])
    try:
        result.validate(full=True)
    except pa.ArrowInvalid as exc:
        raise ValueError(f"a decimal does not fit {target} ({exc})") from exc
    return result


def _narrowed(data: np.ndarray, start: np.ndarray, lens: np.ndarray, target: pa.DataType
              ) -> tuple[np.ndarray, np.ndarray]:
    """Values longer than 16 bytes cut to their last 16, where the bytes cut are only the
    sign's (as Java's ``BigInteger`` reads them); ValueError where a value needs more."""
    wide = np.flatnonzero(lens > 16)
    cut = lens[wide] - 16
    width = int(cut.max()) + 1
    window = data[start[wide, None] + np.minimum(np.arange(width)[None, :], cut[:, None])]
    used = np.arange(width)[None, :] < cut[:, None]
    sign = np.where(window[np.arange(len(wide)), cut] >= 0x80, 0xFF, 0x00)
    if not ((window == sign[:, None]) | ~used).all():
        raise ValueError(f"a decimal of more than 16 bytes does not fit {target}")
    start, lens = start.copy(), lens.copy()
    start[wide] += cut
    lens[wide] = 16
    return start, lens


def _validity(arr: pa.Array) -> pa.Buffer | None:
    if not arr.null_count:
        return None
    return pa.array(arr.is_valid().to_numpy(zero_copy_only=False)).buffers()[1]


def _decimal_to_bytes(arr: pa.Array, size: int | None) -> pa.Array:
    """decimal128 to Avro's bytes: minimal (Java's ``BigInteger.toByteArray``) or
    sign-extended to a fixed ``size``."""
    n = len(arr)
    le = np.frombuffer(arr.buffers()[1], np.uint8)[arr.offset * 16:(arr.offset + n) * 16]
    be = le.reshape(n, 16)[:, ::-1]
    if size is not None and size > 16:  # sign-extended past 16 bytes, as Java's toFixed
        sign = np.where(be[:, :1] >= 0x80, 0xFF, 0x00).astype(np.uint8)
        be = np.concatenate([np.repeat(sign, size - 16, axis=1), be], axis=1)
        lead = np.zeros(n, np.int64)
    elif size is not None:
        lead = np.full(n, 16 - size, np.int64)
    else:
        redundant = (((be[:, :-1] == 0) & (be[:, 1:] < 0x80))
                     | ((be[:, :-1] == 0xFF) & (be[:, 1:] >= 0x80)))
        lead = np.cumprod(redundant, axis=1).sum(axis=1)
    width = be.shape[1]
    lens = width - lead
    if arr.null_count:
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
        lens = np.where(valid, lens, 0)
        lead = np.where(valid, lead, width)
    keep = np.arange(width)[None, :] >= lead[:, None]
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lens, out=offsets[1:])
    data = np.ascontiguousarray(be)[keep]
    return pa.Array.from_buffers(pa.binary(), n, [_validity(arr), pa.py_buffer(offsets),
                                                  pa.py_buffer(data)])


# --- unions as struct<member0, ...>: per value, only where the schema has them ----------

_PY_BRANCH = {bool: ("boolean",), int: ("int", "long"), float: ("float", "double"),
              str: ("string",), bytes: ("bytes",), list: ("array",), dict: ("map",)}


def _member(node: Node, value: Any) -> int:
    """Which member of a union-as-struct a fastavro value was read as."""
    if isinstance(value, tuple):  # fastavro's (name, value) for a named branch
        name = value[0]
        for k, names in enumerate(node.branches):
            if name in names:
                return k
    for k, names in enumerate(node.branches):
        if any(t in names for t in _PY_BRANCH.get(type(value), ())):
            return k
    raise ValueError(f"a union value of type {type(value).__name__} matches no branch")


def tags_needed(node: Node) -> bool:
    """Whether reading needs fastavro's ``return_named_type`` (a union-as-struct with a
    named branch: records, enums and fixed are told apart only by name)."""
    return any(n.kind == "union" and n.has_named for n in node.walk())


def reading_fix(node: Node, tagged: bool) -> Fix | None:
    """A function turning one fastavro value into what ``pa.array`` takes for
    ``raw_type(node)``, or None when the values need nothing."""
    untag = tagged and node.has_named
    if node.kind == "union":
        fixes = [reading_fix(c, tagged) for _, c in node.children]
        names = [n for n, _ in node.children]

        def union(value: Any) -> Any:
            wrapped = member(value[1] if isinstance(value, tuple) else value)
            if wrapped is not None:  # a primitive branch (avro_branches.py)
                k, value = wrapped
            else:
                k = _member(node, value)
                if isinstance(value, tuple):
                    value = value[1]
            fix = fixes[k]
            return {names[k]: value if fix is None or value is None else fix(value)}
        return union
    inner: Fix | None = None
    if node.kind == "record":
        fields = [(n, f) for n, c in node.children
                  if (f := reading_fix(c, tagged)) is not None]
        if fields:
            def record(value: dict[str, Any]) -> dict[str, Any]:
                for name, fix in fields:
                    v = value[name]
                    if v is not None:
                        value[name] = fix(v)
                return value
            inner = record
    elif node.kind in ("array", "map"):
        fix = reading_fix(node.children[0][1], tagged)
        if fix is not None:
            f = fix
            if node.kind == "array":
                inner = lambda v: [None if x is None else f(x) for x in v]  # noqa: E731
            else:
                inner = lambda v: {k: None if x is None else f(x)  # noqa: E731
                                   for k, x in v.items()}
    if not untag:
        return inner
    body = inner

    def untagged(value: Any) -> Any:
        if isinstance(value, tuple):
            value = value[1]
        return value if body is None else body(value)
    return untagged


def writing_fix(node: Node) -> Fix | None:
    """A function turning one ``to_pylist`` value into what fastavro writes (unions as
    tagged values, maps as dicts), or None when it writes the value as it is.

    A record, array or map that is the one non-null branch of a union and holds a tagged
    union is tagged too: fastavro would pick its branch by validating the value, and its
    validation does not know a tag naming a map, array or logical-type branch."""
    fix = _writing_fix(node)
    if (fix is None or node.kind not in ("record", "array", "map") or node.union_size < 2
            or not any(n.kind == "union" for n in node.walk())):
        return fix
    tag = node.name if node.kind == "record" else node.kind
    inner = fix
    return lambda v: (tag, inner(v))


def _writing_fix(node: Node) -> Fix | None:
    if node.kind == "union":
        fixes = [writing_fix(c) for _, c in node.children]
        names = [n for n, _ in node.children]
        tags = [b[0] for b in node.branches]

        def union(value: dict[str, Any]) -> Any:
            for k, name in enumerate(names):
                v = value.get(name)
                if v is not None:
                    fix = fixes[k]
                    return (tags[k], v if fix is None else fix(v))
            return None
        return union
    if node.kind == "record":
        fields = [(n, f) for n, c in node.children if (f := writing_fix(c)) is not None]
        if not fields:
            return None

        def record(value: dict[str, Any]) -> dict[str, Any]:
            for name, fix in fields:
                v = value.get(name)
                if v is not None:
                    value[name] = fix(v)
            return value
        return record
    if node.kind in ("array", "map"):
        item = writing_fix(node.children[0][1])
        if node.kind == "array":
            return None if item is None else _each(item)
        # to_pylist gives a map as (key, value) pairs, fastavro takes a dict
        return dict if item is None else _each_value(item)
    return None


def _each(fix: Fix) -> Fix:
    return lambda v: [None if x is None else fix(x) for x in v]


def _each_value(fix: Fix) -> Fix:
    return lambda v: {k: None if x is None else fix(x) for k, x in v}
