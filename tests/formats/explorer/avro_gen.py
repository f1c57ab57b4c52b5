"""Random Avro schemas and values, from a seed.

A schema is a top-level record whose fields draw from every type of the Avro spec:
primitives, every logical type (misplaced ones too), enums and fixed with names,
namespaces, aliases and defaults, arrays and maps of anything, records nested anywhere,
unions of any branch set in any order, named types referred to again by name, and now and
then a recursive record. Values are "raw" (what fastavro writes with the logical types
stripped: a date is its day number, a decimal its two's-complement bytes) and unions are
``(branch, value)`` tuples, so the bytes are exactly the ones chosen.
"""

from __future__ import annotations

import math
import random
from typing import Any

from tests.formats.explorer.avro_evolve import evolve
from tests.formats.explorer.values import (
    INT32,
    INT64,
    pick_bytes,
    pick_float,
    pick_int,
    pick_string,
)

PRIMITIVES = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
NAMED = ("record", "enum", "fixed")
#: Days of 0001-01-01, 1582-10-04/15 (the Julian/Gregorian switch), leap days, 1970, 9999.
DAYS = [-719162, -141428, -141427, -141417, -135140, -25508, -4, 0, 10956, 11016, 2932896]
MICROS_PER_DAY = 86_400_000_000
NANOS = ["timestamp-nanos", "local-timestamp-nanos"]


def logical_kinds() -> list[dict[str, Any]]:
    return [
        {"type": "int", "logicalType": "date"},
        {"type": "int", "logicalType": "time-millis"},
        {"type": "long", "logicalType": "time-micros"},
        {"type": "long", "logicalType": "timestamp-millis"},
        {"type": "long", "logicalType": "timestamp-micros"},
        {"type": "long", "logicalType": "local-timestamp-millis"},
        {"type": "long", "logicalType": "local-timestamp-micros"},
        {"type": "string", "logicalType": "uuid"},
        {"type": "bytes", "logicalType": "big-decimal"},
        {"type": "int", "logicalType": "timestamp-millis"},  # misplaced: a plain int
        {"type": "fixed", "name": "Duration", "size": 12, "logicalType": "duration"},
    ]


class AvroGen:
    """One schema and its values per call; names are unique within a schema."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.count = 0
        self.named: dict[str, Any] = {}  # full name -> its definition

    def _name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def schema(self) -> dict[str, Any]:
        self.count = 0
        self.named = {}
        namespace = self.rng.choice([None, None, "ex", "ex.deep"])
        return self.record(0, "", namespace)

    def record(self, depth: int, space: str, namespace: str | None = None) -> dict[str, Any]:
        rng = self.rng
        name = self._name("R")
        schema: dict[str, Any] = {"type": "record", "name": name}
        if namespace is not None:
            schema["namespace"] = namespace
        inner = namespace if namespace is not None else space
        full = f"{inner}.{name}" if inner else name
        if rng.random() < 0.15:
            schema["aliases"] = [f"Old{name}"]
        if rng.random() < 0.1:
            schema["doc"] = "a record"
        fields = []
        for i in range(rng.randint(1, 5 if depth == 0 else 3)):
            if depth < 3 and rng.random() < 0.02:
                ftype: Any = ["null", full]  # recursion: spark-avro refuses it
            else:
                ftype = self.type(depth + 1, inner)
            field: dict[str, Any] = {"name": f"f{i}", "type": ftype}
            if rng.random() < 0.1:
                field["aliases"] = [f"old_f{i}"]
            default = self._default(ftype)
            if default is not _NONE and rng.random() < 0.3:
                field["default"] = default
            fields.append(field)
        schema["fields"] = fields
        self.named[full] = schema
        return schema

    def type(self, depth: int, space: str, in_union: bool = False) -> Any:
        rng = self.rng
        options = ["primitive"] * 6 + ["logical"] * 4 + ["decimal"] * 2 + ["enum", "fixed"]
        if depth < 4:
            options += ["array", "map"] * 2
            if not in_union:
                options += ["union"] * 4
            if depth < 3:
                options += ["record"] * 2
        if self.named:
            options.append("reference")
        kind = rng.choice(options)
        if kind == "primitive":
            return rng.choice(PRIMITIVES[1:] if not in_union else PRIMITIVES)
        if kind == "logical":
            if rng.random() < 0.05:  # rare: a Python data source cannot declare Spark's type
                return {"type": "long", "logicalType": rng.choice(NANOS)}
            chosen = dict(rng.choice(logical_kinds()))
            if chosen["type"] == "fixed":  # a named type: a name of its own
                chosen["name"] = self._name("T")
                self.named[_full(chosen, space)] = chosen
            return chosen
        if kind == "decimal":
            return self.decimal(space)
        if kind == "enum":
            name = self._name("E")
            symbols = [f"S{i}" for i in range(rng.randint(1, 4))]
            enum: dict[str, Any] = {"type": "enum", "name": name, "symbols": symbols}
            if rng.random() < 0.2:
                enum["default"] = symbols[-1]
            if rng.random() < 0.2:
                enum["namespace"] = "ex.enums"
            self.named[_full(enum, space)] = enum
            return enum
        if kind == "fixed":
            fixed = {"type": "fixed", "name": self._name("F"), "size": rng.randint(0, 20)}
            self.named[_full(fixed, space)] = fixed
            return fixed
        if kind == "array":
            return {"type": "array", "items": self.type(depth + 1, space)}
        if kind == "map":
            return {"type": "map", "values": self.type(depth + 1, space)}
        if kind == "union":
            return self.union(depth, space)
        if kind == "record":
            return self.record(depth, space, rng.choice([None, None, "ex.other"]))
        name = rng.choice(sorted(self.named))
        short = name.rpartition(".")[2]
        same_space = name.rpartition(".")[0] == space
        return short if same_space and rng.random() < 0.5 else name

    def decimal(self, space: str) -> dict[str, Any]:
        rng = self.rng
        if rng.random() < 0.5:
            precision = rng.randint(1, 38)
            return {"type": "bytes", "logicalType": "decimal", "precision": precision,
                    "scale": rng.randint(0, precision)}
        size = rng.randint(1, 20)
        most = math.floor(math.log10(2) * (8 * size - 1))
        precision = rng.randint(1, max(1, min(38, most)))
        schema = {"type": "fixed", "name": self._name("D"), "size": size,
                  "logicalType": "decimal", "precision": precision,
                  "scale": rng.randint(0, precision)}
        self.named[_full(schema, space)] = schema
        return schema

    def union(self, depth: int, space: str) -> list[Any]:
        """2 to 4 branches, no two of one unnamed type (a logical type is its base's)."""
        branches: list[Any] = []
        kinds: set[str] = set()
        before = set(self.named)  # a branch may refer only to names defined before it
        for _ in range(self.rng.randint(2, 4) * 3):
            if len(branches) >= 4:
                break
            branch = self.type(depth + 1, space, in_union=True)
            kind = _base(branch, self.named)
            if kind in kinds or kind == "union":
                continue
            if (isinstance(branch, str) and branch not in PRIMITIVES
                    and _full({"name": branch}, space) not in before and branch not in before):
                continue
            kinds.add(kind)
            branches.append(branch)
        if len(branches) < 2:
            branches.append("null" if "null" not in kinds else "string" if "string" not in
                            kinds else "boolean")
        self.rng.shuffle(branches)
        return branches

    def _default(self, schema: Any) -> Any:
        """A JSON default for a field of ``schema``, or _NONE."""
        if isinstance(schema, list):
            return self._default(schema[0])
        if isinstance(schema, str):
            return {"null": None, "boolean": True, "int": 7, "long": -7, "float": 0.5,
                    "double": -2.25, "string": "dflt", "bytes": "\u00ff"}.get(schema, _NONE)
        if isinstance(schema, dict):
            kind = schema.get("type")
            if kind == "enum":
                return schema["symbols"][0]
            if kind == "array":
                return []
            if kind == "map":
                return {}
            if kind in ("int", "long", "string") and "logicalType" not in schema:
                return self._default(kind)
        return _NONE

    # --- values -------------------------------------------------------------------------

    def value(self, schema: Any, space: str = "", depth: int = 0) -> Any:
        rng = self.rng
        if isinstance(schema, list):
            branch = rng.choice(schema)
            if branch == "null":
                return None
            return (_branch_name(branch, space, self.named), self.value(branch, space, depth))
        if isinstance(schema, str):
            if schema in PRIMITIVES:
                return self.primitive(schema, None)
            found = _named(schema, space, self.named)
            return self.value(found, found.get("namespace", _space_of(schema, space)), depth)
        kind = schema["type"]
        if kind == "record":
            inner = schema.get("namespace", space)
            return {f["name"]: (None if depth > 3 and _nullable(f["type"])
                                else self.value(f["type"], inner, depth + 1))
                    for f in schema["fields"]}
        if kind == "enum":
            return rng.choice(schema["symbols"])
        if kind == "fixed":
            if schema.get("logicalType") == "decimal":
                return self.decimal_bytes(schema, schema["size"])
            return pick_bytes(rng, schema["size"])
        if kind == "array":
            return [self.value(schema["items"], space, depth + 1)
                    for _ in range(rng.choice([0, 1, 2, 3]))]
        if kind == "map":
            return {pick_string(rng) + str(i): self.value(schema["values"], space, depth + 1)
                    for i in range(rng.choice([0, 1, 2]))}
        return self.primitive(kind, schema)

    def primitive(self, kind: str, schema: dict[str, Any] | None) -> Any:
        rng = self.rng
        logical = (schema or {}).get("logicalType")
        if kind == "null":
            return None
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "int":
            if logical == "date":
                return rng.choice(DAYS) if rng.random() < 0.6 else pick_int(rng, -800000,
                                                                             3000000)
            if logical == "time-millis":
                return pick_int(rng, 0, 86_399_999)
            return pick_int(rng, *INT32)
        if kind == "long":
            if logical in ("time-micros",):
                return pick_int(rng, 0, MICROS_PER_DAY - 1)
            if logical in ("timestamp-millis", "local-timestamp-millis"):
                return rng.choice(DAYS) * 86_400_000 + pick_int(rng, 0, 86_399_999)
            if logical in ("timestamp-micros", "local-timestamp-micros"):
                return rng.choice(DAYS) * MICROS_PER_DAY + pick_int(rng, 0, MICROS_PER_DAY - 1)
            return pick_int(rng, *INT64)
        if kind == "float":
            return pick_float(rng, True)
        if kind == "double":
            return pick_float(rng, False)
        if kind == "string":
            if logical == "uuid":
                return "8d6ae7b4-1111-4c3e-9a1e-0123456789ab"
            return pick_string(rng)
        if kind == "bytes":
            if logical == "decimal":
                return self.decimal_bytes(schema or {}, None)
            return pick_bytes(rng)
        raise ValueError(kind)

    def decimal_bytes(self, schema: dict[str, Any], size: int | None) -> bytes:
        """An unscaled value within the precision, as Avro's big-endian two's complement
        (minimal, or sign-extended to a fixed ``size``)."""
        bound = 10 ** int(schema.get("precision", 1)) - 1
        unscaled = pick_int(self.rng, -bound, bound)
        n = size if size is not None else max(1, (unscaled.bit_length() + 8) // 8)
        return unscaled.to_bytes(n, "big", signed=True)


class _Missing:
    pass


_NONE: Any = _Missing()


def _full(schema: dict[str, Any], space: str) -> str:
    name = schema["name"]
    if "." in name:
        return str(name)
    inner = schema.get("namespace", space)
    return f"{inner}.{name}" if inner else str(name)


def _space_of(name: str, space: str) -> str:
    return name.rpartition(".")[0] if "." in name else space


def _named(name: str, space: str, named: dict[str, Any]) -> Any:
    full = name if "." in name else (f"{space}.{name}" if space else name)
    return named.get(full) or named[name]


def _base(schema: Any, named: dict[str, Any]) -> str:
    """What makes two union branches the same: the base type, or a named type's name."""
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, str):
        return schema if schema in PRIMITIVES else f"named:{schema.rpartition('.')[2]}"
    if schema["type"] in NAMED:
        return f"named:{schema['name']}"
    return str(schema["type"])


def _branch_name(branch: Any, space: str, named: dict[str, Any]) -> str:
    """fastavro's name for a union branch in tuple notation."""
    if isinstance(branch, str):
        if branch in PRIMITIVES:
            return branch
        found = _named(branch, space, named)
        return _full(found, _space_of(branch, space))
    if branch["type"] in NAMED:
        return _full(branch, space)
    return str(branch["type"])


def _nullable(schema: Any) -> bool:
    return isinstance(schema, list) and "null" in schema or schema == "null"


def strip_logical(schema: Any) -> Any:
    """The schema without logical types: what fastavro writes the raw values with."""
    if isinstance(schema, list):
        return [strip_logical(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strip_logical(v) for k, v in schema.items() if k not in ("logicalType",
                                                                        "default")}
    if "fields" in schema:
        out["fields"] = [{k: (strip_logical(v) if k == "type" else v) for k, v in f.items()}
                         for f in schema["fields"]]
    return out


def generate(rng: random.Random) -> tuple[dict[str, Any], list[Any]]:
    """One schema and 1 to 5 values for it (now and then a null payload among them); a
    fifth of the cases are read with an evolved reader schema (avro_evolve.py)."""
    gen = AvroGen(rng)
    schema = gen.schema()
    values: list[Any] = [gen.value(schema) for _ in range(rng.randint(1, 5))]
    if rng.random() < 0.15:
        values.insert(rng.randrange(len(values) + 1), None)
    if rng.random() < 0.2:  # read with an evolved reader schema
        return {"writer": schema, "reader": evolve(rng, schema)}, values
    return schema, values
