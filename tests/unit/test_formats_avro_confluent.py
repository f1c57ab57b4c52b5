"""Interop with Confluent's own Avro serializer and deserializer, both ways.

Confluent's Python client (its mock registry, no server) is the byte oracle: what its
AvroSerializer writes decodes with our decoder to the values it was given, and what our
encoder writes its AvroDeserializer reads back.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from eos_kafka_source.formats import avro
from eos_kafka_source.formats.schemas import AVRO, FAILFAST, RegisteredSchema
from tests.unit.avro_helpers import where

SCHEMA = {"type": "record", "name": "Order", "namespace": "com.shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "ok", "type": "boolean"},
    {"name": "qty", "type": "int"},
    {"name": "ratio", "type": "float"},
    {"name": "price", "type": "double"},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "raw", "type": "bytes"},
    {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}},
    {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 2}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12,
                                "scale": 3}},
    {"name": "fee", "type": {"type": "fixed", "name": "Fee", "size": 4,
                             "logicalType": "decimal", "precision": 8, "scale": 2}},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}},
    {"name": "ship", "type": ["null", {"type": "record", "name": "Ship", "fields": [
        {"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "int"]}]}]},
    {"name": "either", "type": ["int", "string"]},
]}

REF = uuid.UUID("8d6ae7b4-1111-4c3e-9a1e-0123456789ab")


def _confluent_values() -> list[dict[str, Any]]:
    """Records as Confluent's serializer (fastavro) takes them."""
    base = {
        "id": 2**40, "ok": True, "qty": -7, "ratio": 0.25, "price": 19.99, "note": None,
        "raw": b"\x00\x01", "state": "PAID", "code": b"AB", "day": date(2024, 2, 29),
        "at": datetime(2024, 2, 29, 12, 30, 1, 250000, tzinfo=UTC),
        "at_us": datetime(1969, 7, 20, 20, 17, 40, 123456, tzinfo=UTC),
        "local": datetime(2001, 1, 1, 0, 0, 0, 1000),
        "amount": Decimal("-123456789.123"), "fee": Decimal("12.34"), "ref": REF,
        "tags": ["a", "b"], "attrs": {"x": 1, "y": None},
        "ship": {"city": "Oslo", "zip": None}, "either": 5,
    }
    other = {**base, "id": -1, "ok": False, "note": "gift", "tags": [], "attrs": {},
             "ship": None, "either": "five", "amount": Decimal("0.000"),
             "fee": Decimal("-999999.99")}
    return [base, other]


def _as_arrow(value: dict[str, Any]) -> dict[str, Any]:
    """The same record as our column holds it (Spark's view of it)."""
    out = dict(value)
    out["ref"] = str(value["ref"])
    out["attrs"] = list(value["attrs"].items())
    either = value["either"]
    out["either"] = {"member0": either if isinstance(either, int) else None,
                     "member1": either if isinstance(either, str) else None}
    return out


class _Lookup:
    """SchemaLookup over Confluent's mock registry client."""

    def __init__(self, client: SchemaRegistryClient) -> None:
        self.client = client

    def by_id(self, schema_id: int) -> RegisteredSchema:
        schema = self.client.get_schema(schema_id)
        return RegisteredSchema(schema_id, AVRO, schema.schema_str)

    def version(self, subject: str, version: int | str) -> RegisteredSchema:
        raise AssertionError("no references here")


@pytest.fixture
def client(request: pytest.FixtureRequest) -> SchemaRegistryClient:
    return SchemaRegistryClient.new_client({"url": f"mock://{request.node.name}"})


CTX = SerializationContext("orders", MessageField.VALUE)


def test_confluent_serializer_bytes_decode_with_ours(client: SchemaRegistryClient) -> None:
    serializer = AvroSerializer(client, json.dumps(SCHEMA))
    payloads = [serializer(v, CTX) for v in _confluent_values()]
    schema_id = client.get_latest_version("orders-value").schema_id
    lookup = _Lookup(client)
    decoder = avro.decoder(lookup.by_id(schema_id), lookup, mode=FAILFAST)
    got = decoder.decode(pa.array([*payloads, None], pa.binary()), where)
    assert got.values.to_pylist() == [_as_arrow(v) for v in _confluent_values()] + [None]
    assert got.schema_ids.to_pylist() == [schema_id, schema_id, None]


def test_our_bytes_decode_with_confluent_deserializer(client: SchemaRegistryClient) -> None:
    schema_id = client.register_schema("orders-value", Schema(json.dumps(SCHEMA), "AVRO"))
    lookup = _Lookup(client)
    encoder = avro.encoder(lookup.by_id(schema_id), lookup)
    column = pa.array([_as_arrow(v) for v in _confluent_values()], encoder.arrow_type)
    payloads = encoder.encode(column, "value").to_pylist()
    deserializer = AvroDeserializer(client)
    assert [deserializer(p, CTX) for p in payloads] == _confluent_values()


def test_confluent_reads_to_a_newer_reader_like_ours(client: SchemaRegistryClient) -> None:
    """A writer schema resolved to a reader schema: our result is Confluent's."""
    old = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"}, {"name": "gone", "type": "string"}]}
    new = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "long"}, {"name": "b", "type": "string", "default": "d"}]}
    payload = AvroSerializer(client, json.dumps(old))({"a": 1, "gone": "x"}, CTX)
    reader_id = client.register_schema("other", Schema(json.dumps(new), "AVRO"))
    lookup = _Lookup(client)
    ours = avro.decoder(lookup.by_id(reader_id), lookup, mode=FAILFAST).decode(
        pa.array([payload]), where).values.to_pylist()
    theirs = AvroDeserializer(client, json.dumps(new))(payload, CTX)
    assert ours == [theirs] == [{"a": 1, "b": "d"}]


def test_schema_for_registers_and_round_trips_through_confluent(
        client: SchemaRegistryClient) -> None:
    t = pa.struct([pa.field("id", pa.int64(), False), pa.field("name", pa.string()),
                   pa.field("amount", pa.decimal128(10, 2)),
                   pa.field("at", pa.timestamp("us", "UTC"))])
    text = avro.schema_for(t, name="topLevelRecord", namespace="")
    schema_id = client.register_schema("orders-value", Schema(text, "AVRO"))
    lookup = _Lookup(client)
    rows = [{"id": 1, "name": None, "amount": Decimal("-1.50"),
             "at": datetime(2020, 1, 1, 0, 0, 0, 1, tzinfo=UTC)}]
    payload = avro.encoder(lookup.by_id(schema_id), lookup).encode(pa.array(rows, t), "v")
    assert AvroDeserializer(client)(payload[0].as_py(), CTX) == rows[0]
