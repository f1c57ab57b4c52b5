"""An Avro round trip through Spark on every pyspark CI runs (the smoke set), on either broker.

pyspark 4.0 and 4.1 build a decoded column's Arrow schema by another path than 4.2+ (no
``timezone`` keyword in ``to_arrow_schema``): this is the case that runs there. Confluent's
own serializer makes the input and its deserializer reads the output, so neither end is
eoskafka checking itself.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

from tests.formats.spark_io import registry, value_context
from tests.kafka_helpers import create_topic, write_plain

pytestmark = [pytest.mark.spark, pytest.mark.smoke]

READING = json.dumps({
    "type": "record", "name": "Reading", "namespace": "smoke",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "sensor", "type": "string"},
        {"name": "value", "type": "double"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
})


def test_avro_read_and_exactly_once_write_on_this_pyspark(spark, bootstrap, schema_registry,
                                                            unique) -> None:
    source, out = f"{unique}-in", f"{unique}-out"
    create_topic(bootstrap, source)
    create_topic(bootstrap, out)
    at = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)
    records = [{"id": i, "sensor": f"s{i % 3}", "value": i / 8, "at": at,
                "note": None if i % 2 else f"n{i}"} for i in range(20)]
    ser = AvroSerializer(registry(schema_registry.url), READING)
    write_plain(bootstrap, source, [ser(r, value_context(source)) for r in records],
                partition=0)

    decoded = (spark.read.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", source).option("valueFormat", "avro")
               .option("schema.registry.url", schema_registry.url).load())
    got = [r.value.asDict() for r in decoded.orderBy("offset").collect()]
    assert [{**g, "at": g["at"].astimezone(dt.UTC)} for g in got] == records

    (decoded.select("value").write.format("eoskafka").mode("append")
     .option("kafka.bootstrap.servers", bootstrap).option("topic", out)
     .option("valueFormat", "avro").option("schema.registry.url", schema_registry.url)
     .save())
    raw = (spark.read.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", out).load().select("value").collect())
    de = AvroDeserializer(registry(schema_registry.url))
    back = [de(bytes(r.value), value_context(out)) for r in raw]
    assert sorted(back, key=lambda r: r["id"]) == records


def test_dead_letters_on_this_pyspark(spark, bootstrap, schema_registry, unique) -> None:
    """The ``deadLetter`` column (a struct holding a timestamp and the headers array) read
    and written by a batch query: good records to their topic, the others raw to the
    dead-letter topic with their origin in Connect's headers."""
    source, out, dlq = f"{unique}-in", f"{unique}-out", f"{unique}-dlq"
    for topic in (source, out, dlq):
        create_topic(bootstrap, topic)
    at = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)
    ser = AvroSerializer(registry(schema_registry.url), READING)
    values = [ser({"id": i, "sensor": "s", "value": 0.5, "at": at, "note": None},
                  value_context(source)) if i % 3 else f"bad {i}".encode() for i in range(9)]
    write_plain(bootstrap, source, values, partition=0,
                headers=[[("h", b"x")] if i == 0 else [] for i in range(9)])
    url = schema_registry.url
    rows = (spark.read.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source).option("valueFormat", "avro")
            .option("mode", "PERMISSIVE").option("includeDeadLetter", "true")
            .option("schema.registry.url", url).load())
    (rows.select("value", "deadLetter").write.format("eoskafka").mode("append")
     .option("kafka.bootstrap.servers", bootstrap).option("topic", out)
     .option("valueFormat", "avro").option("schema.registry.url", url)
     .option("deadLetterTopic", dlq).save())
    de = AvroDeserializer(registry(url))
    good = (spark.read.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", out).load().collect())
    assert sorted(de(bytes(r.value), value_context(out))["id"] for r in good) == \
        [1, 2, 4, 5, 7, 8]
    dead = (spark.read.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", dlq).option("includeHeaders", "true").load()
            .orderBy("offset").collect())
    assert [bytes(r.value) for r in dead] == [b"bad 0", b"bad 3", b"bad 6"]
    first = {h.key: bytes(h.value) for h in dead[0].headers}
    assert first["h"] == b"x" and first["__connect.errors.offset"] == b"0"
    assert first["__connect.errors.topic"] == source.encode()
    written = rows.where("offset = 0").select("timestamp").first()[0]
    assert dead[0].timestamp == written  # the original record's, as Connect keeps it
