"""Schema ids carried in record headers instead of the payload's prefix.

Confluent's newer serializers can write the id to a header (``__value_schema_id``,
``__key_schema_id``; their ``schema.id.serializer`` setting) and leave the payload
unprefixed; their default deserializer looks in the header first. A header value is a
magic byte then the id: 0 and a 4-byte id (the prefix's own bytes), or 1 and a 16-byte
GUID, then (Protobuf) the message indexes. Each such row is given the prefix it stands for
(a GUID resolved to its schema through the registry, :meth:`.registry.SchemaRegistry.by_guid`),
so the codecs read it as any prefixed row. A GUID the registry cannot resolve makes the row
a bad record, with the reason and what to do.
"""

from __future__ import annotations

import uuid
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SchemaNotFoundError
from .schemas import RegisteredSchema

#: The header that carries a side's schema id.
HEADER = {"value": "__value_schema_id", "key": "__key_schema_id"}


class GuidLookup(Protocol):
    def by_guid(self, guid: str) -> RegisteredSchema: ...


def header_values(headers: pa.Array, name: str) -> dict[int, bytes]:
    """Row -> the value of its first header ``name``, for the rows that have one."""
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    if headers.null_count == len(headers):
        return {}
    flat = headers.flatten()
    match = pc.equal(flat.field("key"), name).fill_null(False)
    where = np.flatnonzero(match.to_numpy(zero_copy_only=False))
    if not len(where):
        return {}
    parents = pc.list_parent_indices(headers).to_numpy()[where]
    values = flat.field("value")
    found: dict[int, bytes] = {}
    for row, at in zip(parents.tolist(), where.tolist(), strict=True):
        if row not in found:
            value = values[at].as_py()
            found[row] = b"" if value is None else value
    return found


def _prefix(value: bytes, name: str, lookup: GuidLookup) -> bytes:
    """The payload prefix a header value stands for; ValueError (bad header) or
    SchemaNotFoundError (a GUID the registry does not resolve) with the reason."""
    if value[:1] == b"\x00" and len(value) >= 5:
        return value
    if value[:1] == b"\x01" and len(value) >= 17:
        guid = str(uuid.UUID(bytes=value[1:17]))
        schema_id = lookup.by_guid(guid).id
        return b"\x00" + schema_id.to_bytes(4, "big", signed=True) + value[17:]
    raise ValueError(f"its header {name} is not a schema id (a magic byte 0 and 4 bytes, or 1 "
                     f"and a 16-byte GUID; it has {len(value)} bytes starting {value[:1]!r})")


def prefixed(payloads: pa.Array, headers: pa.Array | None, side: str, lookup: GuidLookup
             ) -> tuple[pa.Array, dict[int, str]]:
    """``payloads`` with each header-framed row given its prefix, and the rows whose
    header cannot be read, with why (those rows become null payloads)."""
    found = {} if headers is None else header_values(headers, HEADER[side])
    if not found:
        return payloads, {}
    if isinstance(payloads, pa.ChunkedArray):
        payloads = payloads.combine_chunks()
    rows = payloads.cast(pa.binary()).to_pylist()
    failed: dict[int, str] = {}
    for i, value in found.items():
        if rows[i] is None:
            continue  # a tombstone stays null
        try:
            rows[i] = _prefix(value, HEADER[side], lookup) + rows[i]
        except SchemaNotFoundError as exc:
            failed[i], rows[i] = exc.message, None
        except ValueError as exc:
            failed[i], rows[i] = str(exc), None
    return pa.array(rows, pa.binary()), failed
