"""JSON Schema to Arrow types and back, and ``$ref`` resolution (in the document and through
the registry's references).

Only what a column can hold maps: an object with properties is a struct (in property order),
``additionalProperties`` alone a map, and the scalar types their Arrow types. Anything else
(``oneOf`` of two shapes, a type list of two non-null types, a free object) has no single
Arrow type: it fails naming its JSON pointer, with the advice to read the value as a string.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from ..errors import ConfigError
from .schemas import RegisteredSchema, SchemaLookup

_SCALARS = {"string": pa.string(), "integer": pa.int64(), "number": pa.float64(),
            "boolean": pa.bool_()}
_FORMATS = {"date-time": pa.timestamp("us", tz="UTC"), "date": pa.date32()}
_DRAFT7 = "http://json-schema.org/draft-07/schema#"


def _loads(schema: RegisteredSchema) -> Any:
    try:
        return json.loads(schema.text)
    except ValueError as exc:
        raise ConfigError(f"JSON schema id {schema.id} is not JSON: {exc}") from None


class Resolver:
    """A schema document and the documents its references name, for ``$ref`` lookups."""

    def __init__(self, schema: RegisteredSchema, lookup: SchemaLookup) -> None:
        self.schema = schema
        self.document = _loads(schema)
        self.documents: dict[str, Any] = {}
        pending = list(schema.references)
        while pending:
            ref = pending.pop()
            if ref.name in self.documents:
                continue
            referenced = lookup.version(ref.subject, ref.version)
            self.documents[ref.name] = _loads(referenced)
            pending.extend(referenced.references)

    def resolve(self, ref: str, document: Any, pointer: str) -> tuple[Any, Any, str]:
        """The node ``ref`` names, the document it is in, and its pointer."""
        name, _, fragment = ref.partition("#")
        if name:
            if name not in self.documents:
                by_id = [d for d in self.documents.values()
                         if isinstance(d, dict) and d.get("$id") == name]
                if not by_id:
                    raise ConfigError(
                        f"JSON schema id {self.schema.id} at {pointer}: $ref {ref!r} names "
                        "no reference of the schema; register it with a reference of that "
                        "name")
                document = by_id[0]
            else:
                document = self.documents[name]
        node = document
        for part in [p for p in fragment.split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            try:
                node = node[int(part)] if isinstance(node, list) else node[part]
            except (KeyError, IndexError, ValueError, TypeError):
                raise ConfigError(f"JSON schema id {self.schema.id} at {pointer}: $ref {ref!r} "
                                  "points at nothing") from None
        return node, document, f"{name}#{fragment}"

    def registry(self) -> Any:
        """A ``referencing`` registry holding the referenced documents by name (for
        jsonschema's validator)."""
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT7

        resources = [(name, Resource.from_contents(doc, default_specification=DRAFT7))
                     for name, doc in self.documents.items()]
        return Registry().with_resources(resources)


def to_arrow(resolver: Resolver) -> pa.DataType:
    """The Arrow type of the schema's root. Raises ConfigError naming the JSON pointer of
    the first part that has none."""
    arrow, _ = _type(resolver, resolver.document, resolver.document, "#", ())
    return arrow


#: Each object's required property names by its place in the column: ``""`` the root,
#: ``a.b`` a nested object, ``a[]`` an array's items, ``a{}`` a map's values.
Required = dict[str, frozenset[str]]


def required_by_place(resolver: Resolver) -> Required:
    """Which properties each object of the column requires (a writer keeps their nulls)."""
    found: Required = {}
    _type(resolver, resolver.document, resolver.document, "#", (), "", found)
    return found


def _unmappable(resolver: Resolver, pointer: str, why: str) -> ConfigError:
    return ConfigError(f"JSON schema id {resolver.schema.id} at {pointer}: {why}, which has no "
                       "single Arrow type; change the schema, or read the value as a string "
                       "(valueFormat binary, then from_json with a schema you choose)")


def _type(resolver: Resolver, node: Any, document: Any, pointer: str,
          seen: tuple[str, ...], place: str = "", required: Required | None = None
          ) -> tuple[pa.DataType, bool]:
    """(Arrow type, whether null is allowed) of one schema node; ``required`` collects
    each object's required names by ``place`` (see :data:`Required`)."""
    if node is True or node == {}:
        raise _unmappable(resolver, pointer, "any value is allowed")
    if not isinstance(node, dict):
        raise _unmappable(resolver, pointer, f"the schema is {node!r}")
    if "$ref" in node:
        target, doc, where = resolver.resolve(node["$ref"], document, pointer)
        if where in seen:
            raise _unmappable(resolver, pointer, f"$ref {node['$ref']!r} is recursive")
        return _type(resolver, target, doc, where, seen + (where,), place, required)
    for key in ("anyOf", "oneOf"):
        if key in node:
            options = node[key]
            real = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
            if len(real) != 1:
                raise _unmappable(resolver, f"{pointer}/{key}",
                                  f"{key} allows {len(real)} shapes")
            arrow, nullable = _type(resolver, real[0], document, f"{pointer}/{key}/0", seen,
                                    place, required)
            return arrow, nullable or len(real) < len(options)
    if "allOf" in node and len(node["allOf"]) == 1:
        return _type(resolver, node["allOf"][0], document, f"{pointer}/allOf/0", seen, place,
                     required)
    if "allOf" in node:
        raise _unmappable(resolver, f"{pointer}/allOf", "allOf combines several schemas")
    declared = node.get("type")
    types = declared if isinstance(declared, list) else [declared] if declared else []
    nullable = "null" in types
    real_types = [t for t in types if t != "null"]
    if not real_types:
        if "properties" in node or "additionalProperties" in node:
            real_types = ["object"]
        elif "items" in node:
            real_types = ["array"]
        elif "enum" in node and all(isinstance(v, str) for v in node["enum"] if v is not None):
            real_types, nullable = ["string"], nullable or None in node["enum"]
        elif "const" in node and isinstance(node["const"], str):
            real_types = ["string"]
    if len(real_types) != 1:
        raise _unmappable(resolver, pointer, f"type is {declared!r}" if declared else
                          "no type is given")
    kind = real_types[0]
    if kind in _SCALARS:
        if kind == "string" and node.get("format") in _FORMATS:
            return _FORMATS[node["format"]], nullable
        return _SCALARS[kind], nullable
    if kind == "array":
        items = node.get("items")
        if not isinstance(items, dict):
            raise _unmappable(resolver, f"{pointer}/items", "the array's items have no single "
                              "schema")
        element, _ = _type(resolver, items, document, f"{pointer}/items", seen,
                           f"{place}[]", required)
        return pa.list_(element), nullable
    if kind == "object":
        properties = node.get("properties")
        if properties:
            names = set(node.get("required", ()))
            if required is not None:
                required[place] = frozenset(names & set(properties))
            fields = []
            for name, sub in properties.items():
                arrow, sub_nullable = _type(resolver, sub, document,
                                            f"{pointer}/properties/{name}", seen,
                                            f"{place}.{name}" if place else name, required)
                fields.append(pa.field(name, arrow, nullable=sub_nullable or
                                       name not in names))
            return pa.struct(fields), nullable
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            value, _ = _type(resolver, extra, document, f"{pointer}/additionalProperties", seen,
                             f"{place}{{}}", required)
            return pa.map_(pa.string(), value), nullable
        raise _unmappable(resolver, pointer, "an object without properties or typed "
                          "additionalProperties")
    raise _unmappable(resolver, pointer, f"type {kind!r}")


# --- Arrow -> JSON Schema (auto.register.schemas) ----------------------------------------

def _schema_of(arrow: pa.DataType, where: str) -> dict[str, Any]:
    if pa.types.is_boolean(arrow):
        return {"type": "boolean"}
    if pa.types.is_integer(arrow):
        return {"type": "integer"}
    if pa.types.is_floating(arrow):
        return {"type": "number"}
    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow):
        return {"type": "string"}
    if pa.types.is_timestamp(arrow):
        return {"type": "string", "format": "date-time"}
    if pa.types.is_date(arrow):
        return {"type": "string", "format": "date"}
    if pa.types.is_list(arrow) or pa.types.is_large_list(arrow):
        return {"type": "array", "items": _schema_of(arrow.value_type, f"{where}[]")}
    if pa.types.is_map(arrow):
        if not (pa.types.is_string(arrow.key_type) or pa.types.is_large_string(arrow.key_type)):
            raise ConfigError(f"column field {where} is a map keyed by {arrow.key_type}; JSON "
                              "object keys are strings, so cast the keys to string")
        return {"type": "object",
                "additionalProperties": _schema_of(arrow.item_type, f"{where}{{}}")}
    if pa.types.is_struct(arrow):
        properties = {}
        required = []
        for f in arrow:
            sub = _schema_of(f.type, f"{where}.{f.name}" if where else f.name)
            if f.nullable:
                sub = {"oneOf": [{"type": "null"}, sub]}
            else:
                required.append(f.name)
            properties[f.name] = sub
        out: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            out["required"] = required
        return out
    raise ConfigError(f"column field {where or 'value'} of type {arrow} has no JSON Schema "
                      "type; cast it (a decimal or binary to a string, say) before writing")


def schema_for(arrow_type: pa.DataType, *, name: str, namespace: str) -> str:
    """A draft-07 JSON Schema for a column's type: a struct is an object of its fields
    (nullable ones may be null, the others required), ``title`` the record's name."""
    body = _schema_of(arrow_type, "")
    title = f"{namespace}.{name}" if namespace else name
    return json.dumps({"$schema": _DRAFT7, "title": title, **body}, separators=(",", ":"))
