"""The JSON Schema codec: schema to Arrow, round trips, evolution, malformed payloads, and
interop with Confluent's own JSONSerializer/JSONDeserializer over its mock registry."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from eos_kafka_source.errors import ConfigError, PayloadDecodeError, PayloadEncodeError
from eos_kafka_source.formats import json_schema
from eos_kafka_source.formats.schemas import (
    FAILFAST,
    PERMISSIVE,
    RegisteredSchema,
    SchemaReference,
)
from tests.unit.schema_lookups import DictLookup, MockRegistryLookup

WHERE = "t-0 at offset {}".format

ORDER = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "customer": {"type": "string"},
        "score": {"type": ["number", "null"]},
        "paid": {"type": "boolean"},
        "placed": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "totals": {"type": "object", "additionalProperties": {"type": "integer"}},
        "ship_to": {"$ref": "#/definitions/Address"},
        "status": {"enum": ["NEW", "SHIPPED"]},
        "note": {"oneOf": [{"type": "null"}, {"type": "string"}]},
    },
    "required": ["id", "customer"],
    "definitions": {"Address": {"type": "object", "properties": {
        "city": {"type": "string"}, "zip": {"type": "string"}}, "required": ["city"]}},
}


def _schema(doc: object, schema_id: int = 1, **kw: object) -> RegisteredSchema:
    return RegisteredSchema(schema_id, "JSON", json.dumps(doc), **kw)  # type: ignore[arg-type]


def _row(i: int) -> dict[str, object]:
    return {"id": i, "customer": f"c{i}", "score": None if i % 2 else 0.5, "paid": True,
            "placed": datetime(2024, 5, 1, 12, 0, i, 123456, tzinfo=UTC),
            "day": date(2024, 5, 1), "tags": ["a"], "totals": [("x", i)],
            "ship_to": {"city": "Oslo", "zip": None}, "status": "NEW", "note": None}


def test_arrow_type_mapping() -> None:
    schema = _schema(ORDER)
    assert json_schema.arrow_type(schema, DictLookup(schema)) == pa.struct([
        pa.field("id", pa.int64(), nullable=False),
        pa.field("customer", pa.string(), nullable=False),
        ("score", pa.float64()), ("paid", pa.bool_()),
        ("placed", pa.timestamp("us", "UTC")), ("day", pa.date32()),
        ("tags", pa.list_(pa.string())), ("totals", pa.map_(pa.string(), pa.int64())),
        ("ship_to", pa.struct([pa.field("city", pa.string(), nullable=False),
                               ("zip", pa.string())])),
        ("status", pa.string()), ("note", pa.string()),
    ])


@pytest.mark.parametrize(("doc", "pointer"), [
    ({"type": "object", "properties": {"a": {"type": ["string", "integer"]}}},
     "#/properties/a: type is"),
    ({"type": "object", "properties": {"a": {}}}, "#/properties/a: any value"),
    ({"type": "object", "properties": {"a": {"type": "object"}}}, "#/properties/a: an object"),
    ({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"},
                                                       {"type": "integer"}]}}},
     "#/properties/a/oneOf: oneOf allows 2"),
    ({"type": "object", "properties": {"a": {"type": "array"}}}, "#/properties/a/items"),
    ({"type": "object", "properties": {"n": {"$ref": "#"}}}, "is recursive"),
    ({"type": "object", "properties": {"n": {"$ref": "#/definitions/X"}}}, "points at nothing"),
])
def test_unmappable_schemas_name_the_pointer(doc: object, pointer: str) -> None:
    schema = _schema(doc)
    with pytest.raises(ConfigError, match="read the value as a string|points at nothing") as e:
        json_schema.arrow_type(schema, DictLookup(schema))
    assert pointer in e.value.message


def test_round_trip_compact_and_nulls_left_out() -> None:
    schema = _schema(ORDER, 4)
    lookup = DictLookup(schema)
    arrow = json_schema.arrow_type(schema, lookup)
    values = pa.array([_row(i) for i in range(4)] + [None], arrow)
    payloads = json_schema.encoder(schema, lookup).encode(values, "value")
    first = payloads[1].as_py()
    assert first[:5] == b"\x00\x00\x00\x00\x04"
    assert json.loads(first[5:]) == {
        "id": 1, "customer": "c1", "paid": True, "placed": "2024-05-01T12:00:01.123456Z",
        "day": "2024-05-01", "tags": ["a"], "totals": {"x": 1}, "ship_to": {"city": "Oslo"},
        "status": "NEW"}
    assert b", " not in first and b": " not in first
    decoded = json_schema.decoder(schema, lookup, mode=FAILFAST).decode(payloads, WHERE)
    assert decoded.values.equals(values)
    assert decoded.schema_ids.to_pylist() == [4] * 4 + [None]
    assert decoded.errors is None


V1 = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}
V2 = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                       "email": {"type": "string"}}}


def test_evolution_field_added_and_removed() -> None:
    v1, v2 = _schema(V1, 1), _schema(V2, 2)
    lookup = DictLookup(v1, v2)
    old = json_schema.encoder(v1, lookup).encode(pa.array([{"name": "a", "age": 1}]), "value")
    new = json_schema.encoder(v2, lookup).encode(
        pa.array([{"name": "b", "age": 2, "email": "b@x"}]), "value")
    both = pa.concat_arrays([old, new])
    got = json_schema.decoder(v2, lookup, mode=FAILFAST).decode(both, WHERE)
    assert got.values.to_pylist() == [{"name": "a", "age": 1, "email": None},
                                      {"name": "b", "age": 2, "email": "b@x"}]
    got = json_schema.decoder(v1, lookup, mode=FAILFAST).decode(both, WHERE)
    assert got.values.to_pylist() == [{"name": "a", "age": 1}, {"name": "b", "age": 2}]
    assert got.schema_ids.to_pylist() == [1, 2]


def test_malformed_rows_permissive_and_failfast() -> None:
    schema = _schema(ORDER, 1)
    lookup = DictLookup(schema)
    head = b"\x00\x00\x00\x00\x01"
    rows = [head + b"{", head + b"[1]", head + b'{"id": "x", "customer": "c"}',
            head + b'{"id": 1, "customer": "c", "placed": "2024-01-01T00:00:00"}',
            b"\x01\x00\x00\x00\x01{}",
            b"{}", None, head + b'{"id": 2, "customer": "c", "day": "2024-02-03"}']
    got = json_schema.decoder(schema, lookup, mode=PERMISSIVE).decode(
        pa.array(rows, pa.binary()), WHERE)
    errors = got.errors.to_pylist()
    assert "not JSON text" in errors[0]
    assert "is a list, not an object" in errors[1]
    assert "does not fit the reader schema" in errors[2] and '"x"' in errors[2]
    assert "has no zone offset" in errors[3]
    assert "first byte is not 0" in errors[4]
    assert "shorter than its 5-byte header" in errors[5]
    assert errors[6:] == [None, None]
    assert got.values.to_pylist()[:7] == [None] * 7
    assert got.values[7].as_py()["day"] == date(2024, 2, 3)
    with pytest.raises(PayloadDecodeError) as caught:
        json_schema.decoder(schema, lookup, mode=FAILFAST).decode(
            pa.array([rows[7], rows[2]]), WHERE)
    assert "t-0 at offset 1 (schema id 1)" in caught.value.message


def test_validate_on_decode_checks_the_writer_schema() -> None:
    writer = _schema({"type": "object", "properties": {"n": {"type": "integer",
                                                              "minimum": 0}}}, 1)
    lookup = DictLookup(writer)
    payload = pa.array([b"\x00\x00\x00\x00\x01" + b'{"n": -1}', b"\x00\x00\x00\x00\x07{}"])
    loose = json_schema.decoder(writer, lookup, mode=PERMISSIVE).decode(payload, WHERE)
    assert loose.values.to_pylist()[0] == {"n": -1}
    strict = json_schema.decoder(writer, lookup, mode=PERMISSIVE, validate=True).decode(
        payload, WHERE)
    assert "at $.n: -1 is less than the minimum of 0" in strict.errors[0].as_py()
    assert "7" in strict.errors[1].as_py()  # no such writer id


def test_encode_validates_and_names_column_row_and_path() -> None:
    schema = _schema({"type": "object", "properties": {
        "n": {"type": "integer", "maximum": 10}, "s": {"type": "string"}},
        "required": ["s"]}, 2)
    enc = json_schema.encoder(schema, DictLookup(schema))
    with pytest.raises(PayloadEncodeError, match=r"column 'v' row 1 .* at \$.n: 11 is greater"):
        enc.encode(pa.array([{"n": 1, "s": "a"}, {"n": 11, "s": "b"}]), "v")
    with pytest.raises(PayloadEncodeError, match=r"at \$.s: None is not of type 'string'"):
        enc.encode(pa.array([{"n": 1, "s": None}]), "v")  # required: written as null
    loose = json_schema.encoder(schema, DictLookup(schema), validate=False)
    assert loose.encode(pa.array([{"n": 11, "s": "b"}]), "v")[0].as_py()[5:] == \
        b'{"n":11,"s":"b"}'


def test_ref_through_registry_references() -> None:
    address = RegisteredSchema(10, "JSON", json.dumps(
        {"type": "object", "properties": {"city": {"type": "string"}}}),
        subject="address", version=1)
    main = _schema({"type": "object", "properties": {"home": {"$ref": "address.json"}}}, 11,
                   references=(SchemaReference("address.json", "address", 1),))
    lookup = DictLookup(address, main)
    assert json_schema.arrow_type(main, lookup) == pa.struct(
        [("home", pa.struct([("city", pa.string())]))])
    payloads = json_schema.encoder(main, lookup).encode(
        pa.array([{"home": {"city": "Rome"}}]), "value")
    got = json_schema.decoder(main, lookup, mode=FAILFAST, validate=True).decode(payloads,
                                                                                 WHERE)
    assert got.values.to_pylist() == [{"home": {"city": "Rome"}}]
    with pytest.raises(PayloadEncodeError, match="is not of type 'string'"):
        json_schema.encoder(main, lookup).encode(pa.array([{"home": {"city": 5}}]), "value")


def test_schema_for_round_trips_the_column_type() -> None:
    arrow = pa.struct([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()),
                       ("at", pa.timestamp("us", "UTC")), ("d", pa.date32()),
                       ("tags", pa.list_(pa.float64())),
                       ("attrs", pa.map_(pa.string(), pa.bool_())),
                       ("inner", pa.struct([("x", pa.int64())]))])
    text = json_schema.schema_for(arrow, name="Event", namespace="com.acme")
    assert json.loads(text)["title"] == "com.acme.Event"
    schema = RegisteredSchema(5, "JSON", text)
    lookup = DictLookup(schema)
    assert json_schema.arrow_type(schema, lookup) == arrow
    values = pa.array([{"id": 1, "name": None, "at": datetime(2024, 1, 1, tzinfo=UTC),
                        "d": date(2024, 1, 1), "tags": [1.5], "attrs": [("k", True)],
                        "inner": None}], arrow)
    payloads = json_schema.encoder(schema, lookup).encode(values, "value")
    got = json_schema.decoder(schema, lookup, mode=FAILFAST).decode(payloads, WHERE)
    assert got.values.equals(values)
    with pytest.raises(ConfigError, match="field b of type binary"):
        json_schema.schema_for(pa.struct([("b", pa.binary())]), name="X", namespace="")


def test_confluent_serializer_bytes_decode_with_ours_and_ours_with_theirs() -> None:
    client = SchemaRegistryClient.new_client({"url": "mock://pbjson-json"})
    text = json.dumps(ORDER)
    ctx = SerializationContext("orders", MessageField.VALUE)
    serializer = JSONSerializer(text, client)
    theirs = [serializer({"id": 1, "customer": "c", "placed": "2024-05-01T12:00:00.5Z",
                          "day": "2024-05-01", "totals": {"a": 2}, "ship_to": {"city": "X"},
                          "note": "é"}, ctx),
              serializer({"id": 2, "customer": "d", "score": None}, ctx)]
    lookup = MockRegistryLookup(client)
    writer = lookup.by_id(int.from_bytes(theirs[0][1:5], "big"))
    got = json_schema.decoder(writer, lookup, mode=FAILFAST, validate=True).decode(
        pa.array(theirs), WHERE)
    first = got.values[0].as_py()
    assert first["placed"] == datetime(2024, 5, 1, 12, 0, 0, 500000, tzinfo=UTC)
    assert first["totals"] == [("a", 2)] and first["ship_to"] == {"city": "X", "zip": None}
    assert first["note"] == "é" and got.values[1].as_py()["score"] is None

    arrow = json_schema.arrow_type(writer, lookup)
    ours = json_schema.encoder(writer, lookup).encode(
        pa.array([_row(i) for i in range(3)], arrow), "value")
    deserializer = JSONDeserializer(Schema(text, "JSON"), schema_registry_client=client)
    for i, payload in enumerate(ours.to_pylist()):
        back = deserializer(payload, ctx)  # validates against the schema too
        assert back["id"] == i and back["totals"] == {"x": i}
        assert back["placed"] == f"2024-05-01T12:00:{i:02d}.123456Z"


def test_fast_check_agrees_and_errors_keep_jsonschemas_words() -> None:
    """fastjsonschema takes the values that fit (the schema and its references compile);
    a value it refuses is judged and worded by jsonschema."""
    from eos_kafka_source.formats.json_check import Checker
    from eos_kafka_source.formats.json_schema_types import Resolver

    address = RegisteredSchema(10, "JSON", json.dumps(
        {"type": "object", "properties": {"city": {"type": "string", "maxLength": 4}}}),
        subject="address", version=1)
    main = _schema({"type": "object", "properties": {
        "home": {"$ref": "address.json"}, "n": {"type": "integer", "minimum": 0},
        "at": {"type": "string", "format": "date-time"}}, "required": ["n"]}, 11,
        references=(SchemaReference("address.json", "address", 1),))
    checker = Checker(Resolver(main, DictLookup(address, main)))
    assert checker._fast is not None
    assert checker.first_error({"n": 1, "home": {"city": "Rome"},
                                "at": "2024-01-01T00:00:00.5Z"}) is None
    assert checker.first_error({"n": -1}) == "at $.n: -1 is less than the minimum of 0"
    assert checker.first_error({"n": 1, "home": {"city": "Paris"}}) == (
        "at $.home.city: 'Paris' is too long")
    assert checker.first_error({}) == "at $: 'n' is a required property"
    newer = _schema({"$schema": "https://json-schema.org/draft/2020-12/schema",
                     "type": "array", "prefixItems": [{"type": "integer"}]}, 12)
    slow_only = Checker(Resolver(newer, DictLookup(newer)))
    assert slow_only._fast is None
    assert "is not of type 'integer'" in (slow_only.first_error(["x"]) or "")


STRICT = {"type": "object", "properties": {
    "qty": {"type": "integer"}, "price": {"type": "number"}, "ok": {"type": "boolean"},
    "name": {"type": "string"}, "sizes": {"type": "array", "items": {"type": "integer"}}},
    "required": ["qty"]}


@pytest.mark.parametrize(("body", "why"), [
    ('{"qty": 2.7}', 'qty is 2.7, which the reader schema\'s integer cannot hold exactly'),
    ('{"qty": -0.5}', "qty is -0.5"),
    ('{"qty": 1000000000000000.5}', "qty is 1000000000000000.5"),
    ('{"qty": 9223372036854775808}', "past the range"),
    ('{"qty": true}', "qty is true, which is not an integer"),
    ('{"qty": 1, "price": true}', "price is true, which is not a number"),
    ('{"qty": 1, "price": "1.5"}', 'price is "1.5", which is not a number'),
    ('{"qty": 1, "ok": 1}', "ok is 1, which is not a boolean"),
    ('{"qty": 1, "name": 5}', "name is 5, which is not a string"),
    ('{"qty": 1, "sizes": [1, 2.5]}', "sizes[] is 2.5"),
    ('{"price": 1.5}', "qty is missing, which the reader schema requires"),
    ('{"qty": null}', "qty is null, which the reader schema requires"),
])
def test_a_value_the_reader_type_cannot_hold_is_refused_not_converted(body: str,
                                                                      why: str) -> None:
    """As Spark's from_json: never truncated, never a boolean read as a number."""
    schema = _schema(STRICT)
    payloads = pa.array([b"\x00\x00\x00\x00\x01" + body.encode()], pa.binary())
    got = json_schema.decoder(schema, DictLookup(schema), mode=PERMISSIVE).decode(
        payloads, WHERE)
    assert got.values.to_pylist() == [None]
    assert why in got.errors[0].as_py()
    with pytest.raises(PayloadDecodeError, match="t-0 at offset 0"):
        json_schema.decoder(schema, DictLookup(schema), mode=FAILFAST).decode(payloads, WHERE)


def test_values_the_reader_type_holds_exactly_read() -> None:
    """1.0 is an integer to JSON Schema; an integer is a number."""
    schema = _schema(STRICT)
    payloads = pa.array([b"\x00\x00\x00\x00\x01" + b'{"qty": 1.0, "price": 3, "sizes": [2]}'],
                        pa.binary())
    got = json_schema.decoder(schema, DictLookup(schema), mode=FAILFAST).decode(payloads, WHERE)
    assert got.values.to_pylist() == [{"qty": 1, "price": 3.0, "ok": None, "name": None,
                                       "sizes": [2]}]


def test_the_checks_reach_into_arrays_and_maps_of_objects() -> None:
    doc = {"type": "object", "properties": {
        "lines": {"type": "array", "items": {"type": "object", "properties": {
            "qty": {"type": "integer"}}, "required": ["qty"]}},
        "prices": {"type": "object", "additionalProperties": {"type": "number"}}}}
    schema = _schema(doc)
    bodies = [b'{"lines": [{"qty": 1}, {"qty": 2.0}], "prices": {"a": 1, "b": 2.5}}',
              b'{"lines": [{"qty": 1.5}]}', b'{"lines": [{}]}', b'{"prices": {"a": false}}']
    got = json_schema.decoder(schema, DictLookup(schema), mode=PERMISSIVE).decode(
        pa.array([b"\x00\x00\x00\x00\x01" + b for b in bodies], pa.binary()), WHERE)
    assert got.values.to_pylist()[0] == {"lines": [{"qty": 1}, {"qty": 2}],
                                         "prices": [("a", 1.0), ("b", 2.5)]}
    errors = got.errors.to_pylist()
    assert errors[0] is None
    assert "lines[].qty is 1.5" in errors[1]
    assert "lines[].qty is missing" in errors[2]
    assert "prices{} is false, which is not a number" in errors[3]
