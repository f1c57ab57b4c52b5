"""The Protobuf codec: .proto text to Arrow, round trips, evolution, malformed payloads, and
interop with Confluent's own ProtobufSerializer/ProtobufDeserializer over its mock registry."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pool, message_factory, timestamp_pb2

from eos_kafka_source.errors import ConfigError, PayloadDecodeError, PayloadEncodeError
from eos_kafka_source.formats import framing, proto_text, protobuf
from eos_kafka_source.formats.protobuf_schema import load
from eos_kafka_source.formats.schemas import (
    FAILFAST,
    PERMISSIVE,
    RegisteredSchema,
    SchemaReference,
)
from tests.unit.schema_lookups import DictLookup, MockRegistryLookup

ORDER = """
syntax = "proto3";
package acme.shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";

// An order, as the shop writes it.
message Order {
  enum Status { UNKNOWN = 0; NEW = 1; SHIPPED = 2; }
  message Line { string sku = 1; int32 qty = 2; }
  int64 id = 1;
  string customer = 2;
  repeated Line lines = 3;
  map<string, int64> totals = 4;
  Status status = 5;
  google.protobuf.Timestamp placed = 6;
  optional double price = 7;
  oneof pay { string card = 8; bytes token = 9; }
  uint32 u32 = 10;
  uint64 u64 = 11;
  repeated string tags = 12;
  sint32 s32 = 13;
  float ratio = 14;
  bool gift = 15;
  google.protobuf.Duration wait = 16;
}
message Other { Order.Line line = 1; }
"""

WHERE = "t-0 at offset {}".format


def _schema(text: str, schema_id: int = 1, **kw: object) -> RegisteredSchema:
    return RegisteredSchema(schema_id, "PROTOBUF", text, **kw)  # type: ignore[arg-type]


def _row(i: int) -> dict[str, object]:
    return {"id": i, "customer": f"c{i}", "lines": [{"sku": "a", "qty": i}],
            "totals": [("x", i)], "status": "SHIPPED",
            "placed": datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC),
            "price": None if i % 2 else 9.5, "card": None if i % 2 else "visa",
            "token": b"\x01" if i % 2 else None, "u32": 2**32 - 1,
            "u64": Decimal(2**64 - 1), "tags": ["a", "b"], "s32": -i, "ratio": 0.5,
            "gift": bool(i % 2), "wait": timedelta(seconds=-3, microseconds=-5)}


def test_arrow_type_follows_spark_from_protobuf() -> None:
    schema = _schema(ORDER)
    assert protobuf.arrow_type(schema, DictLookup(schema)) == pa.struct([
        ("id", pa.int64()), ("customer", pa.string()),
        ("lines", pa.list_(pa.struct([("sku", pa.string()), ("qty", pa.int32())]))),
        ("totals", pa.map_(pa.string(), pa.int64())), ("status", pa.string()),
        ("placed", pa.timestamp("us", "UTC")), ("price", pa.float64()),
        ("card", pa.string()), ("token", pa.binary()), ("u32", pa.int64()),
        ("u64", pa.decimal128(20, 0)), ("tags", pa.list_(pa.string())), ("s32", pa.int32()),
        ("ratio", pa.float32()), ("gift", pa.bool_()), ("wait", pa.duration("us")),
    ])
    other = protobuf.arrow_type(schema, DictLookup(schema), message="acme.shop.Other")
    assert other == pa.struct([("line", pa.struct([("sku", pa.string()),
                                                   ("qty", pa.int32())]))])


def test_round_trip_and_header() -> None:
    schema = _schema(ORDER, 7)
    lookup = DictLookup(schema)
    arrow = protobuf.arrow_type(schema, lookup)
    values = pa.array([_row(i) for i in range(5)] + [None], arrow)
    payloads = protobuf.encoder(schema, lookup).encode(values, "value")
    assert payloads[0].as_py()[:6] == b"\x00\x00\x00\x00\x07\x00"  # id 7, indexes [0]
    assert payloads[5].as_py() is None
    decoded = protobuf.decoder(schema, lookup, mode=FAILFAST).decode(payloads, WHERE)
    assert decoded.values.equals(values)
    assert decoded.schema_ids.to_pylist() == [7] * 5 + [None]
    assert decoded.errors is None
    assert lookup.asked == [7]  # one lookup per writer id, not per row


def test_unset_scalars_read_as_defaults_presence_fields_as_null() -> None:
    schema = _schema(ORDER)
    lookup = DictLookup(schema)
    arrow = protobuf.arrow_type(schema, lookup)
    payloads = protobuf.encoder(schema, lookup).encode(pa.array([{}], arrow), "value")
    row = protobuf.decoder(schema, lookup, mode=FAILFAST).decode(payloads, WHERE).values[0]
    got = row.as_py()
    assert got["id"] == 0 and got["customer"] == "" and got["status"] == "UNKNOWN"
    assert got["price"] is None and got["card"] is None and got["placed"] is None
    assert got["lines"] == [] and got["totals"] == []


def test_named_message_writes_its_indexes() -> None:
    schema = _schema(ORDER)
    lookup = DictLookup(schema)
    enc = protobuf.encoder(schema, lookup, message="Other")
    arrow = protobuf.arrow_type(schema, lookup, message="Other")
    payload = enc.encode(pa.array([{"line": {"sku": "z", "qty": 3}}], arrow), "value")
    assert payload[0].as_py()[5:7] == framing.write_message_indexes([1])
    dec = protobuf.decoder(schema, lookup, mode=FAILFAST, message="Other")
    assert dec.decode(payload, WHERE).values.to_pylist() == [{"line": {"sku": "z", "qty": 3}}]
    with pytest.raises(ConfigError, match="has no message 'Nope'.*acme.shop.Order"):
        protobuf.encoder(schema, lookup, message="Nope")


def test_nested_message_indexes_pick_the_writer_type() -> None:
    """Index path [0, 0] is Order.Line: the reader reads it by field name."""
    schema = _schema(ORDER)
    lookup = DictLookup(schema)
    line_cls = load(schema, lookup).message_class(load(schema, lookup).message([0, 0]))
    body = line_cls(sku="q", qty=4).SerializeToString()
    payload = framing.header(1, [0, 0]) + body
    reader = _schema("syntax = 'proto3'; message L { string sku = 1; int64 qty = 2; }", 2)
    lookup = DictLookup(schema, reader)
    got = protobuf.decoder(reader, lookup, mode=FAILFAST).decode(pa.array([payload]), WHERE)
    assert got.values.to_pylist() == [{"sku": "q", "qty": 4}]  # int32 widened to int64


V1 = 'syntax = "proto3"; message User { string name = 1; int32 age = 2; }'
V2 = ('syntax = "proto3"; message User { string name = 1; int32 age = 2; '
      'optional string email = 3; repeated string tags = 4; int64 visits = 5; '
      'enum Tier { FREE = 0; PAID = 1; } Tier tier = 6; }')


def test_evolution_field_added_and_removed() -> None:
    v1, v2 = _schema(V1, 1), _schema(V2, 2)
    lookup = DictLookup(v1, v2)
    old = protobuf.encoder(v1, lookup).encode(
        pa.array([{"name": "a", "age": 1}], protobuf.arrow_type(v1, lookup)), "value")
    new_row = {"name": "b", "age": 2, "email": "b@x", "tags": ["t"], "visits": 3,
               "tier": "PAID"}
    new = protobuf.encoder(v2, lookup).encode(
        pa.array([new_row], protobuf.arrow_type(v2, lookup)), "value")
    both = pa.concat_arrays([old, new, pa.nulls(1, pa.binary())])
    # Reader v2 over v1 data: added fields read as Protobuf reads them when absent: null
    # with presence (optional), else the default.
    got = protobuf.decoder(v2, lookup, mode=FAILFAST).decode(both, WHERE)
    assert got.values.to_pylist() == [
        {"name": "a", "age": 1, "email": None, "tags": [], "visits": 0, "tier": "FREE"},
        new_row, None]
    assert got.schema_ids.to_pylist() == [1, 2, None]
    # Reader v1 over v2 data: the writer's extra field is ignored.
    got = protobuf.decoder(v1, lookup, mode=FAILFAST).decode(both, WHERE)
    assert got.values.to_pylist() == [{"name": "a", "age": 1}, {"name": "b", "age": 2}, None]


def test_fields_match_by_number_as_protobuf_does() -> None:
    """A renamed field keeps its values; a field that kept its name under a new number is
    another field (the old one's values are not read into it)."""
    writer = _schema('syntax = "proto3"; message U { string name = 1; int32 age = 2; }', 1)
    reader = _schema('syntax = "proto3"; message U { string full_name = 1; int32 age = 3; }',
                     2)
    lookup = DictLookup(writer, reader)
    payloads = protobuf.encoder(writer, lookup).encode(pa.array([{"name": "a", "age": 7}]),
                                                       "value")
    got = protobuf.decoder(reader, lookup, mode=FAILFAST).decode(payloads, WHERE)
    assert got.values.to_pylist() == [{"full_name": "a", "age": 0}]


def test_malformed_rows_permissive_and_failfast() -> None:
    schema = _schema(V1, 1)
    lookup = DictLookup(schema, _schema('{"type": "string"}', 5))
    lookup.by_number[5] = RegisteredSchema(5, "JSON", "{}")
    good = protobuf.encoder(schema, lookup).encode(
        pa.array([{"name": "a", "age": 1}], protobuf.arrow_type(schema, lookup)), "value")
    rows = [
        b"\x00\x00\x00\x00\x01\x00\x0a\x09ab",      # a string field cut short
        b"\x00\x00",                                # shorter than the header
        b"\x01\x00\x00\x00\x01\x00",                # not the magic byte
        b"\x00\x00\x00\x00\x63\x00",                # id 99: not in the registry
        b"\x00\x00\x00\x00\x01\x02\x06",            # indexes [3]: no such message
        b"\x00\x00\x00\x00\x01\x81",                # indexes that end early
        b"\x00\x00\x00\x00\x05\x00",                # a JSON schema id
        None,
        good[0].as_py(),
    ]
    got = protobuf.decoder(schema, lookup, mode=PERMISSIVE).decode(
        pa.array(rows, pa.binary()), WHERE)
    errors = got.errors.to_pylist()
    assert "are not a User" in errors[0]
    assert "shorter than its 5-byte header" in errors[1]
    assert "first byte is not 0" in errors[2]
    assert "no schema id 99" in errors[3]
    assert "names no message" in errors[4]
    assert "message indexes do not parse" in errors[5]
    assert "is JSON, not PROTOBUF" in errors[6]
    assert errors[7:] == [None, None]
    assert got.values.to_pylist()[7:] == [None, {"name": "a", "age": 1}]
    assert got.values.null_count == 8
    assert got.schema_ids.to_pylist() == [1, None, None, 99, 1, 1, 5, None, 1]
    with pytest.raises(PayloadDecodeError) as caught:
        protobuf.decoder(schema, lookup, mode=FAILFAST).decode(
            pa.array([good[0].as_py(), rows[0]]), WHERE)
    assert caught.value.condition == "EOSKAFKA_MALFORMED_PAYLOAD"
    assert "t-0 at offset 1 (schema id 1)" in caught.value.message
    assert "PERMISSIVE" in caught.value.message


def test_reader_and_writer_types_that_do_not_convert() -> None:
    writer = _schema('syntax = "proto3"; message M { string x = 1; }', 1)
    reader = _schema('syntax = "proto3"; message M { message X { int32 a = 1; } X x = 1; }', 2)
    lookup = DictLookup(writer, reader)
    payloads = protobuf.encoder(writer, lookup).encode(pa.array([{"x": "s"}]), "value")
    got = protobuf.decoder(reader, lookup, mode=PERMISSIVE).decode(payloads, WHERE)
    assert "field x" in got.errors[0].as_py()
    assert got.values.to_pylist() == [None]


def test_encode_errors_name_column_and_field() -> None:
    schema = _schema(ORDER)
    lookup = DictLookup(schema)
    enc = protobuf.encoder(schema, lookup)
    with pytest.raises(PayloadEncodeError, match="field extra of the column is not in message"):
        enc.encode(pa.array([{"id": 1, "extra": 2}]), "value")
    with pytest.raises(PayloadEncodeError, match="row 1: field status value 'LOST'"):
        enc.encode(pa.array([{"status": "NEW"}, {"status": "LOST"}]), "value")
    with pytest.raises(PayloadEncodeError, match="field s32 value 4294967296"):
        enc.encode(pa.array([{"s32": 2**32}]), "value")
    with pytest.raises(PayloadEncodeError, match="column 'v' is int64"):
        enc.encode(pa.array([1]), "v")


def test_references_and_well_known_imports() -> None:
    common = _schema('syntax = "proto3"; package common; message Money { int64 cents = 1; '
                     'string currency = 2; }', 10, subject="common.proto", version=1)
    main = _schema('syntax = "proto3"; package shop; import "common.proto"; '
                   'import "google/protobuf/wrappers.proto"; '
                   'message Item { common.Money price = 1; google.protobuf.StringValue note '
                   '= 2; }', 11, references=(SchemaReference("common.proto",
                                                             "common.proto", 1),))
    lookup = DictLookup(common, main)
    arrow = protobuf.arrow_type(main, lookup)
    assert arrow == pa.struct([("price", pa.struct([("cents", pa.int64()),
                                                    ("currency", pa.string())])),
                               ("note", pa.struct([("value", pa.string())]))])
    row = {"price": {"cents": 250, "currency": "EUR"}, "note": {"value": "hi"}}
    payload = protobuf.encoder(main, lookup).encode(pa.array([row], arrow), "value")
    got = protobuf.decoder(main, lookup, mode=FAILFAST).decode(payload, WHERE)
    assert got.values.to_pylist() == [row]
    missing = _schema('syntax = "proto3"; import "nowhere.proto"; message A { int32 a = 1; }')
    with pytest.raises(ConfigError, match="imports 'nowhere.proto'.*reference named"):
        protobuf.arrow_type(missing, DictLookup(missing))


def test_schema_errors_are_config_errors() -> None:
    for text, why in [("syntax = 'proto3'; message A { int32 a = 1 }", "line 1: expected ';'"),
                      ("message A { Missing m = 1; }", "'Missing' of field A.m"),
                      ("message A { A self = 1; }", "recursive")]:
        schema = _schema(text)
        with pytest.raises(ConfigError, match=why):
            protobuf.arrow_type(schema, DictLookup(schema))


def test_schema_for_registers_what_encodes_the_column() -> None:
    arrow = pa.struct([("id", pa.int64()), ("name", pa.string()),
                       ("at", pa.timestamp("us", "UTC")), ("tags", pa.list_(pa.string())),
                       ("attrs", pa.map_(pa.string(), pa.float64())),
                       ("inner", pa.struct([("ok", pa.bool_()), ("n", pa.int32())])),
                       ("blob", pa.binary())])
    text = protobuf.schema_for(arrow, name="Event", namespace="com.acme")
    assert "package com.acme;" in text and 'import "google/protobuf/timestamp.proto";' in text
    schema = _schema(text, 3)
    lookup = DictLookup(schema)
    assert protobuf.arrow_type(schema, lookup) == arrow
    values = pa.array([{"id": None, "name": "n", "at": datetime(2024, 1, 1, tzinfo=UTC),
                        "tags": ["t"], "attrs": [("k", 1.5)], "inner": {"ok": True, "n": None},
                        "blob": b"\x00"}, None], arrow)
    payloads = protobuf.encoder(schema, lookup).encode(values, "value")
    got = protobuf.decoder(schema, lookup, mode=FAILFAST).decode(payloads, WHERE)
    assert got.values.equals(values)  # `optional` scalars keep null apart from 0
    with pytest.raises(ConfigError, match="field d of type date32"):
        protobuf.schema_for(pa.struct([("d", pa.date32())]), name="X", namespace="")


# --- interop with Confluent's serializers ----------------------------------------------------

def _confluent_class(text: str, message: str) -> type:
    """A message class as protoc would generate it, from our parser's descriptor."""
    proto = proto_text.parse(text, "order.proto")
    known = proto_text.declared_types(proto)
    for dep in ("timestamp", "duration"):
        module = __import__(f"google.protobuf.{dep}_pb2", fromlist=["DESCRIPTOR"])
        from google.protobuf import descriptor_pb2
        dep_proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(dep_proto)
        known.update(proto_text.declared_types(dep_proto))
    proto_text.resolve(proto, known)
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    from google.protobuf import duration_pb2
    pool.AddSerializedFile(duration_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(message))


def test_confluent_serializer_bytes_decode_with_ours_and_ours_with_theirs() -> None:
    client = SchemaRegistryClient.new_client({"url": "mock://pbjson-protobuf"})
    order_cls = _confluent_class(ORDER, "acme.shop.Order")
    ctx = SerializationContext("orders", MessageField.VALUE)
    serializer = ProtobufSerializer(order_cls, client, {"use.deprecated.format": False})
    theirs = [serializer(order_cls(id=1, customer="c", lines=[{"sku": "a", "qty": 2}],
                                   totals={"x": 3}, status="NEW", price=1.25, card="v",
                                   u32=7, u64=2**63 + 1, tags=["t"], s32=-4, ratio=0.5,
                                   gift=True), ctx),
              serializer(order_cls(id=2), ctx)]
    lookup = MockRegistryLookup(client)
    schema_id = int.from_bytes(theirs[0][1:5], "big")
    writer = lookup.by_id(schema_id)
    base64.b64decode(writer.text, validate=True)  # Confluent's Python client registers this
    got = protobuf.decoder(writer, lookup, mode=FAILFAST).decode(pa.array(theirs), WHERE)
    first = got.values[0].as_py()
    assert first["id"] == 1 and first["lines"] == [{"sku": "a", "qty": 2}]
    assert first["totals"] == [("x", 3)] and first["status"] == "NEW"
    assert first["u64"] == 2**63 + 1 and first["price"] == 1.25 and first["token"] is None
    assert got.values[1].as_py()["price"] is None

    # Ours, with the schema their serializer registered, read by their deserializer.
    values = pa.array([_row(i) for i in range(3)], protobuf.arrow_type(writer, lookup))
    ours = protobuf.encoder(writer, lookup).encode(values, "value")
    deserializer = ProtobufDeserializer(order_cls, {"use.deprecated.format": False}, client)
    for i, payload in enumerate(ours.to_pylist()):
        msg = deserializer(payload, ctx)
        assert msg.id == i and msg.lines[0].qty == i and msg.totals["x"] == i
        assert msg.status == 2 and msg.u64 == 2**64 - 1 and msg.wait.seconds == -3
        assert msg.placed.ToDatetime(UTC) == datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
        assert msg.HasField("price") == (i % 2 == 0)
