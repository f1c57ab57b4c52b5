"""The Avro codec: Confluent-framed Avro to and from Arrow columns, as spark-avro types them.

Module functions per :class:`~eos_kafka_source.formats.schemas.Codec`. A record of
primitives, enums, fixed, logical types and nullable fields is read (when written with the
reader schema) and written column-wise with numpy (avro_columnar*.py). Otherwise each record
is read by fastavro with its writer schema (looked up once per id, parsed once) resolved to
the reader schema by Avro's rules, and the batch becomes one Arrow array; logical types are
applied column-wise after that (avro_arrow.py). A bad row always goes the fastavro way,
which names it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from io import BytesIO
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
from fastavro.validation import ValidationError, validate

from ..errors import PayloadDecodeError, PayloadEncodeError
from . import avro_branches, avro_columnar, avro_columnar_decode, framing
from .avro_arrow import (
    raw_type,
    reading_fix,
    tags_needed,
    to_final,
    to_raw,
    writing_fix,
)
from .avro_derive import avro_schema_for
from .avro_types import Node, documents, load, strip_logical
from .schemas import FAILFAST, PERMISSIVE, Decoded, RegisteredSchema, SchemaLookup
from .writers import writer_or_reason

_FIX = ("set the option mode to PERMISSIVE to read such records as null with the reason "
        "kept, or fix the producer")
_RESOLVE_FIX = ("choose a reader schema the writer schema resolves to (valueSchema or "
                "valueSchemaVersion; key... for keys), or set the option mode to PERMISSIVE")


def arrow_type(schema: RegisteredSchema, lookup: SchemaLookup) -> pa.DataType:
    """The Arrow type spark-avro's ``from_avro`` gives a column read with ``schema``."""
    return load(schema, lookup).root.arrow


def schema_for(arrow_type: pa.DataType, *, name: str = "topLevelRecord",
               namespace: str = "") -> str:
    """The Avro schema ``to_avro`` derives from a column of ``arrow_type`` (compact JSON)."""
    return json.dumps(avro_schema_for(arrow_type, name, namespace), separators=(",", ":"))


def _parsed(documents: list[Any]) -> Any:
    """fastavro's parsed schema (logical types stripped), references first."""
    named: dict[str, Any] = {}
    parsed: Any = None
    for doc in documents:
        parsed = fastavro.parse_schema(strip_logical(doc), named)
    return parsed


class _Bad(Exception):
    """One row that did not decode: ``why`` and ``fix`` for the message."""

    def __init__(self, why: str, fix: str = _FIX) -> None:
        super().__init__(why)
        self.why, self.fix = why, fix


class AvroDecoder:
    """Decodes Confluent-framed Avro with a fixed reader schema (a PayloadDecoder)."""

    def __init__(self, reader: RegisteredSchema, lookup: SchemaLookup, mode: str) -> None:
        if mode not in (FAILFAST, PERMISSIVE):
            raise ValueError(f"mode must be {FAILFAST} or {PERMISSIVE}, not {mode!r}")
        self.reader, self.lookup, self.mode = reader, lookup, mode
        loaded = load(reader, lookup)
        self.root: Node = loaded.root
        self.arrow_type: pa.DataType = self.root.arrow
        self._raw = raw_type(self.root)
        self._tagged = tags_needed(self.root)
        self._fix = reading_fix(self.root, self._tagged)
        self._documents = loaded.documents
        # unions whose branches fastavro cannot tell apart by value: wrapped, both sides
        self._branches = avro_branches.needed(self.root)
        self._reader_parsed = _parsed(avro_branches.reader_documents(loaded.documents)
                                      if self._branches else loaded.documents)
        self._writers: dict[int, Any] = {}
        self._columnar = avro_columnar.supported(self.root)

    def _writer(self, schema_id: int) -> tuple[Any, Any]:
        """(parsed writer schema, reader schema or None when they are the same); raises
        _Bad for an id the registry does not have or a schema that does not load."""
        found = self._writers.get(schema_id)
        if found is None:
            found = self._writers[schema_id] = self._resolve(schema_id)
        if isinstance(found, _Bad):
            raise found
        return found  # type: ignore[no-any-return]

    def _resolve(self, schema_id: int) -> tuple[Any, Any] | _Bad:
        if schema_id == self.reader.id:
            return self._reader_parsed, None
        found = writer_or_reason(self.lookup, schema_id, self._load_writer)
        return _Bad(f"does not decode: {found}") if isinstance(found, str) else found

    def _load_writer(self, writer: RegisteredSchema) -> tuple[Any, Any]:
        if writer.text == self.reader.text and writer.references == self.reader.references:
            return self._reader_parsed, None
        docs = documents(writer, self.lookup)  # parsed only: Spark's type is the reader's
        if self._branches:
            docs = avro_branches.writer_documents(docs, self._documents)
        return _parsed(docs), self._reader_parsed

    def _read(self, body: bytes, schema_id: int) -> Any:
        writer, reader = self._writer(schema_id)
        try:
            value = fastavro.schemaless_reader(BytesIO(body), writer, reader,
                                               return_named_type=self._tagged)
        except fastavro.read.SchemaResolutionError as exc:
            raise _Bad(f"cannot be resolved to the reader schema {self.reader.id} ({exc})",
                       _RESOLVE_FIX) from exc
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else "its bytes end early"
            raise _Bad(f"does not decode with its writer schema ({detail})") from exc
        return value if self._fix is None else self._fix(value)

    def decode(self, payloads: pa.Array, where: Callable[[int], str]) -> Decoded:
        framed = framing.split(payloads)
        n = len(framed)
        ids = framed.schema_ids.tolist()
        data = framed.data.tobytes()
        errors: dict[int, str] = {}
        values = self._column_wise(framed)
        if values is None:
            rows = self._all_good(framed, ids, data)
            if rows is None:
                rows = self._one_by_one(framed, ids, data, where, errors)
            values = self._arrow(rows, where, ids, errors)
        error_col = None
        if errors:
            error_col = pa.array([errors.get(i) for i in range(n)], pa.string())
        return Decoded(values, framed.id_array(), error_col)

    def _column_wise(self, framed: framing.Framed) -> pa.Array | None:
        """Every row read at once (avro_columnar_decode.py) when every row is null or was
        written with the reader schema itself, and reads that way; else None."""
        if not self._columnar:
            return None
        ok = framed.state == framing.OK
        if (~ok & (framed.state != framing.NULL)).any():
            return None
        try:
            if any(self._writer(k)[1] is not None
                   for k in set(framed.schema_ids[ok].tolist())):
                return None  # resolution to the reader schema: fastavro's
        except _Bad:
            return None
        rows = np.flatnonzero(ok)
        raw = avro_columnar_decode.decode(framed.data, framed.body_start[rows],
                                          framed.end[rows], self.root)
        if raw is None:
            return None
        raw = avro_columnar_decode.spread(raw, ok)
        try:
            return to_final(raw, self.root)
        except ValueError:
            return None

    def _all_good(self, framed: framing.Framed, ids: list[int], data: bytes
                  ) -> list[Any] | None:
        """Every row read in one comprehension, or None when any row fails (then
        :meth:`_one_by_one` finds which, in order)."""
        ok = np.flatnonzero(framed.state == framing.OK)
        if len(ok) + int((framed.state == framing.NULL).sum()) != len(framed):
            return None
        read = fastavro.schemaless_reader
        tagged = self._tagged
        try:
            schemas = {k: self._writer(k) for k in set(framed.schema_ids[ok].tolist())}
            spans = zip(framed.body_start[ok].tolist(), framed.end[ok].tolist(), strict=True)
            if len(schemas) == 1 and not tagged:
                ((writer, reader),) = schemas.values()
                values = [read(BytesIO(data[s:e]), writer, reader) for s, e in spans]
            else:
                values = [read(BytesIO(data[s:e]), *schemas[ids[i]], return_named_type=tagged)
                          for i, (s, e) in zip(ok.tolist(), spans, strict=True)]
        except Exception:
            return None
        if self._fix is not None:
            fix = self._fix
            values = [fix(v) for v in values]
        if len(ok) == len(framed):
            return values
        rows: list[Any] = [None] * len(framed)
        for i, value in zip(ok.tolist(), values, strict=True):
            rows[i] = value
        return rows

    def _one_by_one(self, framed: framing.Framed, ids: list[int], data: bytes,
                    where: Callable[[int], str], errors: dict[int, str]) -> list[Any]:
        n = len(framed)
        state = framed.state.tolist()
        starts = framed.body_start.tolist()
        ends = framed.end.tolist()
        rows: list[Any] = [None] * n
        for i in range(n):
            st = state[i]
            if st == framing.OK:
                try:
                    rows[i] = self._read(data[starts[i]:ends[i]], ids[i])
                except _Bad as bad:
                    self._failed(i, where, ids[i], bad, errors)
            elif st != framing.NULL:
                self._failed(i, where, None, _Bad(framing.WHY[st]), errors)
        return rows

    def _failed(self, i: int, where: Callable[[int], str], schema_id: int | None, bad: _Bad,
                errors: dict[int, str]) -> None:
        which = "" if schema_id is None else f" (schema id {schema_id})"
        reason = f"the Avro payload{which} {bad.why}"
        if self.mode == FAILFAST:
            raise PayloadDecodeError(f"{where(i)}: {reason}; {bad.fix}.")
        errors[i] = reason

    def _arrow(self, rows: list[Any], where: Callable[[int], str], ids: list[int],
               errors: dict[int, str]) -> pa.Array:
        try:
            return to_final(pa.array(rows, type=self._raw), self.root)
        except (pa.ArrowException, ValueError, TypeError, OverflowError):
            pass
        # One row does not fit Spark's type (a decimal past its precision, ...): find it.
        for i, row in enumerate(rows):
            if row is None:
                continue
            try:
                to_final(pa.array([row], type=self._raw), self.root)
            except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
                rows[i] = None
                self._failed(i, where, ids[i], _Bad(f"has a value Spark's type cannot hold "
                                                    f"({exc})"), errors)
        return to_final(pa.array(rows, type=self._raw), self.root)


def decoder(reader: RegisteredSchema, lookup: SchemaLookup, *, mode: str = FAILFAST
            ) -> AvroDecoder:
    """A PayloadDecoder reading every record as ``reader`` (Avro schema resolution)."""
    return AvroDecoder(reader, lookup, mode)


class AvroEncoder:
    """Encodes an Arrow column of the schema's type to Confluent-framed Avro."""

    def __init__(self, schema: RegisteredSchema, lookup: SchemaLookup) -> None:
        self.schema = schema
        loaded = load(schema, lookup)
        self.root: Node = loaded.root
        self.arrow_type: pa.DataType = self.root.arrow
        self._parsed = _parsed(loaded.documents)
        self._fix = writing_fix(self.root)
        self._header = framing.header(schema.id)
        # Nulls where the schema has none are found row by row, with the field's path.
        self._loose = _loose(self.arrow_type)
        self._columnar = avro_columnar.supported(self.root)

    def _prepare(self, values: pa.Array, column: str) -> pa.Array:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        _check_fields(values.type, self.root, column)
        if values.type != self._loose:
            try:
                values = values.cast(self._loose)
            except (pa.ArrowException, ValueError) as exc:
                raise PayloadEncodeError(
                    f"column {column} of type {values.type} does not fit Avro schema "
                    f"{self.schema.id} ({exc}); cast the column to {self.arrow_type}, or "
                    "write with a schema that fits it") from exc
        try:
            return to_raw(values, self.root)
        except (pa.ArrowException, ValueError) as exc:
            raise PayloadEncodeError(f"column {column} does not fit Avro schema "
                                     f"{self.schema.id} ({exc}); fix the column") from exc

    def encode(self, values: pa.Array, column: str) -> pa.Array:
        raw = self._prepare(values, column)
        if self._columnar:
            try:
                framed = avro_columnar.encode(raw, self.root, self._header)
            except pa.ArrowException:  # past 2 GiB in one binary column, say
                framed = None
            if framed is not None:
                return framed
        return self._one_by_one(raw, column)

    def _one_by_one(self, raw: pa.Array, column: str) -> pa.Array:
        """fastavro, record by record: any schema, and the row and field of a misfit."""
        rows = raw.to_pylist()
        out = BytesIO()
        ends = [0] * (len(rows) + 1)
        write, header, schema, fix = fastavro.schemaless_writer, self._header, self._parsed, \
            self._fix
        for i, row in enumerate(rows):
            if row is not None:
                out.write(header)
                try:
                    write(out, schema, row if fix is None else fix(row))
                except Exception as exc:  # the fix changed ``row``: judge a fresh copy
                    raise self._error(column, i, raw.slice(i, 1).to_pylist()[0], exc) from exc
            ends[i + 1] = out.tell()
        offsets = pa.array(ends, pa.int32() if ends[-1] < 2**31 else pa.int64())
        kind = pa.binary() if ends[-1] < 2**31 else pa.large_binary()
        validity = None if not raw.null_count else raw.is_valid().buffers()[1]
        return pa.Array.from_buffers(kind, len(rows), [validity, offsets.buffers()[1],
                                                       pa.py_buffer(out.getbuffer())])

    def _error(self, column: str, i: int, row: Any, exc: Exception) -> PayloadEncodeError:
        """The field path and reason for a row that failed."""
        found = _misfit(row, self.root, column)
        if found is None:
            why = f"{type(exc).__name__}: {exc}"
            try:
                validate(row if self._fix is None else self._fix(row), self._parsed,
                         raise_errors=True)
            except ValidationError as invalid:
                why = "; ".join(str(e) for e in invalid.errors)
            found = column, why
        return PayloadEncodeError(f"column {column}, row {i}: {found[0]} {found[1]} (Avro "
                                  f"schema {self.schema.id}); fix the value or write with a "
                                  "schema that allows it")


def _misfit(value: Any, node: Node, path: str) -> tuple[str, str] | None:
    """Where a raw row first breaks the schema the way Arrow can: a null the schema does
    not allow (other faults are left to fastavro's validator)."""
    if value is None:
        return None if node.nullable else (path, "is null, which the schema does not allow")
    if node.kind == "record" and isinstance(value, dict):
        for name, child in node.children:
            if name in value or not child.has_default:
                found = _misfit(value.get(name), child, f"{path}.{name}")
                if found:
                    return found
    elif node.kind == "array" and isinstance(value, list):
        for k, item in enumerate(value):
            found = _misfit(item, node.children[0][1], f"{path}[{k}]")
            if found:
                return found
    elif node.kind == "map" and isinstance(value, list):  # to_pylist's (key, value) pairs
        for key, item in value:
            found = _misfit(item, node.children[0][1], f"{path}[{key!r}]")
            if found:
                return found
    return None


def _loose(t: pa.DataType) -> pa.DataType:
    """``t`` with every field nullable."""
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _loose(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(_loose(t.value_type))
    if pa.types.is_map(t):
        return pa.map_(t.key_type, _loose(t.item_type))
    return t


def _check_fields(t: pa.DataType, node: Node, path: str) -> None:
    """Fields are matched by name, as spark-avro's ``to_avro`` does: a column field the
    record lacks, or a record field without a default the column lacks, is refused."""
    if node.kind == "record" and pa.types.is_struct(t):
        have = {f.name: f for f in t}
        fields = dict(node.children)
        for name in have:
            if name not in fields:
                raise PayloadEncodeError(
                    f"{path}.{name} has no field in the Avro record {node.name}; drop it or "
                    "write with a schema that has it")
        for name, child in fields.items():
            if name not in have:
                if not child.nullable:
                    raise PayloadEncodeError(
                        f"{path} has no field {name}, which the Avro record {node.name} "
                        "requires; add the column or write with a schema without it")
                continue
            _check_fields(have[name].type, child, f"{path}.{name}")
    elif node.kind == "array" and (pa.types.is_list(t) or pa.types.is_large_list(t)):
        _check_fields(t.value_type, node.children[0][1], f"{path}[]")
    elif node.kind == "map" and pa.types.is_map(t):
        _check_fields(t.item_type, node.children[0][1], f"{path}{{}}")


def encoder(schema: RegisteredSchema, lookup: SchemaLookup) -> AvroEncoder:
    """A PayloadEncoder writing every row with ``schema`` (its id in each header)."""
    return AvroEncoder(schema, lookup)
