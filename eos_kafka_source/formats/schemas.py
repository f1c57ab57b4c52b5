"""The vocabulary the registry client and the codecs share (no I/O here)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa

#: Confluent's ``schemaType`` names; the registry omits it for Avro.
AVRO, PROTOBUF, JSON = "AVRO", "PROTOBUF", "JSON"


@dataclass(frozen=True)
class SchemaReference:
    """A reference from one schema to another (Protobuf imports, JSON ``$ref``, Avro named
    types): ``name`` is how the referring schema names it."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class RegisteredSchema:
    """One schema as the registry holds it. ``subject``/``version`` are None when it was
    looked up by id alone (an id may be registered under many subjects)."""

    id: int
    schema_type: str
    text: str
    subject: str | None = None
    version: int | None = None
    references: tuple[SchemaReference, ...] = ()


class SchemaLookup(Protocol):
    """What a codec needs from a registry: writer schemas by id (cached by the caller's
    client, so a codec may call it once per record batch) and referenced schemas."""

    def by_id(self, schema_id: int) -> RegisteredSchema: ...

    def version(self, subject: str, version: int | str) -> RegisteredSchema:
        """``version`` is a number or ``"latest"``."""
        ...


@dataclass(frozen=True)
class Decoded:
    """A decoded payload column, aligned with the binary column it came from.

    ``values`` has the reader schema's Arrow type; a null payload (a tombstone) stays null.
    ``schema_ids`` is the writer schema id of each row (null for a null payload or a row
    that is not in the wire format). ``errors`` is None when every row decoded, else one
    string per row: null where it decoded, the reason where it did not (PERMISSIVE mode;
    FAILFAST raises instead).
    """

    values: pa.Array
    schema_ids: pa.Array
    errors: pa.Array | None = None


#: Decode modes, the names Spark's ``from_avro`` uses.
FAILFAST, PERMISSIVE = "FAILFAST", "PERMISSIVE"


class PayloadDecoder(Protocol):
    """Decodes a binary column in the wire format to the reader schema's type. Built on the
    executor from picklable inputs; caches writer schemas by id for the worker's life."""

    #: The reader schema's Arrow type (a struct for a record/message/object).
    arrow_type: pa.DataType

    def decode(self, payloads: pa.Array, where: Callable[[int], str]) -> Decoded:
        """``payloads`` is binary; ``where(i)`` names row ``i`` for an error message
        (``"topic-partition at offset N"``). FAILFAST raises
        :class:`~eos_kafka_source.errors.PayloadDecodeError` at the first bad row."""
        ...


class PayloadEncoder(Protocol):
    """Encodes a column of the schema's Arrow type to binary in the wire format."""

    #: The registered schema every record is written with (its id goes in the header).
    schema: RegisteredSchema

    def encode(self, values: pa.Array, column: str) -> pa.Array:
        """Binary, one payload per row, null where ``values`` is null. A row that does not
        fit the schema raises :class:`~eos_kafka_source.errors.PayloadEncodeError` naming
        ``column`` and the field."""
        ...


class Codec(Protocol):
    """What each format module (avro, protobuf, json_schema) offers, as module functions."""

    def arrow_type(self, schema: RegisteredSchema, lookup: SchemaLookup) -> pa.DataType:
        """The reader schema's Arrow type (what the source column becomes)."""
        ...

    def decoder(self, reader: RegisteredSchema, lookup: SchemaLookup, *,
                mode: str) -> PayloadDecoder: ...

    def encoder(self, schema: RegisteredSchema, lookup: SchemaLookup) -> PayloadEncoder: ...

    def schema_for(self, arrow_type: pa.DataType, *, name: str, namespace: str) -> str:
        """The schema text derived from a column's type, registered under
        ``auto.register.schemas`` (Avro: as spark-avro's ``to_avro`` derives it)."""
        ...
