"""Names for what an Avro schema uses that a known difference may be about
(known_differences/spark_avro.txt)."""

from __future__ import annotations

from typing import Any

from tests.formats.explorer.avro_gen import NAMED, PRIMITIVES, _base, _full, _space_of


def features(schema: Any, named: dict[str, Any] | None = None, space: str = "",
             seen: frozenset[str] = frozenset()) -> set[str]:
    """Names for what a schema uses that a known difference may be about."""
    named = named if named is not None else _definitions(schema)
    found: set[str] = set()
    if isinstance(schema, list):
        bases = {_base(b, named) for b in schema if b != "null"}
        if {"int", "long"} <= bases and len(bases) > 2:
            found.add("union-int-long")
        if {"float", "double"} <= bases and len(bases) > 2:
            found.add("union-float-double")
        if bases in ({"int", "long"}, {"float", "double"}) and any(
                isinstance(b, dict) and "logicalType" in b for b in schema):
            found.add("union-merged-logical")
        for b in schema:
            found |= features(b, named, space, seen)
        return found
    if isinstance(schema, str):
        if schema in PRIMITIVES:
            return found
        full = schema if "." in schema else (f"{space}.{schema}" if space else schema)
        if full in seen or schema in seen:
            return {"recursive"}
        target = named.get(full) or named.get(schema)
        if target is None:
            return found
        return features(target, named, _space_of(schema, space), seen)
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if logical in ("timestamp-nanos", "local-timestamp-nanos") and kind == "long":
        found.add("timestamp-nanos")
    if logical == "decimal" and kind == "fixed" and schema.get("size", 0) > 16:
        found.add("fixed-decimal-wide")
    if kind == "record":
        full = _full(schema, space)
        inner = full.rpartition(".")[0]
        for f in schema["fields"]:
            found |= features(f["type"], named, inner, seen | {full})
    elif kind == "array":
        found |= features(schema["items"], named, space, seen)
    elif kind == "map":
        found |= features(schema["values"], named, space, seen)
    return found


def _definitions(schema: Any, space: str = "", out: dict[str, Any] | None = None
                 ) -> dict[str, Any]:
    out = {} if out is None else out
    if isinstance(schema, list):
        for b in schema:
            _definitions(b, space, out)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in NAMED:
            full = _full(schema, space)
            out[full] = schema
            space = full.rpartition(".")[0]
        if kind == "record":
            for f in schema["fields"]:
                _definitions(f["type"], space, out)
        elif kind == "array":
            _definitions(schema["items"], space, out)
        elif kind == "map":
            _definitions(schema["values"], space, out)
    return out
