"""Comparing Arrow columns from two readers: time types as their integers (Spark's Arrow
timestamps carry the session's zone, eoskafka's UTC; a date past year 9999 has no Python
form), maps as dicts (spark-avro reads a map through a Java HashMap: its order is not the
bytes'), then the values by :func:`values.same`."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from tests.formats.explorer.values import first_difference


def plain_type(t: pa.DataType) -> pa.DataType:
    """``t`` with every time type as the integer that holds it, every field nullable (a
    reader may put a null where its type says none: that is compared, not refused here)."""
    if pa.types.is_timestamp(t) or pa.types.is_duration(t) or pa.types.is_time64(t):
        return pa.int64()
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return pa.int32()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, plain_type(f.type)) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(pa.field(t.value_field.name, plain_type(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(plain_type(t.key_type)),
                       pa.field(t.item_field.name, plain_type(t.item_type)))
    return t


def plain_rows(arr: pa.Array) -> list[Any]:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    target = plain_type(arr.type)
    if not target.equals(arr.type, check_metadata=True) or repr(target) != repr(arr.type):
        arr = arr.cast(target)
    return arr.to_pylist(maps_as_pydicts="strict")  # a map's order is no reader's promise


def row_difference(ours: list[Any], theirs: list[Any]) -> str | None:
    """The first row and place where two readers' rows differ, or None."""
    if len(ours) != len(theirs):
        return f"{len(ours)} rows != {len(theirs)}"
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        found = first_difference(a, b, f"row {i}")
        if found:
            return found
    return None
