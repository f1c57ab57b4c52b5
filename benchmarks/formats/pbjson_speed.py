"""Decode and encode speed of the Protobuf and JSON Schema codecs, without Kafka.

    python -m benchmarks.formats.pbjson_speed [--rows 200000] [--repeat 3]

The same 10-field record as :mod:`.codec_speed` (the Avro codec's benchmark), as a proto3
message and as a JSON Schema object, framed as Confluent frames them. Each row of the table
is the best of ``--repeat`` runs, in records per second:

- ours: the codec's ``decode``/``encode`` of the whole Arrow column (JSON encode with and
  without checking each row against the schema).
- parse alone: protobuf's ``FromString`` / ``json.loads`` per record, no framing and no
  Arrow: the ceiling of a per-record loop.
- naive: Confluent's own deserializer/serializer per record (Protobuf's with
  ``MessageToDict`` to get dicts), then ``pa.array``: what a per-record Python UDF would do.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import pyarrow as pa
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import json_format

from eos_kafka_source.formats import json_schema, protobuf
from eos_kafka_source.formats.schemas import JSON, PROTOBUF, RegisteredSchema, SchemaReference

from .codec_speed import best, rows

PROTO = """
syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
message Event {
  int64 id = 1;
  string user = 2;
  string kind = 3;
  int64 seq = 4;
  double amount = 5;
  double score = 6;
  google.protobuf.Timestamp at = 7;
  optional string note = 8;
  int32 count = 9;
  bool ok = 10;
}
"""
JSON_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Event", "type": "object",
    "properties": {
        "id": {"type": "integer"}, "user": {"type": "string"}, "kind": {"type": "string"},
        "seq": {"type": "integer"}, "amount": {"type": "number"}, "score": {"type": "number"},
        "at": {"type": "string", "format": "date-time"},
        "note": {"type": ["string", "null"]}, "count": {"type": "integer"},
        "ok": {"type": "boolean"}},
    "required": ["id", "user", "kind", "seq", "amount", "score", "at", "count", "ok"],
}
PB_CTX = SerializationContext("events-pb", MessageField.VALUE)
JSON_CTX = SerializationContext("events-json", MessageField.VALUE)


class Lookup:
    def __init__(self, client: SchemaRegistryClient) -> None:
        self.client = client

    def by_id(self, schema_id: int) -> RegisteredSchema:
        found = self.client.get_schema(schema_id)
        refs = tuple(SchemaReference(r.name, r.subject, r.version)
                     for r in found.references or ())
        return RegisteredSchema(schema_id, found.schema_type, found.schema_str,
                                references=refs)

    def version(self, subject: str, version: int | str) -> RegisteredSchema:
        raise NotImplementedError


def _protobuf(client: SchemaRegistryClient, n: int, repeat: int) -> list[tuple[str, str, float]]:
    lookup = Lookup(client)
    schema_id = client.register_schema("events-pb-value", Schema(PROTO, PROTOBUF))
    registered = lookup.by_id(schema_id)
    encoder = protobuf.encoder(registered, lookup)
    decoder = protobuf.decoder(registered, lookup, mode="FAILFAST")
    column = pa.array(rows(n), decoder.arrow_type)
    payloads = encoder.encode(column, "value")
    assert decoder.decode(payloads, str).values.equals(column)
    cls = encoder.message_class
    payload_list = payloads.to_pylist()
    bodies = [p[6:] for p in payload_list]
    serializer = ProtobufSerializer(cls, client, {"use.deprecated.format": False,
                                                  "auto.register.schemas": True})
    deserializer = ProtobufDeserializer(cls, {"use.deprecated.format": False}, client)
    theirs = [serializer(cls.FromString(b), PB_CTX) for b in bodies]

    def naive_decode() -> pa.Array:
        dicts = [json_format.MessageToDict(deserializer(p, PB_CTX),
                                           preserving_proto_field_name=True)
                 for p in theirs]
        return pa.array(dicts)

    def naive_encode() -> list[Any]:
        return [serializer(cls(**{k: v for k, v in r.items() if v is not None}), PB_CTX)
                for r in column.to_pylist()]

    return [
        ("decode", "ours (Arrow column in, Arrow column out)",
         best(repeat, lambda: decoder.decode(payloads, str))),
        ("decode", "FromString alone, per record (messages out)",
         best(repeat, lambda: [cls.FromString(b) for b in bodies])),
        ("decode", "naive: Confluent deserializer + MessageToDict + pa.array",
         best(repeat, naive_decode)),
        ("encode", "ours (Arrow column in, Arrow column out)",
         best(repeat, lambda: encoder.encode(column, "value"))),
        ("encode", "SerializeToString alone, per record (messages in)",
         best(repeat, lambda: [m.SerializeToString() for m in
                               [cls.FromString(b) for b in bodies[:1]] * n])),
        ("encode", "naive: to_pylist + Confluent serializer per record",
         best(repeat, naive_encode)),
    ]


def _json(client: SchemaRegistryClient, n: int, repeat: int) -> list[tuple[str, str, float]]:
    lookup = Lookup(client)
    text = json.dumps(JSON_SCHEMA)
    schema_id = client.register_schema("events-json-value", Schema(text, JSON))
    registered = lookup.by_id(schema_id)
    encoder = json_schema.encoder(registered, lookup)
    unchecked = json_schema.encoder(registered, lookup, validate=False)
    decoder = json_schema.decoder(registered, lookup, mode="FAILFAST")
    column = pa.array(rows(n), decoder.arrow_type)
    payloads = encoder.encode(column, "value")
    assert decoder.decode(payloads, str).values.equals(column)
    payload_list = payloads.to_pylist()
    bodies = [p[5:] for p in payload_list]
    serializer = JSONSerializer(text, client, conf={"auto.register.schemas": False,
                                                   "use.latest.version": True})
    deserializer = JSONDeserializer(Schema(text, JSON), schema_registry_client=client)
    dicts = [json.loads(b) for b in bodies]

    return [
        ("decode", "ours (Arrow column in, Arrow column out)",
         best(repeat, lambda: decoder.decode(payloads, str))),
        ("decode", "ours, each row checked against its writer schema",
         best(repeat, lambda: json_schema.decoder(registered, lookup, mode="FAILFAST",
                                                  validate=True).decode(payloads, str))),
        ("decode", "json.loads alone, per record (dicts out)",
         best(repeat, lambda: [json.loads(b) for b in bodies])),
        ("decode", "naive: Confluent JSONDeserializer per record + pa.array",
         best(repeat, lambda: pa.array([deserializer(p, JSON_CTX) for p in payload_list]))),
        ("encode", "ours, each row checked (as Confluent's serializer does)",
         best(repeat, lambda: encoder.encode(column, "value"))),
        ("encode", "ours, validate=False",
         best(repeat, lambda: unchecked.encode(column, "value"))),
        ("encode", "naive: Confluent JSONSerializer per record (dicts in)",
         best(repeat, lambda: [serializer(d, JSON_CTX) for d in dicts])),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.rows
    client = SchemaRegistryClient.new_client({"url": "mock://pbjson-speed"})
    for name, table in (("Protobuf", _protobuf(client, n, args.repeat)),
                        ("JSON Schema", _json(client, n, args.repeat))):
        print(f"{name}: {n} records of a 10-field record, best of {args.repeat}")
        print(f"{'':8}{'':66}{'records/s':>12}{'s':>8}")
        for step, what, seconds in table:
            print(f"{step:8}{what:66}{n / seconds:12,.0f}{seconds:8.2f}")
        print()


if __name__ == "__main__":
    main()
