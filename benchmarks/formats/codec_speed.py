"""Decode and encode speed of the Avro codec against per-record baselines, without Kafka.

    python -m benchmarks.formats.codec_speed [--rows 200000] [--repeat 3]

One batch of ``--rows`` records of a 10-field record (strings, longs, doubles, a
timestamp-millis, a nullable string), framed as Confluent frames them. Each row of the table
is the best of ``--repeat`` runs, in records per second:

- ours: the codec's ``decode``/``encode`` of the whole Arrow column (this schema is read
  and written column-wise); "record by record" is the fastavro path a schema with arrays,
  maps or unions takes, and decoding takes for a writer schema other than the reader's.
- fastavro alone: ``schemaless_reader``/``schemaless_writer`` per record on Python dicts, no
  framing and no Arrow: the ceiling of a per-record fastavro loop.
- fastavro block: the same records as one block of an Avro container file, which fastavro
  reads in one call (decode only): what fastavro does with no Python call per record.
- naive: Confluent's own AvroDeserializer/AvroSerializer called per record, then
  ``pa.array`` of the results (decode) or of the payloads (encode): what a per-record Python
  UDF would do.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from io import BytesIO
from typing import Any

import fastavro
import pyarrow as pa
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from eos_kafka_source.formats import avro
from eos_kafka_source.formats.schemas import AVRO, RegisteredSchema

SCHEMA = {"type": "record", "name": "Event", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"},
    {"name": "user", "type": "string"},
    {"name": "kind", "type": "string"},
    {"name": "seq", "type": "long"},
    {"name": "amount", "type": "double"},
    {"name": "score", "type": "double"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "count", "type": "int"},
    {"name": "ok", "type": "boolean"},
]}
CTX = SerializationContext("events", MessageField.VALUE)
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def rows(n: int) -> list[dict[str, Any]]:
    return [{"id": i, "user": f"user-{i % 5000}", "kind": ("click", "view", "buy")[i % 3],
             "seq": i * 7, "amount": i * 0.25, "score": 1.0 / (i + 1),
             "at": T0 + timedelta(milliseconds=i), "note": None if i % 4 else f"note {i}",
             "count": i % 1000, "ok": i % 2 == 0} for i in range(n)]


class Lookup:
    def __init__(self, client: SchemaRegistryClient) -> None:
        self.client = client

    def by_id(self, schema_id: int) -> RegisteredSchema:
        return RegisteredSchema(schema_id, AVRO, self.client.get_schema(schema_id).schema_str)

    def version(self, subject: str, version: int | str) -> RegisteredSchema:
        raise NotImplementedError


def best(repeat: int, fn: Callable[[], Any]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.rows
    client = SchemaRegistryClient.new_client({"url": "mock://codec-speed"})
    schema_id = client.register_schema("events-value", Schema(json.dumps(SCHEMA), "AVRO"))
    lookup = Lookup(client)
    registered = lookup.by_id(schema_id)
    encoder = avro.encoder(registered, lookup)
    decoder = avro.decoder(registered, lookup, mode="FAILFAST")
    records = rows(n)
    column = pa.array(records, encoder.arrow_type)
    payloads = encoder.encode(column, "value")
    payload_list = payloads.to_pylist()
    bodies = [p[5:] for p in payload_list]
    parsed = fastavro.parse_schema(SCHEMA)
    serializer = AvroSerializer(client, json.dumps(SCHEMA), conf={"auto.register.schemas": False,
                                                                  "use.latest.version": True})
    deserializer = AvroDeserializer(client)
    assert decoder.decode(payloads, str).values.equals(column)
    by_record = avro.decoder(registered, lookup, mode="FAILFAST")
    by_record._columnar = False  # the path a writer schema other than the reader's takes
    assert by_record.decode(payloads, str).values.equals(column)
    assert encoder._one_by_one(encoder._prepare(column, "v"), "v").equals(payloads)

    def fastavro_read() -> list[Any]:
        return [fastavro.schemaless_reader(BytesIO(b), parsed) for b in bodies]

    block = BytesIO()
    fastavro.writer(block, parsed, records, codec="null", sync_interval=1 << 40)
    block_bytes = block.getvalue()

    def fastavro_block() -> list[Any]:
        return list(fastavro.reader(BytesIO(block_bytes)))

    def naive_decode() -> pa.Array:
        return pa.array([deserializer(p, CTX) for p in payload_list], decoder.arrow_type)

    def fastavro_write() -> None:
        out = BytesIO()
        for r in records:
            fastavro.schemaless_writer(out, parsed, r)

    def naive_encode() -> pa.Array:
        return pa.array([serializer(r, CTX) for r in column.to_pylist()], pa.binary())

    table = [
        ("decode", "ours (Arrow column in, Arrow column out)",
         best(args.repeat, lambda: decoder.decode(payloads, str))),
        ("decode", "ours, record by record (resolution; arrays, maps, unions)",
         best(args.repeat, lambda: by_record.decode(payloads, str))),
        ("decode", "fastavro alone, per record (dicts out)", best(args.repeat, fastavro_read)),
        ("decode", "fastavro block, one call (dicts out)", best(args.repeat, fastavro_block)),
        ("decode", "naive: Confluent AvroDeserializer per record + pa.array",
         best(args.repeat, naive_decode)),
        ("encode", "ours (Arrow column in, Arrow column out)",
         best(args.repeat, lambda: encoder.encode(column, "value"))),
        ("encode", "ours, record by record (schemas with arrays, maps, unions)",
         best(args.repeat, lambda: encoder._one_by_one(encoder._prepare(column, "v"), "v"))),
        ("encode", "fastavro alone, per record (dicts in)", best(args.repeat, fastavro_write)),
        ("encode", "naive: to_pylist + Confluent AvroSerializer per record + pa.array",
         best(args.repeat, naive_encode)),
    ]
    print(f"{n} records of a 10-field record, best of {args.repeat}")
    print(f"{'':8}{'':66}{'records/s':>12}{'s':>8}")
    for step, what, seconds in table:
        print(f"{step:8}{what:66}{n / seconds:12,.0f}{seconds:8.2f}")


if __name__ == "__main__":
    main()
