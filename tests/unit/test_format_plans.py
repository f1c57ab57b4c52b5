"""formats/resolve.py and formats/payload.py: the decoded schema, the user-schema check and
the column assembly, with stand-in decoders and encoders (the codecs have their own tests;
tests/formats/ runs them end to end)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from eos_kafka_source.errors import SchemaError
from eos_kafka_source.formats.payload import Decoding, Encoding
from eos_kafka_source.formats.plans import ReadPlan, SideRead, SideWrite, WritePlan
from eos_kafka_source.formats.resolve import check_given, read_schema
from eos_kafka_source.formats.schemas import (
    AVRO,
    FAILFAST,
    PERMISSIVE,
    Decoded,
    RegisteredSchema,
)
from eos_kafka_source.records.decode import arrow_schema
from eos_kafka_source.source.partition_reader import arrow_schema_of
from eos_kafka_source.source.schema import kafka_schema

ORDER = pa.struct([pa.field("id", pa.int64()), pa.field("name", pa.string())])
SCHEMA = RegisteredSchema(7, AVRO, "{}", "t-value", 1)


def plan(mode: str = FAILFAST, ids: bool = False) -> ReadPlan:
    return ReadPlan((SideRead("value", "avro", SCHEMA, ORDER),), None, mode, ids)


def test_value_becomes_the_decoded_struct_and_the_extra_columns_follow() -> None:
    schema = read_schema(kafka_schema(False), plan(PERMISSIVE, ids=True))
    assert schema.fieldNames() == ["key", "value", "topic", "partition", "offset", "timestamp",
                                   "timestampType", "valueSchemaId", "valueError"]
    assert schema["value"].dataType == StructType([StructField("id", LongType()),
                                                   StructField("name", StringType())])
    assert schema["key"].dataType == BinaryType()
    assert read_schema(kafka_schema(False), plan()).fieldNames()[-1] == "timestampType"


def test_a_given_schema_must_be_the_decoded_one() -> None:
    expected = read_schema(kafka_schema(False), plan())
    check_given(StructType([expected["value"], expected["offset"]]), expected)  # a subset
    with pytest.raises(SchemaError, match="has value binary, but this read gives struct"):
        check_given(kafka_schema(False), expected)
    with pytest.raises(SchemaError, match="no such column"):
        check_given(StructType([StructField("valueError", StringType())]), expected)


class _Decoder:
    arrow_type = ORDER

    def decode(self, payloads: pa.Array, where) -> Decoded:
        rows = [None if p is None else {"id": len(p), "name": p.decode()}
                for p in payloads.to_pylist()]
        errors = pa.array([None if p is None else f"bad at {where(i)}"
                           for i, p in enumerate(payloads.to_pylist())], pa.string())
        return Decoded(pa.array(rows, ORDER), pa.array([7] * len(rows), pa.int32()), errors)


def test_decoding_assembles_the_declared_columns() -> None:
    p = plan(PERMISSIVE, ids=True)
    declared = arrow_schema_of(read_schema(kafka_schema(False), p))
    raw = pa.RecordBatch.from_pylist(
        [{"key": None, "value": b"ab", "topic": "t", "partition": 3, "offset": 41,
          "timestamp": 0, "timestampType": 0}], schema=arrow_schema(False))
    decoding = Decoding(p, declared)
    decoding._decoders = {"value": _Decoder()}  # type: ignore[dict-item]
    out = decoding.apply(raw)
    assert out.schema == declared
    row = out.to_pylist()[0]
    assert row["value"] == {"id": 2, "name": "ab"} and row["valueSchemaId"] == 7
    assert row["valueError"] == "bad at t-3 at offset 41" and row["offset"] == 41


class _Encoder:
    schema = SCHEMA

    def encode(self, values: pa.Array, column: str) -> pa.Array:
        return pa.array([None if v is None else f"{column}:{v['id']}".encode()
                         for v in values.to_pylist()], pa.binary())


def test_encoding_replaces_the_struct_column_with_binary() -> None:
    batch = pa.RecordBatch.from_pylist([{"Value": {"id": 1, "name": "a"}, "topic": "t"}],
                                       schema=pa.schema([("Value", ORDER), ("topic", pa.string())]))
    encoding = Encoding(WritePlan((SideWrite("value", "avro", SCHEMA),), None))
    encoding._encoders = {"value": _Encoder()}  # type: ignore[dict-item]
    out = encoding.apply(batch)
    assert out.schema.field("Value").type == pa.binary()
    assert out.to_pylist() == [{"Value": b"Value:1", "topic": "t"}]


def test_a_topic_column_with_the_topic_in_the_subject_is_refused_before_any_request() -> None:
    from pyspark.sql.types import IntegerType

    from eos_kafka_source.errors import ConfigError
    from eos_kafka_source.formats.resolve import resolve_write
    from eos_kafka_source.options import SinkOptions

    opts = SinkOptions.parse({"kafka.bootstrap.servers": "b:9092", "valueFormat": "avro",
                              "schema.registry.url": "http://127.0.0.1:9"})
    assert opts.formats is not None
    schema = StructType([StructField("value", StructType([StructField("id", IntegerType())])),
                         StructField("topic", StringType())])
    with pytest.raises(ConfigError, match="RecordNameStrategy, or valueSubject"):
        resolve_write(opts.formats, None, schema)
