"""Every codec's decoder treats its writer schema's look-up alike (formats/writers.py): an
id the registry does not hold and a writer schema that does not load are row errors, named
as such; a registry that cannot answer fails the batch in either mode."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pytest

from eos_kafka_source.errors import PayloadDecodeError, SchemaNotFoundError, SchemaRegistryError
from eos_kafka_source.formats import avro, framing, json_schema, protobuf
from eos_kafka_source.formats.schemas import (
    AVRO,
    FAILFAST,
    JSON,
    PERMISSIVE,
    PROTOBUF,
    PayloadDecoder,
    RegisteredSchema,
    SchemaLookup,
    SchemaReference,
)
from tests.unit.avro_helpers import Lookup

WHERE = "t-0 at offset {}".format
OTHER = SchemaReference("other", "other-value", 1)


class Registry(Lookup):
    """avro_helpers' Lookup (``down``: an unreachable registry) holding schemas of any
    type; looking up a reference raises ``reference_error`` (none is held)."""

    def __init__(self, *schemas: RegisteredSchema) -> None:
        super().__init__()
        self.ids.update((s.id, s) for s in schemas)
        self.reference_error: Exception = SchemaNotFoundError("subject other-value not found")

    def version(self, subject: str, version: int | str) -> RegisteredSchema:
        raise self.reference_error


@dataclass(frozen=True)
class Codec:
    """One codec's reader schema (id 1), a writer text that does not load, a writer text
    that needs the reference ``OTHER``, and how a record written with an id is framed."""

    kind: str
    reader: str
    unloadable: str
    referring: str
    decoder: Callable[[RegisteredSchema, SchemaLookup, str], PayloadDecoder]
    payload: Callable[[int], bytes]


CODECS = [
    Codec(AVRO,
          json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}),
          '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "nope"}]}',
          json.dumps({"type": "record", "name": "R", "fields": [{"name": "a",
                                                                   "type": "other"}]}),
          lambda reader, lookup, mode: avro.decoder(reader, lookup, mode=mode),
          lambda schema_id: framing.header(schema_id) + b"\x02"),
    Codec(PROTOBUF,
          'syntax = "proto3"; message M { int32 a = 1; }',
          'syntax = "proto3"; message M { int32 a = ; }',
          'syntax = "proto3"; import "other"; message M { int32 a = 1; }',
          lambda reader, lookup, mode: protobuf.decoder(reader, lookup, mode=mode),
          lambda schema_id: framing.header(schema_id, [0]) + b"\x08\x01"),
    Codec(JSON,
          json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}}),
          '{"type": "object", "properties": ',
          json.dumps({"type": "object", "properties": {"a": {"$ref": "other"}}}),
          lambda reader, lookup, mode: json_schema.decoder(reader, lookup, mode=mode,
                                                           validate=True),
          lambda schema_id: framing.header(schema_id) + b'{"a": 1}'),
]


def _registry(codec: Codec) -> Registry:
    return Registry(RegisteredSchema(1, codec.kind, codec.reader),
                    RegisteredSchema(2, codec.kind, codec.unloadable),
                    RegisteredSchema(3, codec.kind, codec.referring, references=(OTHER,)))


def _reasons(codec: Codec, registry: Registry, schema_id: int) -> list[str | None]:
    """The row errors of a good row (reader id) and a row written with ``schema_id``, read
    PERMISSIVE; FAILFAST must stop at the second with the same reason."""
    payloads = pa.array([codec.payload(1), codec.payload(schema_id)], pa.binary())
    got = codec.decoder(registry.ids[1], registry, PERMISSIVE).decode(payloads, WHERE)
    assert got.values[1].as_py() is None and got.errors is not None
    reasons: list[str | None] = got.errors.to_pylist()
    assert reasons[0] is None, reasons
    with pytest.raises(PayloadDecodeError) as caught:
        codec.decoder(registry.ids[1], registry, FAILFAST).decode(payloads, WHERE)
    assert "t-0 at offset 1" in caught.value.message
    assert str(reasons[1]) in caught.value.message
    return reasons


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.kind)
def test_an_id_the_registry_does_not_hold_is_a_row_error(codec: Codec) -> None:
    reason = _reasons(codec, _registry(codec), 99)[1]
    assert "the registry has no schema id 99 (schema id 99 not found)" in str(reason)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.kind)
def test_a_writer_schema_that_does_not_load_is_a_row_error(codec: Codec) -> None:
    reason = str(_reasons(codec, _registry(codec), 2)[1])
    assert "writer schema id 2 does not load" in reason
    assert "has no schema id" not in reason


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.kind)
@pytest.mark.parametrize("error", [SchemaNotFoundError("subject other-value not found"),
                                   KeyError("other-value"), IndexError("other-value")],
                         ids=["not-found", "key-error", "index-error"])
def test_a_writer_schema_whose_reference_is_missing_does_not_load(
        codec: Codec, error: Exception) -> None:
    """A LookupError while loading is the writer schema's fault, not a missing id."""
    registry = _registry(codec)
    registry.reference_error = error
    reason = str(_reasons(codec, registry, 3)[1])
    assert "writer schema id 3 does not load" in reason and "other-value" in reason
    assert "has no schema id" not in reason


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.kind)
@pytest.mark.parametrize("mode", [FAILFAST, PERMISSIVE])
def test_a_registry_that_cannot_answer_fails_the_batch(codec: Codec, mode: str) -> None:
    registry = _registry(codec)
    decoder = codec.decoder(registry.ids[1], registry, mode)
    registry.down = True
    with pytest.raises(SchemaRegistryError, match="did not answer"):
        decoder.decode(pa.array([codec.payload(2)], pa.binary()), WHERE)
    registry.down = False
    registry.reference_error = SchemaRegistryError("registry http://registry:8081 refused "
                                                   "the sign-in")
    with pytest.raises(SchemaRegistryError, match="refused the sign-in"):
        decoder.decode(pa.array([codec.payload(3)], pa.binary()), WHERE)
