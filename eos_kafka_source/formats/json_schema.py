"""JSON Schema payloads in Confluent's wire format: the codec (see :class:`.schemas.Codec`).

A record is the 5-byte header then JSON text. Decoding parses each row with the standard
library's ``json`` (in C; orjson would be faster but is one more native wheel for every
executor) and builds the column with one ``pa.array`` against the reader's type. The reader
type comes from the reader schema, so writer fields it lacks are ignored and fields the
writer lacks are null; dates and timestamps are parsed from their ISO 8601 text. Rows are
not checked against their writer schema on decode unless asked (``validate=True``);
encoding checks every row, as Confluent's serializer does.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError, PayloadEncodeError
from ..gcpause import gc_paused
from . import framing
from .json_check import Checker
from .json_schema_types import Required, Resolver, required_by_place, schema_for, to_arrow
from .schemas import FAILFAST, PERMISSIVE, Decoded, RegisteredSchema, SchemaLookup
from .writers import writer_or_reason

__all__ = ["arrow_type", "decoder", "encoder", "schema_for"]


def arrow_type(schema: RegisteredSchema, lookup: SchemaLookup) -> pa.DataType:
    """The Arrow type of the schema (a struct for an object with properties)."""
    return to_arrow(Resolver(schema, lookup))


def _parse_timestamp(text: str) -> datetime.datetime:
    value = datetime.datetime.fromisoformat(text)
    if value.tzinfo is None:
        raise ValueError(f"date-time {text!r} has no zone offset (RFC 3339 requires one)")
    return value


Convert = Callable[[Any], Any]

_INT64 = (-(2**63), 2**63)


def _misfit(path: str, value: Any, what: str) -> ValueError:
    shown = json.dumps(value) if not isinstance(value, (dict, list)) else type(value).__name__
    return ValueError(f"{path or 'the value'} is {shown}, which {what}")


def _integer(path: str) -> Convert:
    def integer(v: Any) -> Any:
        if type(v) is int and _INT64[0] <= v < _INT64[1]:
            return v
        if type(v) is float and v.is_integer() and _INT64[0] <= v < _INT64[1]:
            return int(v)  # 1.0 is an integer to JSON Schema
        if type(v) is float:
            raise _misfit(path, v, "the reader schema's integer cannot hold exactly")
        if type(v) is int:
            raise _misfit(path, v, "is past the range of the reader schema's integer (a long)")
        raise _misfit(path, v, "is not an integer")
    return integer


def _number(path: str) -> Convert:
    def number(v: Any) -> Any:
        if type(v) is float or type(v) is int:
            return v
        raise _misfit(path, v, "is not a number")
    return number


def _kind(path: str, kind: type, what: str, then: Convert | None = None) -> Convert:
    def check(v: Any) -> Any:
        if type(v) is not kind:
            raise _misfit(path, v, f"is not {what}")
        return v if then is None else then(v)
    return check


def _converter(arrow: pa.DataType, path: str = "") -> Convert:
    """How a parsed JSON value becomes what ``pa.array`` takes for ``arrow``, checked by the
    reader schema's types: a value the type cannot hold exactly (2.7 for an integer, true
    for a number, a number for a string) raises ValueError naming its path, never
    converted (as Spark's from_json). Dates and timestamps are parsed from their text.
    Rows are first read with the quick checks (:func:`_quick`); these word a misfit."""
    if pa.types.is_int64(arrow):
        return _integer(path)
    if pa.types.is_float64(arrow):
        return _number(path)
    if pa.types.is_boolean(arrow):
        return _kind(path, bool, "a boolean")
    if pa.types.is_string(arrow):
        return _kind(path, str, "a string")
    if pa.types.is_timestamp(arrow):
        return _kind(path, str, "a date-time string", _parse_timestamp)
    if pa.types.is_date(arrow):
        return _kind(path, str, "a date string", datetime.date.fromisoformat)
    if pa.types.is_struct(arrow):
        return _struct(arrow, path)
    if pa.types.is_list(arrow) or pa.types.is_map(arrow):
        inner = arrow.value_field if pa.types.is_list(arrow) else arrow.item_field
        conv = _converter(inner.type, f"{path}[]" if pa.types.is_list(arrow) else
                          f"{path}{{}}")
        nullable = inner.nullable
        if pa.types.is_list(arrow):
            def array(items: Any) -> list[Any]:
                if type(items) is not list:
                    raise _misfit(path, items, "is not an array")
                return [_item(v, conv, nullable, path) for v in items]
            return array

        def obj(items: Any) -> dict[str, Any]:
            if type(items) is not dict:
                raise _misfit(path, items, "is not an object")
            return {k: _item(v, conv, nullable, path) for k, v in items.items()}
        return obj
    raise ConfigError(f"the JSON reader has no check for {arrow}")


def _struct(arrow: pa.StructType, path: str) -> Convert:
    plan = [(f.name, f.nullable, _converter(f.type, f"{path}.{f.name}" if path else f.name))
            for f in arrow]

    def struct(value: Any) -> dict[str, Any]:
        if type(value) is not dict:
            raise _misfit(path, value, "is not an object")
        out: dict[str, Any] = {}
        for name, nullable, conv in plan:
            item = value.get(name)
            if item is None:
                if not nullable:
                    raise ValueError(f"{path + '.' if path else ''}{name} is "
                                     f"{'null' if name in value else 'missing'}, which "
                                     "the reader schema requires")
                out[name] = None
            else:
                out[name] = conv(item)
        return out
    return struct


class _Quick:
    """The checks ``pa.array`` does not make itself (it truncates 2.7 into an integer, takes
    true as 1.0 and lets a null into a required property), compiled to one Python function
    per reader type that mutates the parsed row in place: inline ``type(x) is int`` tests
    instead of a call per value (as fast as no check on a record of numbers, where calls
    cost a third of the read). Any misfit raises ValueError; the full checks word it."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names = 0

    def var(self) -> str:
        self.names += 1
        return f"v{self.names}"

    def emit(self, arrow: pa.DataType, var: str, store: str, pad: str) -> bool:
        """Lines checking ``var`` (stored back with ``store % value``); False: none needed."""
        out = self.lines
        if pa.types.is_int64(arrow):
            out.append(f"{pad}if type({var}) is not int: {store % f'_integral({var})'}")
            return True
        if pa.types.is_float64(arrow):
            out.append(f"{pad}if type({var}) is bool: raise ValueError")
            return True
        if pa.types.is_timestamp(arrow) or pa.types.is_date(arrow):
            parse = "_timestamp" if pa.types.is_timestamp(arrow) else "_date"
            out.append(f"{pad}if type({var}) is not str: raise ValueError")
            out.append(f"{pad}{store % f'{parse}({var})'}")
            return True
        if pa.types.is_struct(arrow):
            mark = len(out)
            out.append(f"{pad}if type({var}) is not dict: raise ValueError")
            needed = False
            for f in arrow:
                child = self.var()
                out.append(f"{pad}{child} = {var}.get({f.name!r})")
                inner = len(out)
                out.append(f"{pad}if {child} is not None:")
                if self.emit(f.type, child, f"{var}[{f.name!r}] = %s", pad + "    "):
                    needed = True
                else:
                    del out[inner:]
                if not f.nullable:
                    out.append(f"{pad}if {child} is None: raise ValueError")
                    needed = True
                if len(out) == inner:
                    del out[inner - 1:]
            if not needed:
                del out[mark:]
            return needed
        if pa.types.is_list(arrow) or pa.types.is_map(arrow):
            field_ = arrow.value_field if pa.types.is_list(arrow) else arrow.item_field
            key, child = self.var(), self.var()
            mark = len(out)
            kind, each = ("list", f"enumerate({var})") if pa.types.is_list(arrow) else (
                "dict", f"list({var}.items())")
            out.append(f"{pad}if type({var}) is not {kind}: raise ValueError")
            out.append(f"{pad}for {key}, {child} in {each}:")
            inner = len(out)
            if not field_.nullable:
                out.append(f"{pad}    if {child} is None: raise ValueError")
            out.append(f"{pad}    if {child} is not None:")
            if not self.emit(field_.type, child, f"{var}[{key}] = %s", pad + "        "):
                out.pop()
            if len(out) == inner:
                del out[mark:]
                return False
            return True
        return False  # string, boolean: pa.array refuses a misfit itself


def _integral(v: Any) -> int:
    if type(v) is float and v.is_integer() and _INT64[0] <= v < _INT64[1]:
        return int(v)
    raise ValueError


def _quick(arrow: pa.DataType) -> Convert | None:
    """The compiled quick checks for a column of ``arrow`` (None: nothing to check)."""
    code = _Quick()
    if not code.emit(arrow, "v0", "v0 = %s", "    "):
        return None
    source = "def quick(v0):\n" + "\n".join(code.lines) + "\n    return v0\n"
    scope: dict[str, Any] = {"_integral": _integral, "_timestamp": _parse_timestamp,
                             "_date": datetime.date.fromisoformat}
    exec(compile(source, "<json reader checks>", "exec"), scope)  # noqa: S102
    return scope["quick"]  # type: ignore[no-any-return]


def _item(v: Any, conv: Convert | None, nullable: bool, path: str) -> Any:
    if v is None:
        if not nullable:
            raise ValueError(f"{path} holds a null, which the reader schema does not allow")
        return None
    return v if conv is None else conv(v)


@dataclass
class JsonDecoder:
    """Decodes a binary column of JSON records (see :class:`.schemas.PayloadDecoder`)."""

    reader: RegisteredSchema
    lookup: SchemaLookup
    mode: str
    arrow_type: pa.DataType
    validate: bool = False
    _validators: dict[int, Checker | str] = field(default_factory=dict)
    _convert: Convert = field(init=False)
    _quick: Convert | None = field(init=False)

    def __post_init__(self) -> None:
        self._convert, self._quick = _converter(self.arrow_type), _quick(self.arrow_type)

    def _validator_for(self, schema_id: int) -> Checker | str:
        """The writer schema's checker, or why it cannot be had (kept: asked once per id)."""
        if schema_id not in self._validators:
            self._validators[schema_id] = writer_or_reason(
                self.lookup, schema_id, lambda schema: Checker(Resolver(schema, self.lookup)))
        return self._validators[schema_id]

    def decode(self, payloads: pa.Array, where: Callable[[int], str]) -> Decoded:
        with gc_paused():
            return self._decode(payloads, where)

    def _decode(self, payloads: pa.Array, where: Callable[[int], str]) -> Decoded:
        framed = framing.split(payloads)
        n = len(framed)
        errors: list[str | None] = [None] * n
        rows: list[Any] = [None] * n
        data = framed.data.tobytes()
        starts, ends = framed.body_start.tolist(), framed.end.tolist()
        ids = framed.schema_ids.tolist()
        loads = json.loads
        objects = pa.types.is_struct(self.arrow_type)
        for i, state in enumerate(framed.state.tolist()):
            if state != framing.OK:
                if state != framing.NULL:
                    errors[i] = f"the payload {framing.WHY[state]}"
                continue
            try:
                row = loads(data[starts[i]:ends[i]])
            except ValueError as exc:
                errors[i] = f"the bytes are not JSON text: {exc}"
                continue
            if objects and not isinstance(row, dict):
                errors[i] = f"the JSON is a {type(row).__name__}, not an object"
                continue
            if self.validate:
                validator = self._validator_for(ids[i])
                if isinstance(validator, str):
                    errors[i] = validator
                    continue
                why = validator.first_error(row)
                if why is not None:
                    errors[i] = f"it does not fit its writer schema {why}"
                    continue
            rows[i] = row
        self._fail_fast(errors, framed, where)
        values = self._column(rows, errors)
        self._fail_fast(errors, framed, where)
        any_error = any(e is not None for e in errors)
        return Decoded(values, framed.id_array(),
                       pa.array(errors, pa.string()) if any_error else None)

    def _column(self, rows: list[Any], errors: list[str | None]) -> pa.Array:
        """One conversion for the whole column (the quick checks, then one ``pa.array``);
        if it fails, row by row to find the rows that do not fit (they become errors,
        worded by the full checks)."""
        parsed = list(rows)  # the quick checks change rows in place; keep them for words
        quick = self._quick
        if quick is not None:
            for i, row in enumerate(rows):
                if row is not None:
                    try:
                        rows[i] = quick(row)
                    except (ValueError, TypeError, AttributeError):
                        errors[i], rows[i] = self._why(parsed[i], None), None
        try:
            return pa.array(rows, self.arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
            pass
        for i, row in enumerate(rows):
            if row is None:
                continue
            try:
                pa.array([row], self.arrow_type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
                errors[i], rows[i] = self._why(parsed[i], exc), None
        return pa.array(rows, self.arrow_type)

    def _why(self, row: Any, arrow_error: Exception | None) -> str:
        """Why a row does not fit the reader schema, in the full checks' words."""
        try:
            self._convert(row)
        except (ValueError, TypeError, AttributeError) as exc:
            return f"it does not fit the reader schema: {exc}"
        return f"it does not fit the reader schema: {arrow_error}"

    def _fail_fast(self, errors: list[str | None], framed: framing.Framed,
                   where: Callable[[int], str]) -> None:
        if self.mode == FAILFAST:
            framing.fail_fast("JSON", errors, framed, where)


def decoder(reader: RegisteredSchema, lookup: SchemaLookup, *, mode: str,
            validate: bool = False) -> JsonDecoder:
    """A decoder to the reader schema's type; ``validate`` checks each row against its
    writer schema first (Confluent's deserializer does; it costs about as much as parsing)."""
    if mode not in (FAILFAST, PERMISSIVE):
        raise ConfigError(f"mode {mode!r} is not FAILFAST or PERMISSIVE")
    return JsonDecoder(reader, lookup, mode, arrow_type(reader, lookup), validate)


def _json_ready(arr: pa.Array) -> pa.Array:
    """Timestamps as RFC 3339 text (UTC, ``Z``), dates as ``YYYY-MM-DD``, durations and
    decimals left to fail in json.dumps (the schema has no type for them)."""
    typ = arr.type
    if pa.types.is_timestamp(typ):
        utc = arr.cast(pa.timestamp("us", "UTC")) if typ.tz else arr.cast(
            pa.timestamp("us")).cast(pa.timestamp("us", "UTC"))
        return pc.strftime(utc, format="%Y-%m-%dT%H:%M:%SZ")
    if pa.types.is_date(typ):
        return arr.cast(pa.string())
    if pa.types.is_struct(typ):
        children = [_json_ready(arr.field(i)) for i in range(typ.num_fields)]
        fields = [typ.field(i).with_type(c.type) for i, c in enumerate(children)]
        return pa.StructArray.from_arrays(children, fields=fields, mask=arr.is_null())
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        values = _json_ready(arr.values)
        if values.type == typ.value_type:
            return arr
        return pa.ListArray.from_arrays(arr.offsets, values, mask=arr.is_null())
    if pa.types.is_map(typ):
        items = _json_ready(arr.items)
        if items.type == typ.item_type:
            return arr
        return pa.MapArray.from_arrays(arr.offsets, arr.keys, items, mask=arr.is_null())
    return arr


def _prepare(arrow: pa.DataType, keep: Required, place: str = "") -> Convert | None:
    """How a ``to_pylist`` value of ``arrow`` becomes what json.dumps writes: null
    properties left out (JSON Schema's "absent") except those their own object requires
    (``keep`` by place: written as null, for the check to judge), maps (pairs) as objects.
    None where the value is written as is. Compiled once per column type: no isinstance
    per value."""
    if pa.types.is_struct(arrow):
        names = keep.get(place, frozenset())
        nested = [(f.name, c) for f in arrow
                  if (c := _prepare(f.type, keep, f"{place}.{f.name}" if place else f.name))
                  is not None]
        if not nested:
            return lambda row: {k: v for k, v in row.items() if v is not None or k in names}

        def struct(row: dict[str, Any]) -> dict[str, Any]:
            for name, conv in nested:
                if row[name] is not None:
                    row[name] = conv(row[name])
            return {k: v for k, v in row.items() if v is not None or k in names}
        return struct
    if pa.types.is_map(arrow):
        item = _prepare(arrow.item_type, keep, f"{place}{{}}")
        if item is None:
            return dict
        return lambda pairs: {k: None if v is None else item(v) for k, v in pairs}
    if pa.types.is_list(arrow) or pa.types.is_large_list(arrow):
        element = _prepare(arrow.value_type, keep, f"{place}[]")
        if element is None:
            return None
        return lambda items: [None if v is None else element(v) for v in items]
    return None


@dataclass
class JsonEncoder:
    """Encodes a column to JSON records (see :class:`.schemas.PayloadEncoder`)."""

    schema: RegisteredSchema
    resolver: Resolver
    validate: bool = True
    _validator: Any = None

    def encode(self, values: pa.Array, column: str) -> pa.Array:
        with gc_paused():
            return self._encode(values, column)

    def _encode(self, values: pa.Array, column: str) -> pa.Array:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        ready = _json_ready(values)
        rows = ready.to_pylist()  # maps as pairs: maps_as_pydicts is 7x slower
        prepare = _prepare(ready.type, required_by_place(self.resolver))
        header = framing.header(self.schema.id)
        dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False,
                                 allow_nan=False).encode
        if self.validate and self._validator is None:
            self._validator = Checker(self.resolver)
        out: list[bytes | None] = []
        for i, row in enumerate(rows):
            if row is None:
                out.append(None)
                continue
            if prepare is not None:
                row = prepare(row)
            if self.validate:
                why = self._validator.first_error(row)
                if why is not None:
                    raise PayloadEncodeError(
                        f"column {column!r} row {i} does not fit JSON schema id "
                        f"{self.schema.id} {why}; fix the column or write with a schema that "
                        "fits it")
            try:
                out.append(header + dumps(row).encode())
            except (TypeError, ValueError) as exc:
                raise PayloadEncodeError(f"column {column!r} row {i} has no JSON form: "
                                         f"{exc}") from None
        return pa.array(out, pa.binary())


def encoder(schema: RegisteredSchema, lookup: SchemaLookup, *,
            validate: bool = True) -> JsonEncoder:
    """An encoder writing compact JSON (as Confluent's serializer does), each row checked
    against ``schema`` unless ``validate`` is False."""
    resolver = Resolver(schema, lookup)
    to_arrow(resolver)  # a schema with no Arrow type fails here, before any row
    return JsonEncoder(schema, resolver, validate)
