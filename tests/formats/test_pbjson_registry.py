"""The Protobuf and JSON Schema codecs over a real registry (Apicurio Registry's Confluent
API): .proto text and JSON Schemas as the registry stores and returns them, references
resolved through it, and the schemas ``schema_for`` derives accepted by it."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from eos_kafka_source.formats import json_schema, protobuf
from eos_kafka_source.formats.registry import RegistryConfig, SchemaRegistry, clear_cache
from eos_kafka_source.formats.schemas import FAILFAST, JSON, PROTOBUF, SchemaReference
from tests.schema_registry import ApicurioRegistry

WHERE = "t-0 at offset {}".format


@pytest.fixture
def registry(schema_registry: ApicurioRegistry) -> SchemaRegistry:
    clear_cache()
    config = RegistryConfig.parse({"schema.registry.url": schema_registry.url})
    assert config is not None
    return SchemaRegistry(config)


def test_protobuf_with_references_and_evolution(registry: SchemaRegistry, unique: str) -> None:
    package = unique.replace("-", "_")
    money = (f'syntax = "proto3";\npackage {package}.common;\n'
             "message Money { int64 cents = 1; string currency = 2; }\n")
    registry.register(f"{unique}-money", money, PROTOBUF)
    ref = SchemaReference("common/money.proto", f"{unique}-money", 1)
    v1 = (f'syntax = "proto3";\npackage {package};\nimport "common/money.proto";\n'
          'import "google/protobuf/timestamp.proto";\n'
          "message Order {\n  string id = 1;\n  common.Money total = 2;\n"
          "  google.protobuf.Timestamp at = 3;\n}\n")
    v2 = v1.replace("  google.protobuf.Timestamp at = 3;\n",
                    "  google.protobuf.Timestamp at = 3;\n  repeated string tags = 4;\n")
    v1_id = registry.register(f"{unique}-value", v1, PROTOBUF, [ref])
    v2_id = registry.register(f"{unique}-value", v2, PROTOBUF, [ref])
    writer_v1, reader_v2 = registry.by_id(v1_id), registry.version(f"{unique}-value", 2)
    assert reader_v2.id == v2_id

    row = {"id": "o-1", "total": {"cents": 995, "currency": "EUR"},
           "at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)}
    old = protobuf.encoder(writer_v1, registry).encode(
        pa.array([row], protobuf.arrow_type(writer_v1, registry)), "value")
    new = protobuf.encoder(reader_v2, registry).encode(
        pa.array([{**row, "tags": ["gift"]}], protobuf.arrow_type(reader_v2, registry)),
        "value")
    got = protobuf.decoder(reader_v2, registry, mode=FAILFAST).decode(
        pa.concat_arrays([old, new]), WHERE)
    assert got.values.to_pylist() == [{**row, "tags": []}, {**row, "tags": ["gift"]}]
    assert got.schema_ids.to_pylist() == [v1_id, v2_id]


def test_protobuf_schema_for_is_accepted_and_reads_back(registry: SchemaRegistry,
                                                        unique: str) -> None:
    arrow = pa.struct([("id", pa.int64()), ("name", pa.string()),
                       ("at", pa.timestamp("us", "UTC")),
                       ("attrs", pa.map_(pa.string(), pa.int64())),
                       ("lines", pa.list_(pa.struct([("sku", pa.string()),
                                                     ("qty", pa.int32())])))])
    text = protobuf.schema_for(arrow, name="Event", namespace=unique.replace("-", "_"))
    schema_id = registry.register(f"{unique}-value", text, PROTOBUF)
    schema = registry.by_id(schema_id)
    assert protobuf.arrow_type(schema, registry) == arrow
    values = pa.array([{"id": 1, "name": None, "at": datetime(2026, 1, 1, tzinfo=UTC),
                        "attrs": [("a", 1)], "lines": [{"sku": "x", "qty": 2}]}], arrow)
    payloads = protobuf.encoder(schema, registry).encode(values, "value")
    assert protobuf.decoder(schema, registry, mode=FAILFAST).decode(
        payloads, WHERE).values.equals(values)


def test_json_schema_with_a_reference(registry: SchemaRegistry, unique: str) -> None:
    address = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#",
                          "type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]})
    registry.register(f"{unique}-address", address, JSON)
    ref = SchemaReference("address.json", f"{unique}-address", 1)
    main = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "User",
                       "type": "object", "properties": {
                           "name": {"type": "string"}, "home": {"$ref": "address.json"},
                           "since": {"type": "string", "format": "date-time"}},
                       "required": ["name"]})
    schema = registry.by_id(registry.register(f"{unique}-value", main, JSON, [ref]))
    arrow = json_schema.arrow_type(schema, registry)
    assert arrow == pa.struct([pa.field("name", pa.string(), nullable=False),
                               ("home", pa.struct([pa.field("city", pa.string(),
                                                            nullable=False)])),
                               ("since", pa.timestamp("us", "UTC"))])
    values = pa.array([{"name": "ann", "home": {"city": "Oslo"},
                        "since": datetime(2025, 6, 1, tzinfo=UTC)}], arrow)
    payloads = json_schema.encoder(schema, registry).encode(values, "value")
    got = json_schema.decoder(schema, registry, mode=FAILFAST, validate=True).decode(
        payloads, WHERE)
    assert got.values.equals(values)
    derived = json_schema.schema_for(arrow, name="User", namespace=unique)
    assert registry.register(f"{unique}-derived-value", derived, JSON) > 0
