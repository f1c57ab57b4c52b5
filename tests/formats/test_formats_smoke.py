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
