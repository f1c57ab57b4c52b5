"""Schema ids in record headers (Confluent's header framing) read as the payload's prefix."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pytest

from eos_kafka_source.errors import SchemaNotFoundError
from eos_kafka_source.formats import avro, framing, registry
from eos_kafka_source.formats.header_ids import header_values, prefixed
from eos_kafka_source.formats.registry_config import RegistryConfig
from eos_kafka_source.formats.registry_http import Answer
from eos_kafka_source.formats.schemas import FAILFAST, RegisteredSchema
from eos_kafka_source.records.decode import arrow_schema
from tests.unit.avro_helpers import Lookup, where

HEADERS = arrow_schema(True).field("headers").type
GUID = uuid.UUID("6f1e2c3a-1111-2222-3333-444455556666")


class Guids:
    def __init__(self, known: dict[str, int]) -> None:
        self.known = known

    def by_guid(self, guid: str) -> RegisteredSchema:
        if guid not in self.known:
            raise SchemaNotFoundError(f"schema GUID {guid} is not in the schema registry")
        return RegisteredSchema(self.known[guid], "AVRO", '"string"')


def _headers(*rows: list[tuple[str, bytes]] | None) -> pa.Array:
    return pa.array([None if r is None else [{"key": k, "value": v} for k, v in r]
                     for r in rows], HEADERS)


def test_the_first_header_of_the_name_per_row() -> None:
    headers = _headers(None, [("a", b"1"), ("__value_schema_id", b"x"),
                              ("__value_schema_id", b"y")], [], [("__key_schema_id", b"k")])
    assert header_values(headers, "__value_schema_id") == {1: b"x"}
    assert header_values(headers.slice(3), "__key_schema_id") == {0: b"k"}


def test_header_framed_rows_decode_as_prefixed_ones() -> None:
    """Magic 0 and an id (the prefix's own bytes), or magic 1 and a GUID the registry
    resolves: the Avro codec then reads them as it reads the prefix."""
    lookup = Lookup()
    reg = lookup.add({"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]})
    body = avro.encoder(reg, lookup).encode(pa.array([{"a": 7}], avro.arrow_type(reg, lookup)),
                                            "value")[0].as_py()[5:]
    framed = framing.header(reg.id) + body
    payloads = pa.array([framed, body, body, None], pa.binary())
    headers = _headers(None, [("__value_schema_id", framing.header(reg.id))],
                       [("__value_schema_id", b"\x01" + GUID.bytes)],
                       [("__value_schema_id", b"\x01" + GUID.bytes)])
    fixed, failed = prefixed(payloads, headers, "value", Guids({str(GUID): reg.id}))
    assert failed == {}
    assert fixed.to_pylist() == [framed, framed, framed, None]
    decoded = avro.decoder(reg, lookup, mode=FAILFAST).decode(fixed, where)
    assert decoded.values.to_pylist() == [{"a": 7}] * 3 + [None]


def test_a_guid_the_registry_cannot_resolve_or_a_bad_header_is_a_bad_row() -> None:
    payloads = pa.array([b"body", b"body", b"body"], pa.binary())
    headers = _headers([("__key_schema_id", b"\x01" + GUID.bytes)], [("__key_schema_id", b"\x07")],
                       None)
    fixed, failed = prefixed(payloads, headers, "key", Guids({}))
    assert fixed.to_pylist() == [None, None, b"body"]
    assert f"schema GUID {GUID}" in failed[0]
    assert "is not a schema id" in failed[1]


def _client(answer: Answer) -> registry.SchemaRegistry:
    client = registry.SchemaRegistry(RegistryConfig(urls=("http://r:1",)))
    client._transport = type("Stub", (), {"request": lambda self, m, p, b=None: answer})()
    return client


@pytest.mark.parametrize(("answer", "says"), [
    (Answer("http://r:1", 404, None), "does not resolve GUIDs"),
    (Answer("http://r:1", 404, {"error_code": 40403}, 40403, "not found"),
     "which this registry does not hold"),
])
def test_by_guid_names_what_the_registry_cannot_do(answer: Answer, says: str) -> None:
    registry.clear_cache()
    with pytest.raises(SchemaNotFoundError, match=says) as info:
        _client(answer).by_guid(str(GUID))
    assert "prefix_schema_id_serializer" in str(info.value) or "producer used" in str(info.value)


@pytest.mark.parametrize(("body", "schema_id"), [
    ({"schema": '"string"', "id": 42}, 42),
    ({"schema": '"string"'}, registry.stand_in_id(str(GUID))),
])
def test_by_guid_keeps_the_schema_under_its_id(body: dict[str, Any], schema_id: int) -> None:
    """The codecs look writer schemas up by id: the GUID's schema is found there."""
    registry.clear_cache()
    client = _client(Answer("http://r:1", 200, body))
    found = client.by_guid(str(GUID))
    assert found.id == schema_id and found.text == '"string"'
    assert client.by_id(schema_id) is found
    assert schema_id == 42 or schema_id < 0
