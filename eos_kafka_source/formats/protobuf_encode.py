"""Protobuf encoding: a struct column to messages, field by field by name.

Timestamps and durations are cast to int64 microseconds first (``to_pylist`` then yields
ints, not datetimes), each row becomes the keyword arguments of the message class (upb
builds and serializes it in C), and a row that does not fit is retried field by field so the
error names the field.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from google.protobuf import descriptor
from google.protobuf.message import EncodeError

from ..errors import PayloadEncodeError
from ..gcpause import gc_paused
from .protobuf_schema import DURATION, TIMESTAMP, is_map
from .schemas import RegisteredSchema

_F = descriptor.FieldDescriptor


def _rebuilt(arrow: pa.DataType, leaf: Callable[[pa.DataType], pa.DataType]) -> pa.DataType:
    """``arrow`` with ``leaf`` applied to every type below its structs, lists and maps."""
    if pa.types.is_struct(arrow):
        return pa.struct([f.with_type(_rebuilt(f.type, leaf)) for f in arrow])
    if pa.types.is_list(arrow) or pa.types.is_large_list(arrow):
        return pa.list_(arrow.value_field.with_type(_rebuilt(arrow.value_type, leaf)))
    if pa.types.is_map(arrow):
        return pa.map_(_rebuilt(arrow.key_type, leaf), _rebuilt(arrow.item_type, leaf))
    return leaf(arrow)


def _plain(arrow: pa.DataType) -> pa.DataType:
    """``arrow`` with timestamps and durations as int64 microseconds (cheap to_pylist)."""
    return _rebuilt(arrow, lambda t: pa.int64()
                    if pa.types.is_timestamp(t) or pa.types.is_duration(t) else t)


def _micros(arrow: pa.DataType) -> pa.DataType:
    """The same type at microsecond unit (what _plain's int64 counts)."""
    def leaf(t: pa.DataType) -> pa.DataType:
        if pa.types.is_timestamp(t):
            return pa.timestamp("us", t.tz)
        return pa.duration("us") if pa.types.is_duration(t) else t
    return _rebuilt(arrow, leaf)


def _split_micros(us: int) -> dict[str, int]:
    seconds, rest = divmod(us, 1_000_000)
    return {"seconds": seconds, "nanos": rest * 1000}


def _split_duration(us: int) -> dict[str, int]:
    sign = -1 if us < 0 else 1
    seconds, rest = divmod(abs(us), 1_000_000)
    return {"seconds": sign * seconds, "nanos": sign * rest * 1000}


Convert = Callable[[Any], Any]


def _value_converter(field: descriptor.FieldDescriptor, arrow: pa.DataType,
                     path: str) -> Convert | None:
    """How one (non-repeated) value of ``arrow`` becomes what the message constructor
    takes for ``field``; None when it takes the value as is."""
    if field.type == _F.TYPE_MESSAGE:
        name = field.message_type.full_name
        if name == TIMESTAMP and pa.types.is_timestamp(arrow):
            return _split_micros
        if name == DURATION and pa.types.is_duration(arrow):
            return _split_duration
        if not pa.types.is_struct(arrow):
            raise PayloadEncodeError(f"field {path} is a message {name} in the schema but "
                                     f"{arrow} in the column; make it a struct")
        return _row_converter(field.message_type, arrow, path)
    if pa.types.is_struct(arrow) or pa.types.is_list(arrow) or pa.types.is_map(arrow):
        raise PayloadEncodeError(f"field {path} is a scalar in the schema but {arrow} in the "
                                 "column")
    if pa.types.is_decimal(arrow):
        return int
    if field.type == _F.TYPE_ENUM and not field.enum_type.is_closed:
        return _open_enum(field.enum_type)
    return None


def _open_enum(enum: descriptor.EnumDescriptor) -> Convert:
    """A proto3 (open) enum's value: a name, or the digits a number without one reads as
    (docs/formats.md), which the message takes back as that number."""
    names = enum.values_by_name

    def value(v: Any) -> Any:
        if v in names or not isinstance(v, str):
            return v
        try:
            return int(v)
        except ValueError:
            return v  # not a number either: the message refuses it, naming the field
    return value


def _field_converter(field: descriptor.FieldDescriptor, arrow: pa.DataType,
                     path: str) -> Convert | None:
    if is_map(field):
        if not pa.types.is_map(arrow):
            raise PayloadEncodeError(f"field {path} is a map in the schema but {arrow} in "
                                     "the column")
        entry = field.message_type
        key = _value_converter(entry.fields_by_name["key"], arrow.key_type, path)
        value = _value_converter(entry.fields_by_name["value"], arrow.item_type, path)

        def to_map(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
            return {(key(k) if key else k): (value(v) if value and v is not None else v)
                    for k, v in pairs}
        return to_map
    if field.is_repeated:
        if not (pa.types.is_list(arrow) or pa.types.is_large_list(arrow)):
            raise PayloadEncodeError(f"field {path} is repeated in the schema but {arrow} in "
                                     "the column; make it an array")
        element = _value_converter(field, arrow.value_type, path)
        if element is None:
            return None
        return lambda items: [None if v is None else element(v) for v in items]
    return _value_converter(field, arrow, path)


def _row_converter(desc: descriptor.Descriptor, struct: pa.StructType,
                   path: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    plan: list[tuple[str, Convert | None]] = []
    for arrow_field in struct:
        where = f"{path}.{arrow_field.name}" if path else arrow_field.name
        proto_field = desc.fields_by_name.get(arrow_field.name)
        if proto_field is None:
            raise PayloadEncodeError(
                f"field {where} of the column is not in message {desc.full_name}; drop it "
                "or write with a schema that has it")
        plan.append((arrow_field.name, _field_converter(proto_field, arrow_field.type, where)))

    def convert(row: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for name, conv in plan:
            value = row[name]
            if value is not None:
                out[name] = value if conv is None else conv(value)
        return out
    return convert


@dataclass
class ProtobufEncoder:
    """Encodes a struct column to Protobuf records (see :class:`.schemas.PayloadEncoder`)."""

    schema: RegisteredSchema
    message_class: Any
    header: bytes
    _plans: dict[pa.DataType, Callable[[dict[str, Any]], dict[str, Any]]] = field(
        default_factory=dict)

    def encode(self, values: pa.Array, column: str) -> pa.Array:
        with gc_paused():
            return self._encode(values, column)

    def _encode(self, values: pa.Array, column: str) -> pa.Array:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if not pa.types.is_struct(values.type):
            raise PayloadEncodeError(f"column {column!r} is {values.type}; Protobuf writes a "
                                     "struct whose fields are the message's")
        values = values.cast(_micros(values.type))
        plan = self._plans.get(values.type)
        if plan is None:
            try:
                plan = _row_converter(self.message_class.DESCRIPTOR, values.type, "")
            except PayloadEncodeError as exc:
                raise PayloadEncodeError(f"column {column!r}: {exc.message}") from None
            self._plans[values.type] = plan
        rows = values.cast(_plain(values.type)).to_pylist()
        cls, header = self.message_class, self.header
        out: list[bytes | None] = []
        for i, row in enumerate(rows):
            if row is None:
                out.append(None)
                continue
            kwargs = plan(row)
            try:
                out.append(header + cls(**kwargs).SerializeToString())
            except (ValueError, TypeError, EncodeError) as exc:
                raise PayloadEncodeError(_encode_failure(cls, kwargs, column, i, exc)) from None
        return pa.array(out, pa.binary())


def _encode_failure(cls: Any, kwargs: dict[str, Any], column: str, row: int,
                    exc: Exception) -> str:
    for name, value in kwargs.items():
        try:
            cls(**{name: value})
        except (ValueError, TypeError) as field_exc:
            return (f"column {column!r} row {row}: field {name} value {value!r} does not fit "
                    f"{cls.DESCRIPTOR.full_name}: {field_exc}")
    return f"column {column!r} row {row} does not fit {cls.DESCRIPTOR.full_name}: {exc}"
