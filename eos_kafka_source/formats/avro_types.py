"""Avro schemas as Arrow types, the way spark-avro's ``SchemaConverters`` maps them.

:func:`load` reads a registered schema (and the schemas it references) into a tree of
:class:`Node`; :attr:`Node.arrow` is the Arrow type ``from_avro`` would give the column.

The codec hands fastavro schemas with their logical types removed (:func:`strip_logical`):
Avro reads a logical type with the *reader's* annotation, fastavro with the writer's, and
raw ints and bytes convert to Arrow column-wise (avro_arrow.py) far faster than datetimes
and Decimals would, one Python object each. The other way, Arrow to Avro, is
avro_derive.py.
"""

from __future__ import annotations

import copy
import functools
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..errors import ConfigError
from .schemas import RegisteredSchema, SchemaLookup

PRIMITIVES = {
    "null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "bytes": pa.binary(), "string": pa.string(),
}
NAMED = ("record", "error", "enum", "fixed")
UTC = "UTC"

#: logicalType -> (the Avro types it may annotate, kind); others are ignored as Java does.
LOGICAL = {
    "date": (("int",), "date"),
    "timestamp-millis": (("long",), "timestamp-millis"),
    "timestamp-micros": (("long",), "timestamp-micros"),
    "local-timestamp-millis": (("long",), "local-timestamp-millis"),
    "local-timestamp-micros": (("long",), "local-timestamp-micros"),
    "decimal": (("bytes", "fixed"), "decimal"),
    "time-micros": (("long",), "time-micros"),
}


@functools.cache
def spark_reads_time() -> bool:
    """Whether spark-avro maps ``time-micros`` to Spark's TIME(6) (Spark 4.2 on; before,
    it is a plain long). Told by the pyspark installed (the newest mapping without one)."""
    try:
        from pyspark.version import __version__
    except ImportError:
        return True
    major, minor = (int(part) for part in __version__.split(".")[:2])
    return (major, minor) >= (4, 2)


@dataclass(eq=False)
class Node:
    """One Avro type resolved to what Spark makes of it.

    ``kind`` is the Avro type ("int", "record", ...), a logical kind ("date",
    "timestamp-millis", "decimal", ...) or "union" for a union Spark turns into
    ``struct<member0, ...>``. ``children`` are a record's fields, a union's members, an
    array's element or a map's value, each with the name Arrow gives it.
    """

    kind: str
    arrow: pa.DataType
    nullable: bool = False
    name: str | None = None  # full name of a named type
    children: list[tuple[str, Node]] = field(default_factory=list)
    #: a union whose branches include a named type (fastavro can tag its values).
    has_named: bool = False
    #: a general union's members, each by the Avro type names that select it.
    branches: list[tuple[str, ...]] = field(default_factory=list)
    precision: int = 0
    scale: int = 0
    size: int | None = None  # fixed size, for a decimal stored as fixed
    default: Any = None
    has_default: bool = False
    #: set on the node a union stands for: its branch count and where "null" is (-1: none).
    union_size: int = 0
    null_index: int = -1
    symbols: list[str] = field(default_factory=list)  # an enum's

    def walk(self) -> Iterator[Node]:
        yield self
        for _, child in self.children:
            yield from child.walk()


@dataclass
class Loaded:
    """A schema ready for fastavro and for the type mapping: the referenced schemas'
    JSON first (in dependency order), then the schema itself."""

    schema: RegisteredSchema
    documents: list[Any]
    root: Node

    @property
    def json(self) -> Any:
        return self.documents[-1]


def _documents(schema: RegisteredSchema, lookup: SchemaLookup, seen: set[tuple[str, int]]
               ) -> list[Any]:
    docs: list[Any] = []
    for ref in schema.references:
        key = (ref.subject, ref.version)
        if key in seen:
            continue
        seen.add(key)
        docs += _documents(lookup.version(ref.subject, ref.version), lookup, seen)
    try:
        docs.append(json.loads(schema.text))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"schema {schema.id} is not valid Avro JSON ({exc}); register a "
                          "valid Avro schema or pass one with the schema option") from exc
    return docs


def documents(schema: RegisteredSchema, lookup: SchemaLookup) -> list[Any]:
    """A schema's JSON and its references', referenced first, without Spark's type: a
    writer schema is only parsed, so one Spark could not hold (recursive, say) still reads
    as a reader schema that can."""
    docs = _documents(schema, lookup, set())
    check_names(docs, schema)
    return docs


def load(schema: RegisteredSchema, lookup: SchemaLookup) -> Loaded:
    """Read a registered Avro schema and its references (Confluent's named-type imports)."""
    docs = _documents(schema, lookup, set())
    check_names(docs, schema)
    names: dict[str, tuple[Any, str]] = {}
    for doc in docs:
        _register(doc, "", names)
    root = _Converter(names, schema).node(docs[-1], "")
    return Loaded(schema, docs, root)


def _full_name(name: str, namespace: str | None, enclosing: str) -> str:
    if "." in name:
        return name
    space = enclosing if namespace is None else namespace
    return f"{space}.{name}" if space else name


def check_names(docs: list[Any], schema: RegisteredSchema) -> None:
    """Refuse a name the Avro specification allows once and the schema has twice: two
    fields of one record, two symbols of one enum, two definitions of one named type.
    Spark's Avro parser refuses such a schema; read on, the fields would be a struct with
    two columns of one name, and fastavro refuses the rest only when a record arrives."""
    defined: set[str] = set()
    for doc in docs:
        _check_names(doc, "", defined, schema.id)


def _check_names(schema: Any, enclosing: str, defined: set[str], schema_id: int) -> None:
    if isinstance(schema, list):
        for branch in schema:
            _check_names(branch, enclosing, defined, schema_id)
        return
    if not isinstance(schema, dict):
        return
    kind = schema.get("type")
    if isinstance(kind, (dict, list)):
        _check_names(kind, enclosing, defined, schema_id)
        return
    space, full = enclosing, ""
    if kind in NAMED and isinstance(schema.get("name"), str):
        full = _full_name(schema["name"], schema.get("namespace"), enclosing)
        space = full.rpartition(".")[0]
        if full in defined:
            raise ConfigError(
                f"schema {schema_id} defines the type {full} twice, which Avro does not "
                "allow; define it once and refer to it by name everywhere else")
        defined.add(full)
    if kind in ("record", "error"):
        seen: set[Any] = set()
        for fld in schema.get("fields", []):
            if fld.get("name") in seen:
                raise ConfigError(
                    f"schema {schema_id}: record {full} has two fields named "
                    f"{fld['name']!r}, which Avro does not allow (field names are unique "
                    "within a record); rename or remove one of them in the schema")
            seen.add(fld.get("name"))
            _check_names(fld.get("type"), space, defined, schema_id)
    elif kind == "enum":
        symbols = list(schema.get("symbols", []))
        twice = next((s for i, s in enumerate(symbols) if s in symbols[:i]), None)
        if twice is not None:
            raise ConfigError(
                f"schema {schema_id}: enum {full} has the symbol {twice!r} twice, which "
                "Avro does not allow; remove one of them in the schema")
    elif kind == "array":
        _check_names(schema.get("items"), space, defined, schema_id)
    elif kind == "map":
        _check_names(schema.get("values"), space, defined, schema_id)


def _register(schema: Any, enclosing: str, names: dict[str, tuple[Any, str]]) -> None:
    """Record every named type's definition under its full name."""
    if isinstance(schema, list):
        for branch in schema:
            _register(branch, enclosing, names)
        return
    if not isinstance(schema, dict):
        return
    kind = schema.get("type")
    if isinstance(kind, (dict, list)):
        _register(kind, enclosing, names)
        return
    space = enclosing
    if kind in NAMED:
        full = _full_name(schema["name"], schema.get("namespace"), enclosing)
        space = full.rpartition(".")[0]
        names[full] = (schema, space)
    if kind in ("record", "error"):
        for fld in schema.get("fields", []):
            _register(fld.get("type"), space, names)
    elif kind == "array":
        _register(schema.get("items"), space, names)
    elif kind == "map":
        _register(schema.get("values"), space, names)


def _avro_type(schema: Any, space: str, names: dict[str, tuple[Any, str]]) -> str:
    """The Avro type name of a schema (a named reference resolved), for union rules."""
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        kind = schema.get("type")
        return _avro_type(kind, space, names) if isinstance(kind, (dict, list)) else str(kind)
    if schema in PRIMITIVES:
        return str(schema)
    found = _lookup_name(schema, space, names)
    return str(found[0]["type"]) if found else str(schema)


def _lookup_name(name: str, space: str, names: dict[str, tuple[Any, str]]
                 ) -> tuple[Any, str] | None:
    return names.get(_full_name(name, None, space)) or names.get(name)


def _branch_names(schema: Any, space: str, names: dict[str, tuple[Any, str]]) -> tuple[str, ...]:
    """How fastavro names a union branch (its type name, or a named type's full name)."""
    if isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
        return _branch_names(schema["type"], space, names)
    if isinstance(schema, dict) and schema.get("type") in NAMED:
        return (_full_name(schema["name"], schema.get("namespace"), space),)
    if isinstance(schema, str) and schema not in PRIMITIVES:
        found = _lookup_name(schema, space, names)
        full = _full_name(schema, None, space) if found is None else (
            _full_name(found[0]["name"], found[0].get("namespace"), found[1]))
        return (full,)
    return (_avro_type(schema, space, names),)


class _Converter:
    """spark-avro's ``SchemaConverters.toSqlType``, over schema JSON."""

    def __init__(self, names: dict[str, tuple[Any, str]], schema: RegisteredSchema) -> None:
        self.names = names
        self.schema = schema
        self.stack: list[str] = []

    def node(self, schema: Any, space: str) -> Node:
        if isinstance(schema, list):
            return self.union(schema, space)
        if isinstance(schema, str):
            if schema in PRIMITIVES:
                return Node(schema, PRIMITIVES[schema], nullable=schema == "null")
            found = _lookup_name(schema, space, self.names)
            if found is None:
                raise ConfigError(
                    f"schema {self.schema.id} names the type {schema!r}, which it does not "
                    "define; register it with a reference to the schema that defines it")
            return self.node(*found)
        if not isinstance(schema, dict):
            raise ConfigError(f"schema {self.schema.id} has a type Avro does not know: "
                              f"{schema!r}")
        kind = schema.get("type")
        if isinstance(kind, (dict, list)):
            return self.node(kind, space)
        logical = LOGICAL.get(schema.get("logicalType", ""))
        if logical and kind in logical[0]:
            made = self.logical(schema, logical[1])
            if made is not None:
                return made
        if kind in PRIMITIVES:
            return Node(kind, PRIMITIVES[kind], nullable=kind == "null")
        if kind in NAMED:
            full = _full_name(schema["name"], schema.get("namespace"), space)
            inner = full.rpartition(".")[0]
            if kind == "enum":
                return Node("enum", pa.string(), name=full, symbols=list(schema["symbols"]))
            if kind == "fixed":
                return Node("fixed", pa.binary(), name=full, size=int(schema["size"]))
            return self.record(schema, full, inner)
        if kind == "array":
            item = self.node(schema["items"], space)
            return Node("array", pa.list_(pa.field("element", item.arrow, item.nullable)),
                        children=[("element", item)])
        if kind == "map":
            value = self.node(schema["values"], space)
            return Node("map", pa.map_(pa.string(),
                                       pa.field("value", value.arrow, value.nullable)),
                        children=[("value", value)])
        raise ConfigError(f"schema {self.schema.id} has a type Avro does not know: {kind!r}")

    def logical(self, schema: dict[str, Any], kind: str) -> Node | None:
        if kind == "date":
            return Node(kind, pa.date32())
        if kind == "time-micros":
            # Spark's TIME is time64[ns] in Arrow (pyspark's to_arrow_type).
            return Node(kind, pa.time64("ns")) if spark_reads_time() else None
        if kind.startswith("timestamp"):
            return Node(kind, pa.timestamp("us", UTC))
        if kind.startswith("local-timestamp"):
            return Node(kind, pa.timestamp("us"))
        precision, scale = int(schema.get("precision", 0)), int(schema.get("scale", 0))
        size = int(schema["size"]) if schema["type"] == "fixed" else None
        if size is not None and precision > math.floor(math.log10(2) * (8 * size - 1)):
            return None  # Avro drops a decimal that does not fit its fixed size
        if not 0 < precision <= 38 or not 0 <= scale <= precision:
            raise ConfigError(
                f"schema {self.schema.id} has decimal({precision}, {scale}), which Spark "
                "cannot hold (precision 1 to 38, scale 0 to precision); change the schema")
        return Node("decimal", pa.decimal128(precision, scale), precision=precision,
                    scale=scale, size=size)

    def record(self, schema: dict[str, Any], full: str, space: str) -> Node:
        if full in self.stack:
            raise ConfigError(
                f"schema {self.schema.id} is recursive (record {full} contains itself), which "
                "a Spark column cannot hold; read it with a schema without the recursion "
                "(the schema option)")
        self.stack.append(full)
        try:
            children: list[tuple[str, Node]] = []
            for fld in schema.get("fields", []):
                child = self.node(fld["type"], space)
                if "default" in fld:
                    child = copy.copy(child)
                    child.default, child.has_default = fld["default"], True
                children.append((fld["name"], child))
        finally:
            self.stack.pop()
        arrow = pa.struct([pa.field(n, c.arrow, c.nullable) for n, c in children])
        return Node("record", arrow, name=full, children=children)

    def union(self, branches: list[Any], space: str) -> Node:
        types = [_avro_type(b, space, self.names) for b in branches]
        has_named = any(t in NAMED for t in types)
        rest = [b for b, t in zip(branches, types, strict=True) if t != "null"]
        nullable = len(rest) < len(branches)
        rest_types = {t for t in types if t != "null"}
        if len(rest) == 1:
            made = copy.copy(self.node(rest[0], space))
        elif rest_types in ({"int", "long"}, {"float", "double"}):
            kind = "long" if "long" in rest_types else "double"
            made = Node(kind, PRIMITIVES[kind])
        elif not rest:
            made = Node("null", pa.null())
        else:
            members = [(f"member{i}", self.node(b, space)) for i, b in enumerate(rest)]
            for _, member in members:
                member.nullable = True  # one member is set at a time
            arrow = pa.struct([pa.field(n, m.arrow, True) for n, m in members])
            made = Node("union", arrow, children=members,
                        branches=[_branch_names(b, space, self.names) for b in rest])
        made.nullable = made.nullable or nullable
        made.has_named = made.has_named or has_named
        made.union_size = len(branches)
        made.null_index = types.index("null") if nullable else -1
        return made


def strip_logical(schema: Any) -> Any:
    """A copy of schema JSON without ``logicalType`` (see the module docstring)."""
    if isinstance(schema, list):
        return [strip_logical(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strip_logical(v) for k, v in schema.items() if k != "logicalType"}
    if "fields" in schema:
        out["fields"] = [{**f, "type": strip_logical(f["type"])} for f in schema["fields"]]
    return out
