"""Protobuf cases against protobuf's own runtime, both directions.

Read: the runtime's messages (built from a ``FileDescriptorProto`` of the model) are framed
as Confluent's serializer frames them; eoskafka's decoder, given the model's .proto text
(or, for a third of them, the base64 descriptor Confluent's Python serializer registers),
must give the rows the runtime's messages map to by the documented mapping (Spark's
``from_protobuf`` with unsigned ints widened: presence is null, enums by name, uint64 a
decimal, Timestamp and Duration in microseconds, empty messages dropped). Write: eoskafka
encodes the rows it read; the runtime parses them to the same rows.
"""

from __future__ import annotations

import base64
import struct
from decimal import Decimal
from typing import Any

import pyarrow as pa
from google.protobuf import descriptor

from eos_kafka_source.formats import protobuf
from eos_kafka_source.formats.schemas import PERMISSIVE, RegisteredSchema
from tests.formats.explorer.arrow_compare import plain_rows, row_difference
from tests.formats.explorer.cases import Case, Difference, OneSchema, write_back
from tests.formats.explorer.proto_files import descriptor_proto, message_class, proto_text
from tests.formats.explorer.proto_gen import features

_F = descriptor.FieldDescriptor
_U64 = (_F.TYPE_FIXED64, _F.TYPE_UINT64)


def _kept(field: Any) -> bool:
    """Whether a field has a column: a message without any kept field has none."""
    msg = field.message_type
    if msg is None:
        return True
    if msg.GetOptions().map_entry:
        return _kept(msg.fields_by_name["key"]) and _kept(msg.fields_by_name["value"])
    if msg.full_name in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
        return True
    return any(_kept(f) for f in msg.fields)


def _value(field: Any, v: Any) -> Any:
    msg = field.message_type
    if msg is not None:
        if msg.full_name == "google.protobuf.Timestamp":
            return v.seconds * 1_000_000 + v.nanos // 1000
        if msg.full_name == "google.protobuf.Duration":
            return v.seconds * 1_000_000 + int(v.nanos / 1000)
        return expect(v)
    if field.enum_type is not None:
        found = field.enum_type.values_by_number.get(v)
        return found.name if found is not None else str(v)
    if field.type in _U64:
        return Decimal(v)
    return v


def expect(msg: Any) -> dict[str, Any]:
    """The row a runtime message maps to (time types as the integers of the plain form)."""
    out: dict[str, Any] = {}
    for f in msg.DESCRIPTOR.fields:
        if not _kept(f):
            continue
        value = getattr(msg, f.name)
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            kf, vf = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
            out[f.name] = {_value(kf, k): _value(vf, value[k]) for k in value}
        elif f.is_repeated:
            out[f.name] = [_value(f, x) for x in value]
        elif f.has_presence and not msg.HasField(f.name):
            out[f.name] = None
        else:
            out[f.name] = _value(f, value)
    return out


def _where(i: int) -> str:
    return f"row {i}"


def check(cases: list[Case], spark: Any = None) -> tuple[list[Difference], int]:
    found: list[Difference] = []
    skipped = 0
    for case in cases:
        try:
            cls = message_class(case.schema)
            text = proto_text(case.schema)
            if len(text) % 3 == 0:  # as Confluent's Python serializer registers it
                text = base64.b64encode(descriptor_proto(case.schema).SerializeToString()
                                        ).decode()
        except Exception:  # noqa: BLE001 - the runtime refuses the model: not a case
            skipped += 1
            continue
        for check_name, detail in _one(case, cls, text):
            found.append(Difference(case, check_name, detail, features(case.schema)))
    return found, skipped


def _one(case: Case, cls: Any, text: str) -> list[tuple[str, str]]:
    registered = RegisteredSchema(1, "PROTOBUF", text)
    lookup = OneSchema(registered)
    header = b"\x00" + struct.pack(">I", 1) + b"\x00"
    framed = [None if v is None else header + v for v in case.values]
    try:
        decoder = protobuf.decoder(registered, lookup, mode=PERMISSIVE)
    except Exception as exc:  # noqa: BLE001 - the runtime reads it: a refusal differs
        return [("schema", f"eoskafka refuses a schema protobuf's runtime reads: "
                           f"{type(exc).__name__}: {exc}")]
    try:
        decoded = decoder.decode(pa.array(framed, pa.binary()), _where)
    except Exception as exc:  # noqa: BLE001
        return [("read", f"eoskafka's PERMISSIVE decode raised {type(exc).__name__}: {exc}")]
    errors = decoded.errors.to_pylist() if decoded.errors is not None else [None] * len(framed)
    wanted = [None if v is None else expect(cls.FromString(v)) for v in case.values]
    for i, e in enumerate(errors):
        if e is not None:
            return [("read", f"row {i}: eoskafka refuses a message the runtime parses: {e}")]
    diff = row_difference(plain_rows(decoded.values), wanted)
    if diff:
        return [("read", diff)]
    keep = [i for i, v in enumerate(case.values) if v is not None]
    if not keep:
        return []
    written, failed = write_back(protobuf.encoder(registered, lookup), decoded.values, keep)
    if failed:
        return [("write", failed)]
    for i, again in zip(keep, written, strict=True):
        if again is None or again[:6] != header:
            return [("write", f"row {i}: eoskafka's header {again!r:.40} is not {header!r}")]
        try:
            back = expect(cls.FromString(again[6:]))
        except Exception as exc:  # noqa: BLE001
            return [("write", f"row {i}: the runtime cannot parse what eoskafka wrote: {exc}")]
        diff = row_difference([back], [wanted[i]])
        if diff:
            return [("write", f"row {i}: the runtime reads eoskafka's bytes differently: "
                              f"{diff}")]
    return []
