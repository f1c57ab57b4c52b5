"""valueFormat=avro end to end: real Spark, real Kafka, a real registry (Apicurio).

Interop both ways with Confluent's own Python serializers, FAILFAST and PERMISSIVE, a
schema evolving under one running query, the registry refusing an incompatible schema at
the sink's start, and Spark's own ``from_avro`` (spark-avro) against eoskafka's decoding.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
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
from tests.oracle import assert_no_open_transactions, committed_view

pytestmark = [pytest.mark.spark, pytest.mark.kafka_only]

ORDER = json.dumps({
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "total", "type": "double"},
        {"name": "paid", "type": "boolean"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "items", "type": {"type": "array", "items": "int"}},
        {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
            {"name": "city", "type": "string"}, {"name": "zip", "type": "int"}]}},
        {"name": "tags", "type": {"type": "map", "values": "long"}},
        {"name": "blob", "type": "bytes"},
    ],
})


def order(i: int) -> dict:
    return {"id": i, "customer": f"c{i}", "total": i * 1.5, "paid": i % 2 == 0,
            "note": None if i % 3 else f"n{i}", "items": list(range(i % 4)),
            "address": {"city": f"city{i}", "zip": 1000 + i}, "tags": {"k": i},
            "blob": bytes([i % 256])}


def _produce(bootstrap: str, url: str, topic: str, schema: str, records: list[dict]) -> None:
    ser = AvroSerializer(registry(url), schema)
    write_plain(bootstrap, topic, [ser(r, value_context(topic)) for r in records], partition=0)


def _spark_rows(rows: list[dict]) -> list[dict]:
    """Spark's map column comes back as a dict, bytes as bytearray: compare as Python."""
    return [{**r, "blob": bytes(r["blob"])} for r in rows]


def test_streaming_read_of_confluents_avro_serializer(spark, bootstrap, schema_registry,
                                                      unique) -> None:
    topic = f"{unique}-orders"
    create_topic(bootstrap, topic)
    records = [order(i) for i in range(20)]
    _produce(bootstrap, schema_registry.url, topic, ORDER, records)
    registered = registry(schema_registry.url).get_latest_version(f"{topic}-value")

    sink = Batches()
    df = read(spark, bootstrap, schema_registry.url, topic, streaming=True,
              valueFormat="avro", includeSchemaId="true")
    q = df.select("value", "valueSchemaId", "offset").writeStream.foreachBatch(sink).start()
    try:
        process_all(q)
    finally:
        q.stop()
    rows = sorted(sink.rows, key=lambda r: r["offset"])
    assert _spark_rows([r["value"] for r in rows]) == records
    assert {r["valueSchemaId"] for r in rows} == {registered.schema_id}


def test_streaming_write_read_by_confluents_avro_deserializer(spark, bootstrap, schema_registry,
                                                              unique, tmp_path) -> None:
    source, out = f"{unique}-in", f"{unique}-out"
    create_topic(bootstrap, source)
    create_topic(bootstrap, out, partitions=2)
    inputs = [{"id": i, "name": f"n{i}", "score": i / 4, "tags": [f"t{i}"]} for i in range(50)]
    write_plain(bootstrap, source, [json.dumps(r).encode() for r in inputs])
    shape = "id BIGINT, name STRING, score DOUBLE, tags ARRAY<STRING>"

    df = (spark.readStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest").load()
          .select(F.from_json(F.col("value").cast("string"), shape).alias("value")))
    q = (df.writeStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", out).option("valueFormat", "avro")
         .option("schema.registry.url", schema_registry.url)
         .option("recordName", "Scored").option("recordNamespace", "test")
         .option("checkpointLocation", str(tmp_path / "chk"))
         .trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None, q.exception()

    got = consume_committed(bootstrap, out, len(inputs),
                            AvroDeserializer(registry(schema_registry.url)))
    assert sorted(got, key=lambda r: r["id"]) == inputs
    written = registry(schema_registry.url).get_latest_version(f"{out}-value")
    assert json.loads(written.schema.schema_str)["name"] == "Scored"
    assert_no_open_transactions(bootstrap, out)


def _bad_topic(bootstrap: str, url: str, topic: str) -> None:
    create_topic(bootstrap, topic)
    _produce(bootstrap, url, topic, ORDER, [order(0), order(1)])
    write_plain(bootstrap, topic, [b"not avro at all"], partition=0)  # offset 2
    _produce(bootstrap, url, topic, ORDER, [order(3)])


def test_failfast_names_topic_partition_and_offset(spark, bootstrap, schema_registry,
                                                   unique) -> None:
    topic = f"{unique}-bad"
    _bad_topic(bootstrap, schema_registry.url, topic)
    with pytest.raises(Exception) as info:
        read(spark, bootstrap, schema_registry.url, topic, valueFormat="avro").collect()
    assert f"{topic}-0 at offset 2" in str(info.value), str(info.value)[:3000]


def test_permissive_gives_null_and_the_reason(spark, bootstrap, schema_registry,
                                              unique) -> None:
    topic = f"{unique}-bad"
    _bad_topic(bootstrap, schema_registry.url, topic)
    rows = (read(spark, bootstrap, schema_registry.url, topic, valueFormat="avro",
                 mode="PERMISSIVE").orderBy("offset").collect())
    assert [r.offset for r in rows] == [0, 1, 2, 3]
    assert rows[2].value is None and rows[2].valueError
    assert [r.value.id for r in rows if r.offset != 2] == [0, 1, 3]
    assert [r.valueError for r in rows if r.offset != 2] == [None, None, None]


def _record(fields: list[dict]) -> str:
    return json.dumps({"type": "record", "name": "User", "namespace": "evo", "fields": fields})


V1 = _record([{"name": "id", "type": "int"}, {"name": "name", "type": "string"}])
V2 = _record([{"name": "id", "type": "int"}, {"name": "name", "type": "string"},
              {"name": "email", "type": "string", "default": "none"}])  # added, with default
V3 = _record([{"name": "id", "type": "int"},
              {"name": "email", "type": "string", "default": "none"}])  # name removed
V4 = _record([{"name": "id", "type": "long"},
              {"name": "email", "type": "string", "default": "none"}])  # int -> long
V5 = _record([{"name": "id", "type": "long"},
              {"name": "email", "type": "string", "default": "none"},
              {"name": "tier", "type": "string", "default": "basic"}])  # after the start


def test_evolution_read_by_one_running_query(spark, bootstrap, schema_registry,
                                             unique) -> None:
    """Records of four versions read in one batch with the reader schema the query started
    with (v4, the latest then); a v5 registered while the query runs changes nothing in
    it: its record reads as v4."""
    topic = f"{unique}-users"
    create_topic(bootstrap, topic)
    url = schema_registry.url
    _produce(bootstrap, url, topic, V1, [{"id": 1, "name": "a"}])
    _produce(bootstrap, url, topic, V2, [{"id": 2, "name": "b", "email": "b@x"}])
    _produce(bootstrap, url, topic, V3, [{"id": 3, "email": "c@x"}])
    _produce(bootstrap, url, topic, V4, [{"id": 2**40, "email": "d@x"}])
    client = registry(url)
    ids = [client.lookup_schema(f"{topic}-value", Schema(v, "AVRO")).schema_id
           for v in (V1, V2, V3, V4)]
    assert len(set(ids)) == 4

    sink = Batches()
    df = read(spark, bootstrap, url, topic, streaming=True, valueFormat="avro",
              includeSchemaId="true")
    assert [f.name for f in df.schema["value"].dataType.fields] == ["id", "email"]
    q = df.select("value", "valueSchemaId", "offset").writeStream.foreachBatch(sink).start()
    try:
        process_all(q)
        _produce(bootstrap, url, topic, V5, [{"id": 5, "email": "e@x", "tier": "gold"}])
        process_all(q)
    finally:
        q.stop()
    first, *later = sink.batches
    assert sorted(((r["value"], r["valueSchemaId"]) for r in first), key=str) == sorted([
        ({"id": 1, "email": "none"}, ids[0]), ({"id": 2, "email": "b@x"}, ids[1]),
        ({"id": 3, "email": "c@x"}, ids[2]), ({"id": 2**40, "email": "d@x"}, ids[3])],
        key=str)
    assert [r["value"] for b in later for r in b] == [{"id": 5, "email": "e@x"}]


def test_incompatible_schema_fails_the_sink_at_start(spark, bootstrap, schema_registry,
                                                     unique, tmp_path) -> None:
    source, out = f"{unique}-in", f"{unique}-out"
    create_topic(bootstrap, source)
    create_topic(bootstrap, out)
    write_plain(bootstrap, source, [b'{"id": "x"}'])
    registry(schema_registry.url).register_schema(
        f"{out}-value", Schema(_record([{"name": "id", "type": "int"}]), "AVRO"))
    schema_registry.set_compatibility("BACKWARD", f"{out}-value")

    df = (spark.readStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest").load()
          .select(F.from_json(F.col("value").cast("string"), "id STRING").alias("value")))
    q = (df.writeStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", out).option("valueFormat", "avro")
         .option("schema.registry.url", schema_registry.url)
         .option("checkpointLocation", str(tmp_path / "chk"))
         .trigger(availableNow=True).start())
    with pytest.raises(Exception) as info:
        q.awaitTermination(300)
    text = str(info.value)
    assert "incompatible" in text.lower() and f"{out}-value" in text, text[:3000]
    view = committed_view(bootstrap, out)
    assert not any(p.committed for p in view.values())  # no task wrote
    assert_no_open_transactions(bootstrap, out)


def test_spark_from_avro_agrees_with_eoskafka(spark, bootstrap, schema_registry,
                                              unique) -> None:
    """Spark's own from_avro (spark-avro, the JVM jar) on ``substring(value, 6)`` and
    eoskafka's valueFormat=avro give the same rows for the same topic."""
    from pyspark.sql.avro.functions import from_avro

    topic = f"{unique}-diff"
    create_topic(bootstrap, topic)
    _produce(bootstrap, schema_registry.url, topic, ORDER, [order(i) for i in range(40)])

    theirs = (spark.read.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).load()
              .select("offset", from_avro(F.expr("substring(value, 6)"), ORDER).alias("value"))
              .orderBy("offset").collect())
    ours = (read(spark, bootstrap, schema_registry.url, topic, valueFormat="avro")
            .select("offset", "value").orderBy("offset").collect())
    assert len(theirs) == len(ours) == 40
    assert [r.asDict(recursive=True) for r in ours] == [r.asDict(recursive=True) for r in theirs]


def test_a_row_that_does_not_fit_fails_the_batch_and_its_transaction(spark, bootstrap,
                                                                    schema_registry, unique,
                                                                    tmp_path) -> None:
    """use.latest.version: the subject's latest schema has a required ``id``; a row with a
    null id fails its task naming the column, and nothing of the batch is committed."""
    source, out = f"{unique}-in", f"{unique}-out"
    create_topic(bootstrap, source)
    create_topic(bootstrap, out)
    write_plain(bootstrap, source, [b'{"id": 1, "name": "a"}', b'{"id": null, "name": "b"}'])
    registry(schema_registry.url).register_schema(f"{out}-value", Schema(V1, "AVRO"))

    df = (spark.readStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest").load()
          .select(F.from_json(F.col("value").cast("string"), "id INT, name STRING")
                  .alias("value")))
    q = (df.writeStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", out).option("valueFormat", "avro")
         .option("schema.registry.url", schema_registry.url)
         .option("auto.register.schemas", "false").option("use.latest.version", "true")
         .option("checkpointLocation", str(tmp_path / "chk"))
         .trigger(availableNow=True).start())
    with pytest.raises(Exception) as info:
        q.awaitTermination(300)
    text = str(info.value)
    assert "EOSKAFKA_PAYLOAD_DOES_NOT_FIT_SCHEMA" in text and "value" in text, text[:3000]
    view = committed_view(bootstrap, out)
    assert not any(p.committed for p in view.values())
    assert_no_open_transactions(bootstrap, out)


def test_an_unregistered_schema_is_refused_at_start(spark, bootstrap, schema_registry,
                                                    unique) -> None:
    """auto.register.schemas=false without use.latest.version: the derived schema must be
    registered; a batch write is refused before any task, naming the subject."""
    out = f"{unique}-out"
    create_topic(bootstrap, out)
    df = spark.createDataFrame([(1, "a")], "id INT, name STRING").select(
        F.struct("id", "name").alias("value"))
    with pytest.raises(Exception) as info:
        (df.write.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", out).option("valueFormat", "avro")
         .option("schema.registry.url", schema_registry.url)
         .option("auto.register.schemas", "false").mode("append").save())
    text = str(info.value)
    assert "is not registered" in text and f"{out}-value" in text, text[:3000]
    assert not any(p.committed for p in committed_view(bootstrap, out).values())


KEY = json.dumps({"type": "record", "name": "OrderKey", "namespace": "shop",
                  "fields": [{"name": "region", "type": "string"}, {"name": "n", "type": "int"}]})


def test_keys_and_values_decoded_and_a_given_schema_checked(spark, bootstrap, schema_registry,
                                                           unique) -> None:
    """keyFormat decodes ``key`` from ``<topic>-key``; a ``.schema(...)`` that is not the
    decoded one is refused naming the column, one that is (a subset) reads."""
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = f"{unique}-keyed"
    create_topic(bootstrap, topic)
    client = registry(schema_registry.url)
    keys = [{"region": f"r{i % 2}", "n": i} for i in range(6)]
    key_ser, value_ser = AvroSerializer(client, KEY), AvroSerializer(client, ORDER)
    key_ctx = SerializationContext(topic, MessageField.KEY)
    write_plain(bootstrap, topic, [value_ser(order(i), value_context(topic)) for i in range(6)],
                partition=0, keys=[key_ser(k, key_ctx) for k in keys])
    key_id = client.get_latest_version(f"{topic}-key").schema_id

    df = read(spark, bootstrap, schema_registry.url, topic, keyFormat="avro",
              valueFormat="avro", includeSchemaId="true")
    rows = df.orderBy("offset").collect()
    assert [r.key.asDict() for r in rows] == keys
    assert [r.value.id for r in rows] == list(range(6))
    assert {r.keySchemaId for r in rows} == {key_id}

    given = df.select("key", "offset").schema
    subset = (spark.read.format("eoskafka").schema(given)
              .option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
              .option("schema.registry.url", schema_registry.url)
              .option("keyFormat", "avro").option("valueFormat", "avro").load())
    assert [r.key.n for r in subset.orderBy("offset").collect()] == list(range(6))
    with pytest.raises(Exception) as info:
        (spark.read.format("eoskafka").schema("key BINARY, value BINARY, offset BIGINT")
         .option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
         .option("schema.registry.url", schema_registry.url)
         .option("keyFormat", "avro").load().collect())
    text = str(info.value)
    assert "the schema given with .schema(...) has key binary" in text, text[:3000]


KEPT = json.dumps({
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
})


def test_a_copy_keeps_the_input_schema(spark, bootstrap, schema_registry, unique,
                                       tmp_path) -> None:
    """Avro to Avro as docs/formats.md shows it: the input's schema registered under the
    output subject, written with use.latest.version: the output subject's schema is the
    input's (record name, timestamp-millis, the nullable field's default), and Confluent's
    deserializer reads the records as they were written."""
    from datetime import UTC, datetime

    source, out = f"{unique}-in", f"{unique}-out"
    create_topic(bootstrap, source)
    create_topic(bootstrap, out)
    rows = [{"id": i, "at": datetime(2026, 1, 1, 0, 0, i, 123000, tzinfo=UTC),
             "note": None if i % 2 else f"n{i}"} for i in range(10)]
    _produce(bootstrap, schema_registry.url, source, KEPT, rows)
    client = registry(schema_registry.url)
    given = client.get_latest_version(f"{source}-value").schema
    client.register_schema(f"{out}-value", given)

    q = (spark.readStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", source).option("startingOffsets", "earliest")
         .option("valueFormat", "avro").option("schema.registry.url", schema_registry.url)
         .load().select("value")
         .writeStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", out).option("valueFormat", "avro")
         .option("schema.registry.url", schema_registry.url)
         .option("auto.register.schemas", "false").option("use.latest.version", "true")
         .option("checkpointLocation", str(tmp_path / "chk"))
         .trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None, q.exception()

    assert client.get_versions(f"{out}-value") == [1]
    kept = client.get_latest_version(f"{out}-value").schema.schema_str
    assert json.loads(kept) == json.loads(KEPT)
    got = consume_committed(bootstrap, out, len(rows), AvroDeserializer(client))
    assert sorted(got, key=lambda r: r["id"]) == rows
    assert_no_open_transactions(bootstrap, out)
