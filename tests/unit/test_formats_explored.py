"""Cases the payload explorer (tests/formats/explorer) found, shrunk, at the codec level:
each failed before its fix. The explorer's own modules run here too, without Spark: the
known-difference files parse, printed cases reload, and a Protobuf and a JSON seed hold."""

from __future__ import annotations

import json
import struct

import pyarrow as pa
import pytest

from eos_kafka_source.formats import json_schema, protobuf
from eos_kafka_source.formats.avro_types import check_names
from eos_kafka_source.formats.schemas import AVRO, FAILFAST, JSON, PROTOBUF, RegisteredSchema
from tests.formats.explorer import known, run
from tests.formats.explorer.avro_evolve import features as evolution_features
from tests.formats.explorer.cases import Case, OneSchema
from tests.formats.explorer.values import dumps, loads, same


def _where(i: int) -> str:
    return f"row {i}"


def test_json_write_leaves_out_a_null_property_another_object_requires() -> None:
    """An object's property is written as null only where that object requires it: the
    outer object requires ``p0``, the inner one does not, and its absent ``p0`` stays
    absent (it was written as null, which its string type refuses)."""
    schema = {"type": "object", "required": ["p0"], "properties": {
        "p0": {"type": "object", "properties": {"p0": {"type": "string"}}}}}
    registered = RegisteredSchema(1, JSON, json.dumps(schema))
    lookup = OneSchema(registered)
    rows = json_schema.decoder(registered, lookup, mode=FAILFAST).decode(
        pa.array([b"\x00\x00\x00\x00\x01" + b'{"p0": {}}']), _where).values
    written = json_schema.encoder(registered, lookup).encode(rows, "value").to_pylist()
    assert [json.loads(w[5:]) for w in written] == [{"p0": {}}]


def test_json_write_keeps_a_required_nullable_property_as_null() -> None:
    schema = {"type": "object", "required": ["a"], "properties": {
        "a": {"type": ["integer", "null"]}, "b": {"type": "object", "required": ["c"],
                                               "properties": {"c": {"type": ["string", "null"]},
                                                              "a": {"type": "integer"}}}}}
    registered = RegisteredSchema(1, JSON, json.dumps(schema))
    lookup = OneSchema(registered)
    rows = pa.array([{"a": None, "b": {"c": None, "a": None}}],
                    json_schema.arrow_type(registered, lookup))
    written = json_schema.encoder(registered, lookup).encode(rows, "value").to_pylist()
    assert [json.loads(w[5:]) for w in written] == [{"a": None, "b": {"c": None}}]


PROTO_OPEN_ENUM = """syntax = "proto3";
package ex;
message M { enum E { A = 0; B = 1; } E e = 1; repeated E es = 2; map<string, E> m = 3; }
"""


def test_protobuf_open_enum_number_without_a_name_writes_back() -> None:
    """proto3 enums are open: a number the schema does not name reads as its digits (as
    docs/formats.md says) and is written back as that number (it failed: 'unknown enum
    label "17"')."""
    registered = RegisteredSchema(1, PROTOBUF, PROTO_OPEN_ENUM)
    lookup = OneSchema(registered)
    # e = 17, es = [1, 17], m = {"k": 17}
    body = (b"\x08\x11" + b"\x12\x02\x01\x11"
            + b"\x1a\x05\x0a\x01k\x10\x11")
    framed = b"\x00" + struct.pack(">I", 1) + b"\x00" + body
    rows = protobuf.decoder(registered, lookup, mode=FAILFAST).decode(
        pa.array([framed]), _where).values
    assert rows.to_pylist() == [{"e": "17", "es": ["B", "17"], "m": [("k", "17")]}]
    written = protobuf.encoder(registered, lookup).encode(rows, "value").to_pylist()
    again = protobuf.decoder(registered, lookup, mode=FAILFAST).decode(
        pa.array(written), _where).values
    assert again.to_pylist() == rows.to_pylist()


def test_protobuf_enum_digits_that_are_not_a_number_still_fail_naming_the_field() -> None:
    registered = RegisteredSchema(1, PROTOBUF, PROTO_OPEN_ENUM)
    lookup = OneSchema(registered)
    arrow = protobuf.arrow_type(registered, lookup)
    with pytest.raises(Exception, match="e"):
        protobuf.encoder(registered, lookup).encode(
            pa.array([{"e": "C", "es": [], "m": []}], arrow), "value")


# --- the explorer's own parts -----------------------------------------------------------

def test_printed_cases_reload_with_bytes_nan_and_negative_zero() -> None:
    case = Case("avro", {"type": "record"}, [{"a": b"\x00\xff", "b": float("nan"),
                                              "c": -0.0, "d": ("long", 7)}])
    data = loads(case.printed())
    assert same(data["values"], case.values)
    assert not same(loads(dumps(-0.0)), 0.0)


@pytest.mark.parametrize("fmt", run.FORMATS)
def test_known_difference_files_parse_with_a_case_per_entry(fmt: str) -> None:
    for entry in known.entries(fmt):
        assert entry.reason and entry.case is not None, entry.tag
        assert entry.case.fmt == fmt


@pytest.mark.parametrize("fmt", ["protobuf", "json"])
def test_a_seed_of_protobuf_and_json_holds(fmt: str) -> None:
    """No Spark needed for these two: a small seed, the known lists judged."""
    report = run.explore(fmt, [1], 40, log=lambda line: None)
    assert not report.findings, "\n".join(f.describe() for f in report.findings)
    assert not report.stale, report.stale


def test_json_write_of_dates_inside_a_map() -> None:
    """A map's date values are written as their text, as a struct's are (they reached the
    check as date objects: 'datetime.date(2024, 2, 29) is not of type string')."""
    schema = {"type": "object", "properties": {"p2": {"type": "array", "items": {
        "type": "object", "additionalProperties": {"type": ["string", "null"],
                                                   "format": "date"}}}}}
    registered = RegisteredSchema(1, JSON, json.dumps(schema))
    lookup = OneSchema(registered)
    body = b'{"p2": [{"a": "2024-02-29", "b": null}]}'
    rows = json_schema.decoder(registered, lookup, mode=FAILFAST).decode(
        pa.array([b"\x00\x00\x00\x00\x01" + body]), _where).values
    written = json_schema.encoder(registered, lookup).encode(rows, "value").to_pylist()
    assert [json.loads(w[5:]) for w in written] == [json.loads(body)]


def test_avro_write_of_a_union_whose_unused_member_holds_nested_timestamps() -> None:
    """The union ["double", array<array<local-timestamp-millis>>] with the double branch
    taken: the array member is null, its timestamps an empty child whose buffer numpy
    would not view (it failed: 'buffer size must be a multiple of element size')."""
    from eos_kafka_source.formats import avro

    schema = {"type": "record", "name": "R1", "fields": [{"name": "f0", "type": [
        "double", {"type": "array", "items": {"type": "array", "items": {
            "type": "long", "logicalType": "local-timestamp-millis"}}}]}]}
    registered = RegisteredSchema(1, "AVRO", json.dumps(schema))
    lookup = OneSchema(registered)
    for values in ([{"f0": {"member0": 1.0, "member1": None}}],
                   [{"f0": {"member0": None, "member1": [[1000, -2000], []]}}]):
        rows = pa.array(values, avro.arrow_type(registered, lookup))
        written = avro.encoder(registered, lookup).encode(rows, "value")
        again = avro.decoder(registered, lookup, mode=FAILFAST).decode(written, _where).values
        assert again.to_pylist() == rows.to_pylist()


@pytest.mark.parametrize("member", [{"member1": [("a", 1)]}, {"member2": 7},
                                    {"member0": "8d6ae7b4-1111-4c3e-9a1e-0123456789ab"}])
def test_avro_write_of_a_union_inside_a_nullable_record(member: dict) -> None:
    """["null", record] around a record holding a union Spark shows as a struct: fastavro
    picks the outer branch by validating the value, and its validation does not know the
    inner union's (map, uuid) branch names, so every such row failed ('do not match', then
    an AttributeError from the error path reapplying the fix to the mutated row)."""
    from eos_kafka_source.formats import avro

    schema = {"type": "record", "name": "R1", "fields": [{"name": "f1", "type": [
        "null", {"type": "record", "name": "R2", "namespace": "ex.other", "fields": [
            {"name": "f2", "type": [{"type": "string", "logicalType": "uuid"},
                                    {"type": "map", "values": "int"}, "int"]}]}],
        "default": None}]}
    registered = RegisteredSchema(1, "AVRO", json.dumps(schema))
    lookup = OneSchema(registered)
    value = {"member0": None, "member1": None, "member2": None, **member}
    rows = pa.array([{"f1": {"f2": value}}, {"f1": None}], avro.arrow_type(registered, lookup))
    written = avro.encoder(registered, lookup).encode(rows, "value")
    again = avro.decoder(registered, lookup, mode=FAILFAST).decode(written, _where).values
    assert again.to_pylist() == rows.to_pylist()


def test_avro_read_of_a_recursive_writer_schema_by_a_reader_without_the_recursion() -> None:
    """The writer's record is recursive, the reader's schema leaves that field out: the
    column is the reader's, so the records read (as spark-avro reads them with avroSchema);
    they failed: 'writer schema id 2 does not load: schema 2 is recursive'."""
    import io

    import fastavro

    from eos_kafka_source.formats import avro

    node = {"type": "record", "name": "Node", "fields": [
        {"name": "next", "type": ["null", "Node"]}, {"name": "v", "type": "int"}]}
    writer = {"type": "record", "name": "R1", "fields": [
        {"name": "tree", "type": node}, {"name": "ok", "type": "boolean"}]}
    reader = {"type": "record", "name": "R1", "fields": [{"name": "ok", "type": "boolean"}]}
    written = RegisteredSchema(2, "AVRO", json.dumps(writer))
    reading = RegisteredSchema(3, "AVRO", json.dumps(reader))
    lookup = OneSchema(written, reading)
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(writer),
                               {"tree": {"next": {"next": None, "v": 2}, "v": 1}, "ok": True})
    framed = b"\x00" + struct.pack(">I", 2) + body.getvalue()
    rows = avro.decoder(reading, lookup, mode=FAILFAST).decode(pa.array([framed]), _where)
    assert rows.values.to_pylist() == [{"ok": True}]


def test_evolved_avro_reader_schemas_define_each_name_once() -> None:
    """An evolution that removed a field and then added one named a second field
    ``added<N>`` (seeds 3801..3805 did): an invalid schema spark-avro refuses, not a
    difference to find. Every generated schema of these seeds passes eoskafka's check."""
    evolved = 0
    for seed in range(3801, 3806):
        for case in run.seeded("avro", seed, 100):
            for n, schema in enumerate([case.schema] if "writer" not in case.schema
                                       else [case.schema["writer"], case.schema["reader"]]):
                evolved += n
                check_names([schema], RegisteredSchema(1, AVRO, json.dumps(schema)))
    assert evolved > 50


@pytest.mark.parametrize(("reader", "tagged"), [
    ("string", True),
    (["null", "string"], True),  # promoted, then made nullable (explorer seed 20261129, case 20)
    (["null", "bytes", "string"], False),  # the bytes branch matches first: no promotion
    ("bytes", False),
])
def test_bytes_read_as_string_is_tagged_through_a_nullable_reader(reader: object,
                                                                  tagged: bool) -> None:
    writer = {"type": "record", "name": "R1", "fields": [{"name": "f0", "type": "bytes"}]}
    evolved = {"type": "record", "name": "R1", "fields": [{"name": "f0", "type": reader}]}
    assert ("bytes-as-string" in evolution_features(writer, evolved)) is tagged
