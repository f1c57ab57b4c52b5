"""The Avro codec: spark-avro's type mapping, round trips, schema resolution, bad records."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time
from decimal import Decimal
from io import BytesIO
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from eos_kafka_source.errors import (
    ConfigError,
    PayloadDecodeError,
    PayloadEncodeError,
    SchemaRegistryError,
)
from eos_kafka_source.formats import avro, framing
from eos_kafka_source.formats.avro_types import spark_reads_time
from eos_kafka_source.formats.schemas import FAILFAST, PERMISSIVE, SchemaReference
from tests.unit.avro_helpers import Lookup, where


def record(*fields: tuple[str, Any], name: str = "R") -> dict[str, Any]:
    """A record schema; a field given as {"type": ..., "default": ...} keeps its default."""
    def one(n: str, t: Any) -> dict[str, Any]:
        if isinstance(t, dict) and "default" in t and set(t) <= {"type", "default"}:
            return {"name": n, **t}
        return {"name": n, "type": t}
    return {"type": "record", "name": name, "fields": [one(n, t) for n, t in fields]}


def field_type(avro_type: Any) -> pa.Field:
    lookup = Lookup()
    reg = lookup.add(record(("f", avro_type)))
    return avro.arrow_type(reg, lookup).field("f")


def f(t: pa.DataType, nullable: bool = False) -> tuple[pa.DataType, bool]:
    return t, nullable


# spark-avro's SchemaConverters.toSqlType, as Arrow types (nullability included).
MAPPING = [
    ("null", f(pa.null(), True)),
    ("boolean", f(pa.bool_())),
    ("int", f(pa.int32())),
    ("long", f(pa.int64())),
    ("float", f(pa.float32())),
    ("double", f(pa.float64())),
    ("bytes", f(pa.binary())),
    ("string", f(pa.string())),
    ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, f(pa.string())),
    ({"type": "fixed", "name": "F", "size": 4}, f(pa.binary())),
    ({"type": "int", "logicalType": "date"}, f(pa.date32())),
    ({"type": "long", "logicalType": "timestamp-millis"}, f(pa.timestamp("us", "UTC"))),
    ({"type": "long", "logicalType": "timestamp-micros"}, f(pa.timestamp("us", "UTC"))),
    ({"type": "long", "logicalType": "local-timestamp-millis"}, f(pa.timestamp("us"))),
    ({"type": "long", "logicalType": "local-timestamp-micros"}, f(pa.timestamp("us"))),
    ({"type": "int", "logicalType": "time-millis"}, f(pa.int32())),
    ({"type": "long", "logicalType": "time-micros"},
     f(pa.time64("ns") if spark_reads_time() else pa.int64())),
    ({"type": "string", "logicalType": "uuid"}, f(pa.string())),
    ({"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
     f(pa.decimal128(9, 2))),
    ({"type": "fixed", "name": "D", "size": 8, "logicalType": "decimal", "precision": 18},
     f(pa.decimal128(18, 0))),
    # a fixed too small for its precision: Avro drops the logical type
    ({"type": "fixed", "name": "D", "size": 2, "logicalType": "decimal", "precision": 9},
     f(pa.binary())),
    ({"type": "int", "logicalType": "timestamp-millis"}, f(pa.int32())),  # misplaced: ignored
    ({"type": "array", "items": "long"}, f(pa.list_(pa.field("element", pa.int64(), False)))),
    ({"type": "array", "items": ["null", "long"]}, f(pa.list_(pa.int64()))),
    ({"type": "map", "values": "string"},
     f(pa.map_(pa.string(), pa.field("value", pa.string(), False)))),
    (["null", "string"], f(pa.string(), True)),
    (["string", "null"], f(pa.string(), True)),
    (["int"], f(pa.int32())),
    (["int", "long"], f(pa.int64())),
    (["float", "double", "null"], f(pa.float64(), True)),
    (["int", "string"], f(pa.struct([("member0", pa.int32()), ("member1", pa.string())]))),
    (["null", "int", "string"],
     f(pa.struct([("member0", pa.int32()), ("member1", pa.string())]), True)),
    (record(("a", "int"), name="In"), f(pa.struct([pa.field("a", pa.int32(), False)]))),
]


@pytest.mark.parametrize(("avro_type", "expected"), MAPPING, ids=lambda v: json.dumps(v)[:60]
                         if not isinstance(v, tuple) else "")
def test_arrow_type_as_spark_avro_maps_it(avro_type: Any, expected: tuple[pa.DataType, bool]
                                          ) -> None:
    got = field_type(avro_type)
    assert (got.type, got.nullable) == expected


def test_time_micros_is_a_long_before_spark_4_2(monkeypatch: pytest.MonkeyPatch) -> None:
    """spark-avro reads time-micros as TIME(6) from Spark 4.2 on, as a long before."""
    import pyspark.version

    spark_reads_time.cache_clear()
    try:
        monkeypatch.setattr(pyspark.version, "__version__", "4.1.1")
        assert field_type({"type": "long", "logicalType": "time-micros"}).type == pa.int64()
        spark_reads_time.cache_clear()
        monkeypatch.setattr(pyspark.version, "__version__", "4.2.0")
        assert field_type({"type": "long", "logicalType": "time-micros"}).type == \
            pa.time64("ns")
    finally:
        spark_reads_time.cache_clear()


def test_named_types_by_name_namespaces_and_references() -> None:
    lookup = Lookup()
    lookup.add({"type": "record", "name": "Money", "namespace": "com.shop", "fields": [
        {"name": "cents", "type": "long"}]}, subject="money")
    reg = lookup.add({"type": "record", "name": "Order", "namespace": "com.shop", "fields": [
        {"name": "price", "type": "Money"},
        {"name": "tip", "type": ["null", "com.shop.Money"]},
        {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["A"]}},
        {"name": "again", "type": "State"}]},
        references=(SchemaReference("com.shop.Money", "money", 1),))
    money = pa.struct([pa.field("cents", pa.int64(), False)])
    assert avro.arrow_type(reg, lookup) == pa.struct([
        pa.field("price", money, False), pa.field("tip", money, True),
        pa.field("state", pa.string(), False), pa.field("again", pa.string(), False)])


def test_recursive_record_is_a_clear_error() -> None:
    lookup = Lookup()
    reg = lookup.add(record(("next", ["null", "Node"]), name="Node"))
    with pytest.raises(ConfigError, match="recursive.*Node"):
        avro.arrow_type(reg, lookup)


def test_unknown_named_type_is_a_clear_error() -> None:
    lookup = Lookup()
    reg = lookup.add(record(("m", "Money")))
    with pytest.raises(ConfigError, match="'Money'.*reference"):
        avro.arrow_type(reg, lookup)


# --- round trips ---------------------------------------------------------------------

EVERY_TYPE = record(
    ("b", "boolean"), ("i", "int"), ("l", "long"), ("fl", "float"), ("d", "double"),
    ("by", "bytes"), ("s", "string"),
    ("e", {"type": "enum", "name": "E", "symbols": ["A", "B"]}),
    ("fx", {"type": "fixed", "name": "F", "size": 3}),
    ("dt", {"type": "int", "logicalType": "date"}),
    ("tsm", {"type": "long", "logicalType": "timestamp-millis"}),
    ("tsu", {"type": "long", "logicalType": "timestamp-micros"}),
    ("ltm", {"type": "long", "logicalType": "local-timestamp-millis"}),
    ("ltu", {"type": "long", "logicalType": "local-timestamp-micros"}),
    ("tm", {"type": "int", "logicalType": "time-millis"}),
    ("tu", {"type": "long", "logicalType": "time-micros"}),
    ("u", {"type": "string", "logicalType": "uuid"}),
    ("dec", {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 4}),
    ("decf", {"type": "fixed", "name": "DF", "size": 5, "logicalType": "decimal",
              "precision": 10, "scale": 2}),
    ("arr", {"type": "array", "items": ["null", "string"]}),
    ("m", {"type": "map", "values": {"type": "long", "logicalType": "timestamp-millis"}}),
    ("n", ["null", "long"]),
    ("un", ["null", "int", "string", record(("x", "int"), name="X")]),
    ("nested", record(("when", {"type": "int", "logicalType": "date"}),
                      ("amounts", {"type": "array", "items": {
                          "type": "bytes", "logicalType": "decimal", "precision": 5,
                          "scale": 1}}), name="Nested")),
)


def _every_type_rows() -> list[dict[str, Any] | None]:
    t = datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)
    first = {
        "b": True, "i": -2**31, "l": 2**63 - 1, "fl": 1.5, "d": -2.25, "by": b"\x00\xff",
        "s": "héllo", "e": "B", "fx": b"abc", "dt": date(1969, 12, 31), "tsm": t,
        "tsu": datetime(1900, 1, 1, 0, 0, 0, 1, tzinfo=UTC), "ltm": t.replace(tzinfo=None),
        "ltu": datetime(2262, 1, 1, 0, 0, 0, 999999), "tm": 86_399_999,
        "tu": time(23, 59, 59, 999999) if spark_reads_time() else -1,
        "u": "a8098c1a-f86e-11da-bd1a-00112444be1e",
        "dec": Decimal("-1234567890123456789012345678901234.5678"),
        "decf": Decimal("-0.01"), "arr": ["a", None, ""],
        "m": [("k", t), ("z", datetime(1960, 1, 1, tzinfo=UTC))], "n": None,
        "un": {"member0": None, "member1": None, "member2": {"x": 7}},
        "nested": {"when": date(2000, 2, 29), "amounts": [Decimal("9999.9"), Decimal("0.0")]},
    }
    second = {**first, "b": False, "i": 5, "l": -(2**63), "by": b"", "s": "", "e": "A",
              "dec": Decimal("0"), "decf": Decimal("99999999.99"), "arr": [], "m": [],
              "n": 42, "un": {"member0": 3, "member1": None, "member2": None},
              "nested": {"when": date(1, 1, 1), "amounts": []}}
    third = {**first, "dec": Decimal("1E-4"), "decf": Decimal("-99999999.99"),
             "un": {"member0": None, "member1": "s", "member2": None}}
    fourth = {**first, "un": None}
    return [first, None, second, third, fourth]


def _codec(schema: Any) -> tuple[Lookup, Any, Any]:
    lookup = Lookup()
    reg = lookup.add(schema)
    return lookup, avro.encoder(reg, lookup), avro.decoder(reg, lookup, mode=FAILFAST)


def test_every_type_round_trips() -> None:
    _, enc, dec = _codec(EVERY_TYPE)
    column = pa.array(_every_type_rows(), dec.arrow_type)
    payloads = enc.encode(column, "value")
    assert payloads.null_count == 1 and payloads[0].as_py()[:5] == framing.header(1)
    decoded = dec.decode(payloads, where)
    assert decoded.values.type == dec.arrow_type
    decoded.values.cast(dec.arrow_type)  # pyspark's check: no null in a non-nullable field
    assert decoded.values.to_pylist() == column.to_pylist()
    assert decoded.schema_ids.to_pylist() == [1, None, 1, 1, 1]
    assert decoded.errors is None


def test_values_as_fastavro_reads_them_with_logical_types() -> None:
    """Our column-wise logical types agree with fastavro's own readers."""
    import fastavro

    _, enc, dec = _codec(EVERY_TYPE)
    column = pa.array(_every_type_rows(), dec.arrow_type)
    payloads = enc.encode(column, "value").to_pylist()
    parsed = fastavro.parse_schema(EVERY_TYPE)
    for ours, payload in zip(column.to_pylist(), payloads, strict=True):
        if payload is None:
            continue
        theirs = fastavro.schemaless_reader(_io(payload[5:]), parsed)
        for name in ("dt", "tsm", "tsu", "ltm", "ltu", "dec", "decf", "nested"):
            assert theirs[name] == ours[name], name
        assert theirs["u"] == __import__("uuid").UUID(ours["u"])


def _io(b: bytes) -> Any:
    from io import BytesIO

    return BytesIO(b)


def test_a_bare_primitive_schema() -> None:
    _, enc, dec = _codec('"string"')
    assert dec.arrow_type == pa.string()
    payloads = enc.encode(pa.array(["a", None, ""]), "key")
    assert dec.decode(payloads, where).values.to_pylist() == ["a", None, ""]


def test_large_column_round_trips_in_one_piece() -> None:
    _, enc, dec = _codec(record(("id", "long"), ("name", ["null", "string"])))
    rows = [{"id": i, "name": None if i % 3 else f"n{i}"} for i in range(20_000)]
    payloads = enc.encode(pa.array(rows, dec.arrow_type), "value")
    assert dec.decode(payloads.slice(5), where).values.to_pylist() == rows[5:]


# --- resolution ----------------------------------------------------------------------


def _written(lookup: Lookup, writer: Any, rows: list[Any]) -> tuple[pa.Array, int]:
    reg = lookup.add(writer)
    enc = avro.encoder(reg, lookup)
    return enc.encode(pa.array(rows, enc.arrow_type), "value"), reg.id


def test_resolution_added_removed_widened_and_enum() -> None:
    lookup = Lookup()
    payloads, _ = _written(lookup, record(
        ("id", "int"), ("gone", "string"), ("kind", {"type": "enum", "name": "K",
                                                      "symbols": ["A", "B", "C"]}),
        ("score", "float")), [{"id": 1, "gone": "x", "kind": "C", "score": 0.5},
                              {"id": 2, "gone": "y", "kind": "A", "score": 1.0}])
    reader = lookup.add(record(
        ("id", "long"), ("kind", {"type": "enum", "name": "K", "symbols": ["A", "B"],
                                  "default": "B"}),
        ("score", "double"), ("added", {"type": ["null", "string"], "default": None}),
        ("count", {"type": "int", "default": 7})))
    got = avro.decoder(reader, lookup, mode=FAILFAST).decode(payloads, where)
    assert got.values.to_pylist() == [
        {"id": 1, "kind": "B", "score": 0.5, "added": None, "count": 7},
        {"id": 2, "kind": "A", "score": 1.0, "added": None, "count": 7}]
    assert got.schema_ids.to_pylist() == [1, 1]


def test_reader_logical_type_applies_to_a_plain_writer_long() -> None:
    """Avro (and spark-avro) read a logical type by the reader's annotation."""
    lookup = Lookup()
    payloads, _ = _written(lookup, record(("t", "long")), [{"t": 1_500}])
    reader = lookup.add(record(("t", {"type": "long", "logicalType": "timestamp-millis"})))
    got = avro.decoder(reader, lookup, mode=FAILFAST).decode(payloads, where)
    assert got.values.to_pylist() == [{"t": datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=UTC)}]


def test_writer_schemas_are_looked_up_once_per_id() -> None:
    lookup = Lookup()
    first, _ = _written(lookup, record(("a", "int")), [{"a": 1}] * 50)
    second, _ = _written(lookup, record(("a", "long")), [{"a": 2}] * 50)
    reader = lookup.add(record(("a", "long")))
    dec = avro.decoder(reader, lookup, mode=FAILFAST)
    both = pa.concat_arrays([first, second])
    assert dec.decode(both, where).values.to_pylist() == [{"a": 1}] * 50 + [{"a": 2}] * 50
    dec.decode(both, where)
    assert lookup.calls == 2


# --- bad records ---------------------------------------------------------------------


def _bad_column(lookup: Lookup) -> tuple[pa.Array, list[str | None]]:
    good, writer_id = _written(lookup, record(("a", "int"), ("s", "string")),
                               [{"a": 1, "s": "x"}])
    other, _ = _written(lookup, record(("a", "string"), name="R"), [{"a": "not an int"}])
    g = good[0].as_py()
    rows = [g, b"\x00\x00", b"\x01" + g[1:], framing.header(99) + g[5:], g[:-1],
            other[0].as_py(), None, g]
    why = [None, "shorter than its 5-byte header", "first byte is not 0",
           "the registry has no schema id 99", "does not decode", "cannot be resolved",
           None, None]
    return pa.array(rows, pa.binary()), why


def test_bad_records_permissive() -> None:
    lookup = Lookup()
    column, why = _bad_column(lookup)
    reader = lookup.add(record(("a", "int"), ("s", {"type": "string", "default": "d"})))
    got = avro.decoder(reader, lookup, mode=PERMISSIVE).decode(column, where)
    assert got.values.to_pylist() == [{"a": 1, "s": "x"}] + [None] * 6 + [{"a": 1, "s": "x"}]
    assert got.errors is not None
    for error, expected in zip(got.errors.to_pylist(), why, strict=True):
        assert (error is None) == (expected is None)
        if expected:
            assert expected in error, error
    assert got.schema_ids.to_pylist() == [1, None, None, 99, 1, 2, None, 1]


@pytest.mark.parametrize("row", range(1, 6))
def test_bad_records_failfast_name_where_id_why_and_fix(row: int) -> None:
    lookup = Lookup()
    column, why = _bad_column(lookup)
    reader = lookup.add(record(("a", "int"), ("s", {"type": "string", "default": "d"})))
    dec = avro.decoder(reader, lookup, mode=FAILFAST)
    only = pa.concat_arrays([column.slice(0, 1), column.slice(row, 1)])
    with pytest.raises(PayloadDecodeError) as err:
        dec.decode(only, where)
    first = str(err.value).splitlines()[0]
    assert first.startswith("[EOSKAFKA_MALFORMED_PAYLOAD] orders-3 at offset 101: ")
    assert why[row] in first and "PERMISSIVE" in first
    if row >= 3:
        assert f"schema id {99 if row == 3 else 1 if row == 4 else 2}" in first


def test_an_unreachable_registry_raises_in_either_mode() -> None:
    lookup = Lookup()
    payloads, _ = _written(lookup, record(("a", "int")), [{"a": 1}])
    reader = lookup.add(record(("a", "long")))
    dec = avro.decoder(reader, lookup, mode=PERMISSIVE)
    lookup.down = True
    with pytest.raises(SchemaRegistryError, match="did not answer"):
        dec.decode(payloads, where)


def test_a_decimal_beyond_its_precision_is_a_row_error() -> None:
    lookup = Lookup()
    payloads, _ = _written(lookup, record(("d", {"type": "bytes", "logicalType": "decimal",
                                                 "precision": 10, "scale": 0})),
                           [{"d": Decimal(123)}, {"d": Decimal(9_999_999_999)}])
    reader = lookup.add(record(("d", {"type": "bytes", "logicalType": "decimal",
                                      "precision": 3, "scale": 0})))
    got = avro.decoder(reader, lookup, mode=PERMISSIVE).decode(payloads, where)
    assert got.values.to_pylist() == [{"d": Decimal(123)}, None]
    assert got.errors is not None and "cannot hold" in got.errors[1].as_py()


# --- encoding errors -----------------------------------------------------------------


def test_a_null_where_the_schema_allows_none_names_column_and_field() -> None:
    _, enc, _ = _codec(record(("inner", record(("x", "string"), name="In"))))
    column = pa.array([{"inner": {"x": "ok"}}, {"inner": {"x": None}}],
                      pa.struct([("inner", pa.struct([("x", pa.string())]))]))
    with pytest.raises(PayloadEncodeError,
                       match=r"column value, row 1: value\.inner\.x is null"):
        enc.encode(column, "value")


def test_fields_are_matched_by_name() -> None:
    _, enc, _ = _codec(record(("a", "int"), ("b", ["null", "string"])))
    swapped = pa.array([{"b": "x", "a": 1}], pa.struct([("b", pa.string()), ("a", pa.int64())]))
    assert enc.encode(swapped, "v")[0].as_py() == framing.header(1) + b"\x02\x02\x02x"
    only_a = pa.array([{"a": 1}], pa.struct([("a", pa.int32())]))
    assert enc.encode(only_a, "v")[0].as_py() == framing.header(1) + b"\x02\x00"
    with pytest.raises(PayloadEncodeError, match=r"v\.c has no field"):
        enc.encode(pa.array([{"a": 1, "c": 2}]), "v")
    with pytest.raises(PayloadEncodeError, match="no field a"):
        enc.encode(pa.array([{"b": "x"}]), "v")


def test_a_value_out_of_the_schema_range() -> None:
    _, enc, _ = _codec(record(("a", "int")))
    with pytest.raises(PayloadEncodeError, match="column value"):
        enc.encode(pa.array([{"a": 2**40}]), "value")


# --- schema_for: what spark-avro's to_avro derives ----------------------------------


def test_schema_for_as_spark_avro_derives_it() -> None:
    t = pa.struct([
        pa.field("id", pa.int64(), False), pa.field("name", pa.string()),
        pa.field("small", pa.int16(), False), pa.field("at", pa.timestamp("us", "UTC")),
        pa.field("local", pa.timestamp("us"), False), pa.field("day", pa.date32(), False),
        pa.field("amount", pa.decimal128(10, 2)), pa.field("raw", pa.binary(), False),
        pa.field("tags", pa.list_(pa.field("element", pa.string(), False)), False),
        pa.field("attrs", pa.map_(pa.string(), pa.float64())),
        pa.field("inner", pa.struct([pa.field("x", pa.bool_(), False),
                                     pa.field("deep", pa.struct([("y", pa.float32())]))])),
    ])
    assert json.loads(avro.schema_for(t)) == {
        "type": "record", "name": "topLevelRecord", "fields": [
            {"name": "id", "type": "long"},
            {"name": "name", "type": ["string", "null"]},
            {"name": "small", "type": "int"},
            {"name": "at", "type": [{"type": "long", "logicalType": "timestamp-micros"},
                                    "null"]},
            {"name": "local", "type": {"type": "long",
                                       "logicalType": "local-timestamp-micros"}},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "amount", "type": [{"type": "fixed", "name": "fixed",
                                         "namespace": "topLevelRecord.amount", "size": 5,
                                         "logicalType": "decimal", "precision": 10,
                                         "scale": 2}, "null"]},
            {"name": "raw", "type": "bytes"},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "attrs", "type": [{"type": "map", "values": ["double", "null"]},
                                       "null"]},
            {"name": "inner", "type": [{"type": "record", "name": "inner",
                                        "namespace": "topLevelRecord", "fields": [
                {"name": "x", "type": "boolean"},
                {"name": "deep", "type": [{"type": "record", "name": "deep",
                                           "namespace": "topLevelRecord.inner", "fields": [
                    {"name": "y", "type": ["float", "null"]}]}, "null"]}]}, "null"]},
        ]}
    assert json.loads(avro.schema_for(pa.struct([("a", pa.int32())]), name="Ev",
                                      namespace="com.x"))["namespace"] == "com.x"


def test_schema_for_maps_back_to_the_same_type() -> None:
    t = pa.struct([
        pa.field("id", pa.int64(), False), pa.field("name", pa.string()),
        pa.field("at", pa.timestamp("us", "UTC")), pa.field("amount", pa.decimal128(38, 9)),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("m", pa.map_(pa.string(), pa.field("value", pa.int32(), False)), False),
        pa.field("in", pa.struct([pa.field("x", pa.bool_(), False)])),
        *([pa.field("t", pa.time64("ns"))] if spark_reads_time() else [])])
    lookup = Lookup()
    reg = lookup.add(avro.schema_for(t))
    assert avro.arrow_type(reg, lookup) == t


def test_schema_for_refuses_what_spark_has_no_avro_for() -> None:
    with pytest.raises(ConfigError, match="string keys"):
        avro.schema_for(pa.struct([("m", pa.map_(pa.int32(), pa.int32()))]))
    with pytest.raises(ConfigError, match="no Avro type"):
        avro.schema_for(pa.struct([("u", pa.uint64())]))


# --- the column-wise encoder writes what fastavro writes -------------------------------

EDGES = [0, 1, -1, 63, -64, 64, -65, 8191, -8192, 8192, 2**31 - 1, -2**31, 2**62, -2**62,
         2**63 - 1, -2**63]

FLAT = record(
    ("l", "long"), ("i", "int"), ("b", "boolean"), ("fl", "float"), ("d", "double"),
    ("s", "string"), ("by", "bytes"), ("e", {"type": "enum", "name": "E", "symbols": ["A", "B"]}),
    ("fx", {"type": "fixed", "name": "F", "size": 2}),
    ("dt", {"type": "int", "logicalType": "date"}),
    ("ts", {"type": "long", "logicalType": "timestamp-millis"}),
    ("lt", {"type": "long", "logicalType": "local-timestamp-micros"}),
    ("tu", {"type": "long", "logicalType": "time-micros"}),
    ("dec", {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 3}),
    ("decf", {"type": "fixed", "name": "DF", "size": 9, "logicalType": "decimal",
              "precision": 20, "scale": 3}),
    ("n1", ["null", "long"]), ("n2", ["string", "null"]),
    ("inner", ["null", record(("x", "int"), ("y", ["null", "string"]), name="In")]),
    ("empty", record(name="Empty")),
)


def _flat_rows(n: int) -> list[dict[str, Any] | None]:
    import random

    rng = random.Random(11)
    out: list[dict[str, Any] | None] = []
    for k in range(n):
        edge = EDGES[k % len(EDGES)]
        out.append(None if k % 17 == 5 else {
            "l": edge, "i": max(-2**31, min(2**31 - 1, edge)), "b": k % 2 == 0,
            "fl": rng.uniform(-1e6, 1e6), "d": rng.uniform(-1e300, 1e300),
            "s": "é" * (k % 70), "by": rng.randbytes(k % 200), "e": "AB"[k % 2],
            "fx": rng.randbytes(2), "dt": date(1, 1, 1) if k % 3 else date(9999, 12, 31),
            "ts": datetime(1970, 1, 1, tzinfo=UTC) if k % 4 else datetime(2500, 1, 1,
                                                                          tzinfo=UTC),
            "lt": datetime(1000, 1, 1, 0, 0, 0, k),
            "tu": time(k % 24, 0, 0, k) if spark_reads_time() else edge,
            "dec": Decimal(edge % 10**17) / 1000,
            "decf": Decimal(-edge % 10**17) / 1000, "n1": None if k % 3 == 0 else edge,
            "n2": None if k % 2 else f"s{k}",
            "inner": None if k % 5 == 0 else {"x": k, "y": None if k % 7 else "y"},
            "empty": {}})
    return out


def test_column_wise_encoding_is_fastavros_byte_for_byte() -> None:
    from eos_kafka_source.formats import avro_columnar

    _, enc, dec = _codec(FLAT)
    assert avro_columnar.supported(enc.root)
    column = pa.array(_flat_rows(600), dec.arrow_type)
    raw = enc._prepare(column, "value")
    ours = avro_columnar.encode(raw, enc.root, framing.header(1))
    assert ours is not None
    assert ours.to_pylist() == enc._one_by_one(raw, "value").to_pylist()
    assert dec.decode(enc.encode(column, "value"), where).values.equals(column)


@pytest.mark.parametrize("schema", [
    '"long"', '"string"', json.dumps(["null", "double"]),
    json.dumps(["null", record(("a", "int"))])])
def test_column_wise_encoding_of_bare_and_top_level_nullable_schemas(schema: str) -> None:
    from eos_kafka_source.formats import avro_columnar

    _, enc, dec = _codec(schema)
    values = {"long": [5, None, -2**63], "string": ["x", None, ""],
              "double": [0.5, None, -0.0]}.get(str(dec.arrow_type).split("<")[0].replace(
                  "int64", "long").replace("float64", "double"), [{"a": 1}, None, {"a": -1}])
    column = pa.array(values, dec.arrow_type)
    raw = enc._prepare(column, "v")
    ours = avro_columnar.encode(raw, enc.root, framing.header(1))
    assert ours is not None and ours.to_pylist() == enc._one_by_one(raw, "v").to_pylist()
    assert dec.decode(ours, where).values.to_pylist() == values


@pytest.mark.parametrize(("field", "value", "why"), [
    ("e", "C", "E"), ("fx", b"abc", "fx"), ("s", None, "value.s is null")])
def test_column_wise_misfits_are_named_by_the_record_by_record_path(
        field: str, value: Any, why: str) -> None:
    _, enc, dec = _codec(FLAT)
    rows = _flat_rows(3)
    rows[2] = {**rows[2], field: value}  # type: ignore[dict-item]
    with pytest.raises(PayloadEncodeError, match=f"column value, row 2: .*{why}"):
        enc.encode(pa.array(rows, dec.arrow_type), "value")


def test_column_wise_varints_are_fastavros_at_every_width() -> None:
    from eos_kafka_source.formats import avro_columnar

    edges = sorted({s * ((1 << (7 * k)) + d) for k in range(10) for d in (-1, 0, 1)
                    for s in (1, -1)} | {2**63 - 1, -2**63})
    edges = [e for e in edges if -2**63 <= e < 2**63]
    parsed = fastavro.parse_schema("long")

    def fastavros(v: int) -> bytes:
        out = BytesIO()
        fastavro.schemaless_writer(out, parsed, v)
        return out.getvalue()

    for values in (edges, [e for e in edges if abs(e) < 2**40], [300, 301], [1, 2]):
        got = avro_columnar.varints(np.array(values, np.int64)).to_pylist()
        assert got == [fastavros(v) for v in values]


def test_column_wise_encoding_of_slices_and_values_under_null_records() -> None:
    """A batch that starts inside its buffers (a slice), and a nullable record whose null
    rows still hold field values (Arrow keeps a null struct's children): those values are
    not written, byte for byte as fastavro writes the rows."""
    from eos_kafka_source.formats import avro_columnar

    schema = record(("k", "long"), ("inner", ["null", record(
        ("s", "string"), ("n", ["null", "long"]), ("d", "double"), name="In")]),
        ("t", ["string", "null"]))
    _, enc, dec = _codec(schema)
    rows = [{"k": k * 10**k % 2**40, "inner": {"s": "é" * (k % 5), "n": None if k % 3 else k,
                                                "d": k / 3},
             "t": None if k % 4 == 1 else f"t{k}"} for k in range(40)]
    column = pa.array(rows, dec.arrow_type)
    children = [column.field(i) for i in range(3)]
    hidden = pa.array([k % 2 == 0 for k in range(40)])  # odd rows: a null record, kept data
    inner = pa.StructArray.from_arrays(children[1].flatten(), fields=list(
        dec.arrow_type.field("inner").type), mask=pc.invert(hidden))
    column = pa.StructArray.from_arrays([children[0], inner, children[2]],
                                        fields=list(dec.arrow_type))
    expected = [{**r, "inner": r["inner"] if k % 2 == 0 else None} for k, r in enumerate(rows)]
    for part, want in ((column, expected), (column.slice(7, 20), expected[7:27])):
        raw = enc._prepare(part, "v")
        ours = avro_columnar.encode(raw, enc.root, framing.header(1))
        assert ours is not None and ours.to_pylist() == enc._one_by_one(raw, "v").to_pylist()
        assert dec.decode(ours, where).values.to_pylist() == want


def test_a_schema_the_column_wise_path_does_not_cover_is_written_record_by_record() -> None:
    from eos_kafka_source.formats import avro_columnar

    _, enc, dec = _codec(record(("a", {"type": "array", "items": "long"}),
                                ("u", ["null", "long", "string"])))
    assert not avro_columnar.supported(enc.root)
    rows = [{"a": [1, 2], "u": {"member0": 3, "member1": None}},
            {"a": [], "u": {"member0": None, "member1": "x"}}, {"a": [-1], "u": None}]
    column = pa.array(rows, dec.arrow_type)
    payloads = enc.encode(column, "v")
    assert payloads.to_pylist() == enc._one_by_one(enc._prepare(column, "v"), "v").to_pylist()
    assert dec.decode(payloads, where).values.to_pylist() == rows


def test_references_round_trip_and_resolve() -> None:
    """Confluent's schema references: a named type defined under another subject."""
    lookup = Lookup()
    lookup.add({"type": "record", "name": "Money", "namespace": "com.shop", "fields": [
        {"name": "cents", "type": "long"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]},
        subject="money")
    refs = (SchemaReference("com.shop.Money", "money", 1),)
    writer = lookup.add({"type": "record", "name": "Order", "namespace": "com.shop",
                         "fields": [{"name": "price", "type": "Money"},
                                    {"name": "tip", "type": ["null", "com.shop.Money"]}]},
                        references=refs)
    rows = [{"price": {"cents": 5, "at": datetime(2020, 1, 1, tzinfo=UTC)}, "tip": None},
            {"price": {"cents": -1, "at": datetime(1960, 1, 1, tzinfo=UTC)},
             "tip": {"cents": 2, "at": datetime(2020, 1, 1, 0, 0, 1, tzinfo=UTC)}}]
    enc = avro.encoder(writer, lookup)
    payloads = enc.encode(pa.array(rows, enc.arrow_type), "value")
    assert avro.decoder(writer, lookup, mode=FAILFAST).decode(
        payloads, where).values.to_pylist() == rows
    reader = lookup.add({"type": "record", "name": "Order", "namespace": "com.shop",
                         "fields": [{"name": "price", "type": "Money"}]}, references=refs)
    assert avro.decoder(reader, lookup, mode=FAILFAST).decode(
        payloads, where).values.to_pylist() == [{"price": r["price"]} for r in rows]


# --- the column-wise decoder reads what fastavro reads -----------------------------------


def test_column_wise_decoding_is_fastavros() -> None:
    _, enc, dec = _codec(FLAT)
    column = pa.array(_flat_rows(600), dec.arrow_type)
    framed = framing.split(enc.encode(column, "value"))
    ours = dec._column_wise(framed)
    assert ours is not None and ours.type == dec.arrow_type
    data = framed.data.tobytes()
    theirs = dec._arrow(dec._all_good(framed, framed.schema_ids.tolist(), data), where,
                        [], {})
    assert ours.equals(theirs) and ours.equals(column)
    for values in (ours, theirs):  # no null in a non-nullable field, even under a null parent
        values.cast(dec.arrow_type)  # (pyspark's check before it takes a batch)


def _flat_payload(**change: Any) -> bytes:
    _, enc, dec = _codec(FLAT)
    row = {**_flat_rows(1)[0], **change}  # type: ignore[dict-item]
    return enc.encode(pa.array([row], dec.arrow_type), "value")[0].as_py()


@pytest.mark.parametrize(("damage", "why"), [
    (lambda p: p[:-3], "does not decode"),
    (lambda p: p.replace(b"\xc3\xa9", b"\xc3\x28", 1), "does not decode"),  # bad UTF-8
    (lambda p: p + b"\x00\x01", None),  # trailing bytes: ignored, as Confluent's readers do
])
def test_column_wise_decoding_leaves_bad_rows_to_the_row_reader(damage: Any,
                                                                why: str | None) -> None:
    _, enc, dec = _codec(FLAT)
    good = enc.encode(pa.array(_flat_rows(40), dec.arrow_type), "value")
    rows = good.to_pylist()
    rows[9] = damage(_flat_payload(s="é" * 5))
    got = avro.decoder(dec.reader, dec.lookup, mode=PERMISSIVE).decode(
        pa.array(rows, pa.binary()), where)
    expected = pa.array(_flat_rows(40), dec.arrow_type).to_pylist()
    changed = {**_flat_rows(1)[0], "s": "é" * 5}  # type: ignore[dict-item]
    expected[9] = None if why else pa.array([changed], dec.arrow_type).to_pylist()[0]
    assert got.values.to_pylist() == expected
    errors = got.errors.to_pylist() if got.errors is not None else [None] * 40
    assert [i for i, e in enumerate(errors) if e] == ([9] if why else [])
    if why:
        assert why in errors[9]


def test_an_enum_index_out_of_range_is_a_row_error() -> None:
    lookup = Lookup()
    wide = lookup.add(record(("e", {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]})))
    payload = avro.encoder(wide, lookup).encode(pa.array([{"e": "C"}]), "v")[0].as_py()
    narrow = lookup.add(record(("e", {"type": "enum", "name": "E", "symbols": ["A", "B"]})))
    got = avro.decoder(narrow, lookup, mode=PERMISSIVE).decode(
        pa.array([framing.header(narrow.id) + payload[5:]]), where)
    assert got.values.to_pylist() == [None]
    assert got.errors is not None and "does not decode" in got.errors[0].as_py()


# --- unions Spark shows as struct<member0, ...> with branches of one Python type -------


def _fastavro_framed(lookup: Lookup, schema: Any, rows: list[Any]) -> pa.Array:
    """Rows written by fastavro itself (a union value as (branch, value): the writer's
    branch chosen), framed with the schema's id."""
    import fastavro

    reg = lookup.add(schema)
    parsed = fastavro.parse_schema(schema)
    out = []
    for row in rows:
        buf = _io(b"")
        fastavro.schemaless_writer(buf, parsed, row)
        out.append(framing.header(reg.id) + buf.getvalue())
    return pa.array(out, pa.binary())


def _members(*values: Any) -> dict[str, Any]:
    return {f"member{k}": v for k, v in enumerate(values)}


def test_a_union_of_int_and_long_fills_the_member_the_writer_took() -> None:
    """spark-avro fills the member of the branch the writer took; fastavro returns a Python
    int for both, so the branch is read from the bytes (avro_branches.py)."""
    lookup = Lookup()
    schema = record(("i", ["null", "int", "long", "string"]),
                    ("f", ["float", "null", "double", "string"]),
                    ("e", ["null", {"type": "enum", "name": "E", "symbols": ["A"]}, "int", "long"]))
    payloads = _fastavro_framed(lookup, schema, [
        {"i": ("int", 7), "f": ("float", 1.5), "e": ("E", "A")},
        {"i": ("long", 7), "f": ("double", 0.1), "e": ("long", 5)},
        {"i": ("long", 2**40), "f": ("double", 1e300), "e": ("int", 5)},
        {"i": ("string", "x"), "f": None, "e": None}])
    dec = avro.decoder(lookup.ids[1], lookup, mode=FAILFAST)
    assert dec.decode(payloads, where).values.to_pylist() == [
        {"i": _members(7, None, None), "f": _members(1.5, None, None),
         "e": _members("A", None, None)},
        {"i": _members(None, 7, None), "f": _members(None, 0.1, None),
         "e": _members(None, None, 5)},
        {"i": _members(None, 2**40, None), "f": _members(None, 1e300, None),
         "e": _members(None, 5, None)},
        {"i": _members(None, None, "x"), "f": None, "e": None}]


def test_union_branches_resolve_as_javas_best_branch() -> None:
    """Resolving to a reader union picks its branch of the writer's type first, then the
    first promotion (Avro's Java resolver, which spark-avro runs); a plain writer field
    resolves into the union the same way."""
    lookup = Lookup()
    payloads = _fastavro_framed(
        lookup, record(("i", "long"), ("f", ["null", "float"]), ("s", ["string", "int"])),
        [{"i": 5, "f": 1.5, "s": ("string", "a")}, {"i": 2**50, "f": None, "s": ("int", 3)}])
    reader = lookup.add(record(("i", ["null", "double", "long", "int", "string"]),
                               ("f", ["null", "double", "float", "string"]),
                               ("s", ["bytes", "long", "string"])))
    got = avro.decoder(reader, lookup, mode=FAILFAST).decode(payloads, where)
    assert got.values.to_pylist() == [
        {"i": _members(None, 5, None, None), "f": _members(None, 1.5, None),
         "s": _members(None, None, "a")},
        {"i": _members(None, 2**50, None, None), "f": None, "s": _members(None, 3, None)}]


# --- a decimal on a fixed wider than 16 bytes ---------------------------------------------

WIDE = record(("amount", {"type": "fixed", "name": "Wide", "size": 20, "logicalType": "decimal",
                          "precision": 38, "scale": 2}),
              ("maybe", ["null", {"type": "fixed", "name": "W17", "size": 17,
                                  "logicalType": "decimal", "precision": 38, "scale": 0}]))


def test_a_decimal_on_a_fixed_wider_than_16_bytes_round_trips_as_fastavro_reads_it() -> None:
    import fastavro

    _, enc, dec = _codec(WIDE)
    values = [Decimal("12345.67"), Decimal("-1.00"), Decimal("0.00"),
              Decimal("9" * 36 + ".99"), Decimal("-" + "9" * 36 + ".99")]
    column = pa.array([{"amount": v, "maybe": None if i % 2 else Decimal(-i)}
                       for i, v in enumerate(values)], dec.arrow_type)
    payloads = enc.encode(column, "value")
    parsed = fastavro.parse_schema(WIDE)
    assert [fastavro.schemaless_reader(_io(p[5:]), parsed) for p in payloads.to_pylist()] \
        == column.to_pylist()
    assert dec.decode(payloads, where).values.to_pylist() == column.to_pylist()


def test_a_wide_decimal_past_38_digits_is_a_row_error() -> None:
    lookup, enc, _ = _codec(WIDE)
    good = enc.encode(pa.array([{"amount": Decimal("1.00"), "maybe": None}],
                               enc.arrow_type), "value")
    huge = framing.header(1) + (10**42).to_bytes(20, "big", signed=True) + b"\x00"
    got = avro.decoder(lookup.ids[1], lookup, mode=PERMISSIVE).decode(
        pa.array([good[0].as_py(), huge]), where)
    assert got.values.to_pylist() == [{"amount": Decimal("1.00"), "maybe": None}, None]
    assert "cannot hold" in got.errors[1].as_py()
