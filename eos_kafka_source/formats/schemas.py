"""The vocabulary the registry client and the codecs share (no I/O here)."""

from __future__ import annotations

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
