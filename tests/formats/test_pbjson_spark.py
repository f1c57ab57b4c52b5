"""valueFormat=protobuf and valueFormat=json end to end: real Spark, Kafka and registry.

JSON Schema: Confluent's JSONSerializer writes what eoskafka reads, and its JSONDeserializer
reads (read_committed) what eoskafka writes exactly once. Protobuf: the other end is Google's
protobuf runtime with a message class built here from a descriptor, framed as Confluent's
wire format documents it (zero byte, id, message indexes), and Confluent's
ProtobufDeserializer for eoskafka's writes. Confluent's Python ProtobufSerializer registers
a base64 descriptor, which Apicurio does not take as a schema, so it is not used.
"""

from __future__ import annotations

import json
import struct

import pytest
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from pyspark.sql import functions as F

from tests.formats.spark_io import (
    Batches,
    consume_committed,
    process_all,
    read,
    registry,
    value_context,
)
from tests.kafka_helpers import create_topic, write_plain
from tests.oracle import assert_no_open_transactions

pytestmark = [pytest.mark.spark, pytest.mark.kafka_only]

ORDER_JSON = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {
        "id": {"type": "integer"}, "customer": {"type": "string"},
        "total": {"type": "number"}, "items": {"type": "array", "items": {"type": "integer"}},
        "address": {"type": "object", "properties": {
            "city": {"type": "string"}, "zip": {"type": "integer"}}},
    },
    "required": ["id", "customer"],
})

ORDER_PROTO = """syntax = "proto3";
package shop;

message Order {
  int64 id = 1;
  string customer = 2;
  double total = 3;
  repeated int32 items = 4;
  Address address = 5;
  message Address {
    string city = 1;
    int32 zip = 2;
  }
}
"""


def order(i: int) -> dict:
    return {"id": i, "customer": f"c{i}", "total": i * 1.5, "items": list(range(i % 4)),
            "address": {"city": f"city{i}", "zip": 1000 + i}}


def _write_batch_to(spark, bootstrap: str, url: str, source: str, out: str, fmt: str,
                    shape: str, checkpoint: str) -> None:
    """A streaming copy of ``source``'s JSON text into ``out`` as ``fmt`` (AvailableNow)."""
    df = (spark.readStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest").load()
          .select(F.from_json(F.col("value").cast("string"), shape).alias("value")))
    q = (df.writeStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", out).option("valueFormat", fmt).option("schema.registry.url", url)
         .option("recordName", "Scored").option("recordNamespace", "test")
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None, q.exception()


def _stream_values(spark, bootstrap: str, url: str, topic: str, fmt: str) -> list[dict]:
    sink = Batches()
    df = read(spark, bootstrap, url, topic, streaming=True, valueFormat=fmt)
    q = df.select("value", "offset").writeStream.foreachBatch(sink).start()
    try:
        process_all(q)
    finally:
        q.stop()
    return [r["value"] for r in sorted(sink.rows, key=lambda r: r["offset"])]


# -- JSON Schema ---------------------------------------------------------------------------


def test_json_read_of_confluents_json_serializer(spark, bootstrap, schema_registry,
                                                 unique) -> None:
    topic = f"{unique}-json"
    create_topic(bootstrap, topic)
    records = [order(i) for i in range(15)]
    ser = JSONSerializer(ORDER_JSON, registry(schema_registry.url))
    write_plain(bootstrap, topic, [ser(r, value_context(topic)) for r in records])
    got = _stream_values(spark, bootstrap, schema_registry.url, topic, "json")
    assert got == records


def test_json_write_read_by_confluents_json_deserializer(spark, bootstrap, schema_registry,
                                                         unique, tmp_path) -> None:
    source, out = f"{unique}-in", f"{unique}-out"
    create_topic(bootstrap, source)
    create_topic(bootstrap, out, partitions=2)
    inputs = [{"id": i, "name": f"n{i}", "score": i / 4} for i in range(30)]
    write_plain(bootstrap, source, [json.dumps(r).encode() for r in inputs])
    _write_batch_to(spark, bootstrap, schema_registry.url, source, out, "json",
                    "id BIGINT, name STRING, score DOUBLE", str(tmp_path / "chk"))
    client = registry(schema_registry.url)
    written = client.get_latest_version(f"{out}-value").schema.schema_str
    got = consume_committed(bootstrap, out, len(inputs),
                            JSONDeserializer(written, schema_registry_client=client))
    assert sorted(got, key=lambda r: r["id"]) == inputs
    assert_no_open_transactions(bootstrap, out)


# -- Protobuf ------------------------------------------------------------------------------


def _message_class(package: str, name: str, fields: list[tuple[str, int, int]],
                   nested: dict[str, list[tuple[str, int, int]]] | None = None):
    """A protobuf message class from a descriptor built here (no generated code)."""
    fd = descriptor_pb2.FileDescriptorProto(name=f"{package}_{name}.proto", package=package,
                                            syntax="proto3")
    msg = fd.message_type.add(name=name)
    repeated = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    optional = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    for inner, inner_fields in (nested or {}).items():
        sub = msg.nested_type.add(name=inner)
        for fname, number, ftype in inner_fields:
            sub.field.add(name=fname, number=number, type=ftype, label=optional)
    for fname, number, ftype in fields:
        label = repeated if fname == "items" else optional
        f = msg.field.add(name=fname, number=number, type=ftype, label=label)
        if ftype == descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE:
            f.type_name = f".{package}.{name}.{fname.capitalize()}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{name}"))


T = descriptor_pb2.FieldDescriptorProto


def test_protobuf_read_of_googles_runtime_in_confluents_framing(spark, bootstrap,
                                                                schema_registry,
                                                                unique) -> None:
    topic = f"{unique}-proto"
    create_topic(bootstrap, topic)
    schema_id = registry(schema_registry.url).register_schema(
        f"{topic}-value", Schema(ORDER_PROTO, "PROTOBUF"))
    cls = _message_class("shop", "Order", [
        ("id", 1, T.TYPE_INT64), ("customer", 2, T.TYPE_STRING), ("total", 3, T.TYPE_DOUBLE),
        ("items", 4, T.TYPE_INT32), ("address", 5, T.TYPE_MESSAGE)],
        {"Address": [("city", 1, T.TYPE_STRING), ("zip", 2, T.TYPE_INT32)]})
    records = [order(i) for i in range(12)]
    header = b"\x00" + struct.pack(">I", schema_id) + b"\x00"  # message indexes [0]: "0"
    payloads = []
    for r in records:
        m = cls(id=r["id"], customer=r["customer"], total=r["total"], items=r["items"])
        m.address.city, m.address.zip = r["address"]["city"], r["address"]["zip"]
        payloads.append(header + m.SerializeToString())
    write_plain(bootstrap, topic, payloads)
    got = _stream_values(spark, bootstrap, schema_registry.url, topic, "protobuf")
    assert got == records


def test_protobuf_write_read_by_confluents_protobuf_deserializer(spark, bootstrap,
                                                                 schema_registry, unique,
                                                                 tmp_path) -> None:
    source, out = f"{unique}-in", f"{unique}-out"
    create_topic(bootstrap, source)
    create_topic(bootstrap, out, partitions=2)
    inputs = [{"id": i, "name": f"n{i}", "score": i / 4} for i in range(30)]
    write_plain(bootstrap, source, [json.dumps(r).encode() for r in inputs])
    _write_batch_to(spark, bootstrap, schema_registry.url, source, out, "protobuf",
                    "id BIGINT, name STRING, score DOUBLE", str(tmp_path / "chk"))
    written = registry(schema_registry.url).get_latest_version(f"{out}-value")
    assert "message Scored" in written.schema.schema_str
    cls = _message_class("test", "Scored", [("id", 1, T.TYPE_INT64), ("name", 2, T.TYPE_STRING),
                                            ("score", 3, T.TYPE_DOUBLE)])
    deser = ProtobufDeserializer(cls, {"use.deprecated.format": False})

    def as_dict(data: bytes, ctx) -> dict:
        m = deser(data, ctx)
        return {"id": m.id, "name": m.name, "score": m.score}

    got = consume_committed(bootstrap, out, len(inputs), as_dict)
    assert sorted(got, key=lambda r: r["id"]) == inputs
    assert_no_open_transactions(bootstrap, out)


TWO_MESSAGES = ORDER_PROTO.replace("message Order {", "message Audit {\n  string who = 1;\n}\n\n"
                                   "message Order {", 1)


def test_protobuf_reader_message_by_name(spark, bootstrap, schema_registry, unique) -> None:
    """valueMessageName picks the reader message of a schema that declares several; the
    writer's message is the one its payload's message indexes name ([1]: the second)."""
    topic = f"{unique}-proto2"
    create_topic(bootstrap, topic)
    schema_id = registry(schema_registry.url).register_schema(
        f"{topic}-value", Schema(TWO_MESSAGES, "PROTOBUF"))
    cls = _message_class("shop", "Order", [
        ("id", 1, T.TYPE_INT64), ("customer", 2, T.TYPE_STRING), ("total", 3, T.TYPE_DOUBLE),
        ("items", 4, T.TYPE_INT32), ("address", 5, T.TYPE_MESSAGE)],
        {"Address": [("city", 1, T.TYPE_STRING), ("zip", 2, T.TYPE_INT32)]})
    records = [order(i) for i in range(5)]
    header = b"\x00" + struct.pack(">I", schema_id) + b"\x02\x02"  # indexes [1], zigzag
    payloads = []
    for r in records:
        m = cls(id=r["id"], customer=r["customer"], total=r["total"], items=r["items"])
        m.address.city, m.address.zip = r["address"]["city"], r["address"]["zip"]
        payloads.append(header + m.SerializeToString())
    write_plain(bootstrap, topic, payloads)
    df = read(spark, bootstrap, schema_registry.url, topic, valueFormat="protobuf",
              valueMessageName="shop.Order")
    assert df.schema["value"].dataType.fieldNames() == ["id", "customer", "total", "items",
                                                        "address"]
    rows = df.orderBy("offset").collect()
    assert [r.value.asDict(recursive=True) for r in rows] == records


def test_json_values_the_reader_schema_cannot_hold_are_refused_not_converted(
        spark, bootstrap, schema_registry, unique) -> None:
    """The reader schema (version 1: ``qty`` an integer, ``price`` a number) is fixed at
    the start; the producer's schema evolved ``qty`` to a number. 2.7 in ``qty`` and
    ``true`` in ``price`` fail under FAILFAST, as Spark's from_json fails on them, and are
    null with the reason under PERMISSIVE; the rows the reader's types hold read."""
    topic = f"{unique}-json-strict"
    create_topic(bootstrap, topic)
    client = registry(schema_registry.url)
    subject = f"{topic}-value"
    v1 = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Line",
          "type": "object", "properties": {"qty": {"type": "integer"},
                                           "price": {"type": "number"}}}
    v2 = {**v1, "properties": {"qty": {"type": "number"}, "price": {"type": ["number",
                                                                              "boolean"]}}}
    client.register_schema(subject, Schema(json.dumps(v1), "JSON"))
    schema_registry.set_compatibility("NONE", subject)
    ser = JSONSerializer(json.dumps(v2), client)
    records = [{"qty": 2, "price": 1.5}, {"qty": 2.7, "price": 1}, {"qty": -0.5, "price": 2.0},
               {"qty": 1e15 + 0.5, "price": 0.0}, {"qty": 3, "price": True}]
    write_plain(bootstrap, topic, [ser(r, value_context(topic)) for r in records], partition=0)

    def strict(**options: str):
        return read(spark, bootstrap, schema_registry.url, topic, valueFormat="json",
                    valueSchemaVersion="1", **options)

    with pytest.raises(Exception) as info:
        strict().collect()
    assert f"{topic}-0 at offset 1" in str(info.value), str(info.value)[:3000]
    # Spark's own from_json refuses it too
    with pytest.raises(Exception, match="MALFORMED_RECORD_IN_PARSING"):
        (spark.read.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).load()
         .select(F.from_json(F.expr("CAST(substring(value, 6) AS STRING)"),
                             "qty BIGINT, price DOUBLE", {"mode": "FAILFAST"}).alias("v"))
         .where("offset = 1").collect())
    rows = strict(mode="PERMISSIVE").orderBy("offset").collect()
    assert [r.value and r.value.asDict() for r in rows] == [
        {"qty": 2, "price": 1.5}, None, None, None, None]
    assert rows[0].valueError is None
    assert all(r.valueError for r in rows[1:]), [r.valueError for r in rows]
    assert "qty" in rows[1].valueError and "price" in rows[4].valueError
