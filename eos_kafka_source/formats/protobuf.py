"""Protobuf payloads in Confluent's wire format: the codec (see :class:`.schemas.Codec`).

Decoding parses each record with its writer's message class (upb, in C), then builds the
Arrow column field by field across all rows of a writer schema (one ``pa.array`` per leaf,
no dict per row). Reader and writer fields are matched by number, as Protobuf matches them:
a writer field the reader lacks is ignored, a reader field the writer lacks reads as an
absent field, a field whose type differs is cast (int32 to int64, say) or, where no cast
exists, fails the rows of that writer schema. A field with presence (a message, proto3
``optional``, a oneof member, proto2) is null when unset; one without (a proto3 scalar)
reads as its default, as every Protobuf runtime gives it. Encoding is in :mod:`.protobuf_encode`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from operator import attrgetter
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf import descriptor
from google.protobuf.message import DecodeError

from ..errors import ConfigError
from ..gcpause import gc_paused
from . import framing
from .protobuf_encode import ProtobufEncoder
from .protobuf_schema import (
    DURATION,
    SCALAR_ARROW,
    TIMESTAMP,
    ProtoFile,
    is_map,
    load,
    schema_for,
    struct_type,
)
from .schemas import FAILFAST, PERMISSIVE, Decoded, RegisteredSchema, SchemaLookup
from .writers import writer_or_reason

__all__ = ["arrow_type", "decoder", "encoder", "schema_for"]

_F = descriptor.FieldDescriptor


def arrow_type(schema: RegisteredSchema, lookup: SchemaLookup, *,
               message: str | None = None) -> pa.DataType:
    """The Arrow struct of the schema's ``message`` (None: the file's first message)."""
    desc, _ = load(schema, lookup).named(message)
    return struct_type(desc)


# --- decode --------------------------------------------------------------------------------

class _Unreadable(Exception):
    """A writer schema or message that cannot be read as the reader's type (every row of
    it fails with this reason)."""


def _timestamps(msgs: list[Any]) -> list[int | None]:
    return [None if m is None else m.seconds * 1_000_000 + m.nanos // 1000 for m in msgs]


def _durations(msgs: list[Any]) -> list[int | None]:
    return [None if m is None else m.seconds * 1_000_000 + int(m.nanos / 1000) for m in msgs]


def _array(values: list[Any], writer_type: pa.DataType, reader_type: pa.DataType,
           path: str) -> pa.Array:
    arr = pa.array(values, writer_type)
    if writer_type != reader_type:
        try:
            arr = arr.cast(reader_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise _Unreadable(f"field {path} is {writer_type} in the writer schema and "
                              f"{reader_type} in the reader's: {exc}") from None
    return arr


def _elements(msgs_or_values: list[Any], field: descriptor.FieldDescriptor,
              reader: pa.DataType, path: str, reader_msg: Any) -> pa.Array:
    """One Arrow array of ``field``'s values (not its repetition): scalars, enum names or
    sub-messages, None for null. ``reader_msg``: the reader's message type of a message
    field (its defaults fill fields the writer lacks)."""
    if field.type == _F.TYPE_MESSAGE:
        name = field.message_type.full_name
        if name == TIMESTAMP:
            return _array(_timestamps(msgs_or_values), pa.timestamp("us", "UTC"), reader,
                          path)
        if name == DURATION:
            return _array(_durations(msgs_or_values), pa.duration("us"), reader, path)
        if not pa.types.is_struct(reader):
            raise _Unreadable(f"field {path} is a message in the writer schema and "
                              f"{reader} in the reader's")
        return _struct(msgs_or_values, field.message_type, reader, path, reader_msg)
    if field.type == _F.TYPE_ENUM:
        names = {v.number: v.name for v in field.enum_type.values}
        values = [None if v is None else names.get(v, str(v)) for v in msgs_or_values]
        return _array(values, pa.string(), reader, path)
    writer = SCALAR_ARROW[field.type]
    if pa.types.is_decimal(writer):
        msgs_or_values = [None if v is None else Decimal(v) for v in msgs_or_values]
    return _array(msgs_or_values, writer, reader, path)


def _column(msgs: list[Any], field: descriptor.FieldDescriptor, reader: pa.DataType,
            path: str, reader_field: Any, complete: bool) -> pa.Array:
    """The reader's column for ``field`` across ``msgs`` (None: a null row; ``complete``:
    there is none)."""
    name = field.name
    reader_msg = reader_field.message_type if reader_field is not None else None
    if field.is_repeated:
        containers = [None if m is None else getattr(m, name) for m in msgs]
        offsets = np.zeros(len(msgs) + 1, np.int32)
        np.cumsum([0 if c is None else len(c) for c in containers], out=offsets[1:])
        mask = pa.array([c is None for c in containers], pa.bool_())
        if is_map(field):
            if not pa.types.is_map(reader):
                raise _Unreadable(f"field {path} is a map in the writer schema and {reader} "
                                  "in the reader's")
            entry = field.message_type
            keys: list[Any] = []
            values: list[Any] = []
            for c in containers:
                if c:
                    keys.extend(c.keys())
                    values.extend(c[k] for k in c.keys())
            value_msg = (reader_msg.fields_by_name["value"].message_type
                         if reader_msg is not None else None)
            key_arr = _elements(keys, entry.fields_by_name["key"], reader.key_type, path, None)
            value_arr = _elements(values, entry.fields_by_name["value"], reader.item_type,
                                  path, value_msg)
            return pa.MapArray.from_arrays(pa.array(offsets), key_arr, value_arr,
                                           type=reader, mask=mask)
        if not pa.types.is_list(reader):
            raise _Unreadable(f"field {path} is repeated in the writer schema and {reader} "
                              "in the reader's")
        flat = [v for c in containers if c for v in c]
        items = _elements(flat, field, reader.value_type, path, reader_msg)
        return pa.ListArray.from_arrays(pa.array(offsets), items, type=reader, mask=mask)
    if field.has_presence:
        values = [getattr(m, name) if m is not None and m.HasField(name) else None
                  for m in msgs]
    elif complete:
        values = list(map(attrgetter(name), msgs))
    else:
        values = [None if m is None else getattr(m, name) for m in msgs]
    return _elements(values, field, reader, path, reader_msg)


def _missing(msgs: list[Any], field: Any, arrow: pa.DataType) -> pa.Array:
    """A reader field the writer lacks, as Protobuf reads an absent field: null where it
    has presence (messages, ``optional``, oneof members), else its default (0, "", the
    enum's first value, an empty list or map)."""
    if field is None or (field.has_presence and not field.is_repeated):
        return pa.nulls(len(msgs), arrow)
    if field.is_repeated:
        default: Any = []
    elif field.type == _F.TYPE_ENUM:
        value = field.enum_type.values_by_number.get(field.default_value)
        default = value.name if value is not None else str(field.default_value)
    else:
        default = field.default_value
        if pa.types.is_decimal(arrow):
            default = Decimal(default)
    return pa.array([None if m is None else default for m in msgs], arrow)


def _struct(msgs: list[Any], desc: descriptor.Descriptor, reader: pa.StructType,
            path: str, reader_msg: Any) -> pa.Array:
    complete = not any(m is None for m in msgs)
    children = []
    for arrow_field in reader:
        reader_field = (reader_msg.fields_by_name.get(arrow_field.name)
                        if reader_msg is not None else None)
        # By number, as Protobuf matches them (a renamed field keeps its values).
        writer_field = (desc.fields_by_number.get(reader_field.number)
                        if reader_field is not None else desc.fields_by_name.get(
                            arrow_field.name))
        where = f"{path}.{arrow_field.name}" if path else arrow_field.name
        if writer_field is None:
            children.append(_missing(msgs, reader_field, arrow_field.type))
        else:
            children.append(_column(msgs, writer_field, arrow_field.type, where,
                                    reader_field, complete))
    mask = pa.array([m is None for m in msgs], pa.bool_())
    return pa.StructArray.from_arrays(children, fields=list(reader), mask=mask)


@dataclass
class ProtobufDecoder:
    """Decodes a binary column of Protobuf records (see :class:`.schemas.PayloadDecoder`)."""

    reader: RegisteredSchema
    lookup: SchemaLookup
    mode: str
    arrow_type: pa.StructType
    #: The reader's message type: its defaults fill fields a writer lacks.
    reader_message: Any
    _writers: dict[int, ProtoFile | str] = field(default_factory=dict)

    def _writer(self, schema_id: int) -> ProtoFile | str:
        """The writer schema's file, or why it cannot be had (kept: asked once per id)."""
        if schema_id not in self._writers:
            self._writers[schema_id] = writer_or_reason(self.lookup, schema_id,
                                                        self._load_writer)
        return self._writers[schema_id]

    def _load_writer(self, schema: RegisteredSchema) -> ProtoFile:
        if schema.schema_type != "PROTOBUF":
            raise ConfigError(f"it is {schema.schema_type}, not PROTOBUF")
        return load(schema, self.lookup)

    def decode(self, payloads: pa.Array, where: Callable[[int], str]) -> Decoded:
        with gc_paused():
            return self._decode(payloads, where)

    def _decode(self, payloads: pa.Array, where: Callable[[int], str]) -> Decoded:
        framed = framing.split(payloads)
        n = len(framed)
        indexes, start_array = framing.split_message_indexes(framed)
        errors: list[str | None] = [None] * n
        groups: dict[tuple[int, tuple[int, ...]], list[int]] = {}
        ids = framed.schema_ids.tolist()
        for i, state in enumerate(framed.state.tolist()):
            if state == framing.OK:
                path = indexes[i]
                if path is None:
                    errors[i] = "its Protobuf message indexes do not parse"
                else:
                    groups.setdefault((ids[i], tuple(path)), []).append(i)
            elif state != framing.NULL:
                errors[i] = f"the payload {framing.WHY[state]}"
        parts: list[pa.Array] = []
        position = np.full(n, -1, np.int64)
        done = 0
        data = framed.data.tobytes()
        starts, ends = start_array.tolist(), framed.end.tolist()
        for (schema_id, index_path), rows in groups.items():
            writer = self._writer(schema_id)
            try:
                if isinstance(writer, str):
                    raise _Unreadable(writer)
                try:
                    cls = writer.message_class(writer.message(list(index_path)))
                except LookupError as exc:
                    raise _Unreadable(str(exc)) from None
                parse = cls.FromString
                try:
                    msgs: list[Any] = [parse(data[starts[i]:ends[i]]) for i in rows]
                except (DecodeError, ValueError, RuntimeError):
                    msgs = []  # row by row, to find the rows that do not parse
                    for i in rows:
                        try:
                            msgs.append(parse(data[starts[i]:ends[i]]))
                        except (DecodeError, ValueError, RuntimeError) as exc:
                            msgs.append(None)
                            errors[i] = (f"the bytes are not a {cls.DESCRIPTOR.full_name}: "
                                         f"{exc}")
                part = _struct(msgs, cls.DESCRIPTOR, self.arrow_type, "", self.reader_message)
            except _Unreadable as exc:
                for i in rows:
                    errors[i] = str(exc)
                continue
            parts.append(part)
            position[rows] = np.arange(done, done + len(rows))
            done += len(rows)
        if self.mode == FAILFAST:
            framing.fail_fast("Protobuf", errors, framed, where)
        failed = np.array([e is not None for e in errors], bool)
        position[failed] = -1
        parts.append(pa.nulls(1, self.arrow_type))
        position[position < 0] = done
        values = pa.concat_arrays(parts).take(pa.array(position)) if n else pa.nulls(
            0, self.arrow_type)
        ids = framed.id_array()
        any_error = bool(failed.any())
        return Decoded(values, ids, pa.array(errors, pa.string()) if any_error else None)


def decoder(reader: RegisteredSchema, lookup: SchemaLookup, *, mode: str,
            message: str | None = None) -> ProtobufDecoder:
    """A decoder to the reader schema's ``message`` (None: its first message)."""
    if mode not in (FAILFAST, PERMISSIVE):
        raise ConfigError(f"mode {mode!r} is not FAILFAST or PERMISSIVE")
    desc, _ = load(reader, lookup).named(message)
    return ProtobufDecoder(reader, lookup, mode, struct_type(desc), desc)


# --- encode --------------------------------------------------------------------------------

def encoder(schema: RegisteredSchema, lookup: SchemaLookup, *,
            message: str | None = None) -> ProtobufEncoder:
    """An encoder writing the schema's ``message`` (None: the file's first message, as
    Confluent's serializer does), its message indexes in every header."""
    file = load(schema, lookup)
    desc, path = file.named(message)
    return ProtobufEncoder(schema, file.message_class(desc), framing.header(schema.id, path))
