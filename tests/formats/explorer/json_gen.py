"""Random JSON Schemas (draft-07) and values, from a seed.

A schema is an object with properties of integer, number, boolean and string type (dates
and date-times too), nullable ones (``["integer", "null"]`` or ``oneOf`` with null),
nested objects with ``required``, arrays, and maps (``additionalProperties``). Values fit
it, with extremes (the int64 bounds, -0.0, unicode, dates before 1582, leap days). Now and
then the values are written by an evolved writer instead (an integer widened to number, a
number to boolean or string, a required property dropped): those the reader's schema
refuses (jsonschema says which) must not read silently.
"""

from __future__ import annotations

import copy
import datetime
import random
from collections.abc import Iterator
from typing import Any

from tests.formats.explorer.cases import Case
from tests.formats.explorer.values import INT64, pick_float, pick_int, pick_string

DATES = ["0001-01-01", "1582-10-04", "1582-10-15", "1600-02-29", "1900-03-01", "1970-01-01",
         "2000-02-29", "2024-02-29", "9999-12-31"]
TIMES = ["00:00:00Z", "23:59:59.999999Z", "12:30:00+05:30", "00:00:00.5-08:00"]


class JsonGen:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def schema(self) -> dict[str, Any]:
        return {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Explored",
                **self.object(0)}

    def object(self, depth: int) -> dict[str, Any]:
        rng = self.rng
        properties = {f"p{i}": self.type(depth + 1) for i in range(rng.randint(1, 5))}
        out: dict[str, Any] = {"type": "object", "properties": properties}
        required = [p for p in properties if rng.random() < 0.4]
        if required:
            out["required"] = required
        return out

    def type(self, depth: int) -> dict[str, Any]:
        rng = self.rng
        kinds = ["integer", "number", "boolean", "string", "date", "date-time", "enum"]
        if depth < 3:
            kinds += ["object", "array", "map"]
        kind = rng.choice(kinds)
        if kind == "object":
            node = self.object(depth)
        elif kind == "array":
            node = {"type": "array", "items": self.type(depth + 1)}
        elif kind == "map":
            node = {"type": "object", "additionalProperties": self.type(depth + 1)}
        elif kind in ("date", "date-time"):
            node = {"type": "string", "format": kind}
        elif kind == "enum":
            node = {"type": "string", "enum": ["a", "b", "ü"]}
        else:
            node = {"type": kind}
        r = rng.random()
        if r < 0.15 and isinstance(node.get("type"), str):
            node = {**node, "type": [node["type"], "null"]}
            if "enum" in node:
                node["enum"] = node["enum"] + [None]
        elif r < 0.25:
            node = {"oneOf": [{"type": "null"}, node]}
        return node

    # --- values -------------------------------------------------------------------------

    def value(self, node: dict[str, Any], depth: int = 0) -> Any:
        rng = self.rng
        if "oneOf" in node:
            return None if rng.random() < 0.3 else self.value(node["oneOf"][1], depth)
        kind = node.get("type")
        if isinstance(kind, list):
            if rng.random() < 0.3:
                return None
            kind = kind[0]
        if kind == "object" and "properties" in node:
            required = set(node.get("required", ()))
            out = {}
            for name, sub in node["properties"].items():
                if name in required or rng.random() < 0.8:
                    out[name] = self.value(sub, depth + 1)
            if rng.random() < 0.1:
                out["extra"] = "ignored"
            return out
        if kind == "object":
            return {pick_string(rng) + str(i): self.value(node["additionalProperties"],
                                                          depth + 1)
                    for i in range(rng.choice([0, 1, 2]))}
        if kind == "array":
            return [self.value(node["items"], depth + 1) for _ in range(rng.choice([0, 1, 3]))]
        if kind == "integer":
            return pick_int(rng, *INT64)
        if kind == "number":
            value = pick_float(rng, False)
            if value != value or value in (float("inf"), float("-inf")):
                value = -0.0
            return value if rng.random() < 0.8 else rng.randint(-(2**53), 2**53)
        if kind == "boolean":
            return rng.random() < 0.5
        if "enum" in node:
            return rng.choice(node["enum"])
        if node.get("format") == "date":
            return rng.choice(DATES)
        if node.get("format") == "date-time":
            return f"{rng.choice(DATES)}T{rng.choice(TIMES)}"
        return pick_string(rng)


def _evolved(rng: random.Random, node: Any) -> Any:
    """A writer's schema: one scalar type widened or one required property dropped."""
    node = copy.deepcopy(node)
    spots: list[tuple[dict[str, Any], str]] = []

    def walk(n: Any) -> None:
        if isinstance(n, dict):
            if n.get("type") in ("integer", "number"):
                spots.append((n, "type"))
            if "required" in n:
                spots.append((n, "required"))
            for v in n.values():
                walk(v)
        elif isinstance(n, list):
            for v in n:
                walk(v)
    walk(node)
    if not spots:
        return node
    n, what = rng.choice(spots)
    if what == "required":
        n.pop("required")
    elif n["type"] == "integer":
        n["type"] = "number"
    else:
        n["type"] = rng.choice(["boolean", "string"])
    return node


def generate(rng: random.Random) -> tuple[dict[str, Any], list[Any]]:
    """One reader schema and 1 to 5 values, now and then from an evolved writer."""
    gen = JsonGen(rng)
    schema = gen.schema()
    writer = _evolved(rng, schema) if rng.random() < 0.2 else schema
    values: list[Any] = [gen.value(writer) for _ in range(rng.randint(1, 5))]
    if writer is not schema:
        for v in values:  # a required property the writer may now leave out
            if isinstance(v, dict) and v and rng.random() < 0.5:
                v.pop(rng.choice(sorted(v)))
    if rng.random() < 0.15:
        values.insert(rng.randrange(len(values) + 1), None)
    return schema, values


def candidates(case: Case) -> Iterator[Case]:
    """Smaller cases: one value alone, then one property fewer anywhere (values keep it:
    an extra property is ignored), a nullable type made plain."""
    rows = [v for v in case.values if v is not None]
    if len(case.values) > 1:
        for row in rows:
            yield Case(case.fmt, case.schema, [row])
    paths: list[list[str]] = []

    def walk(node: Any, path: list[str]) -> None:
        if isinstance(node, dict):
            props = node.get("properties")
            if isinstance(props, dict) and len(props) > 1:
                paths.extend(path + ["properties", p] for p in props)
            for k, v in node.items():
                walk(v, path + [k])
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, path + [str(i)])
    walk(case.schema, [])
    for path in paths:
        schema = copy.deepcopy(case.schema)
        node: Any = schema
        for k in path[:-2]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        del node["properties"][path[-1]]
        if path[-1] in node.get("required", []):
            node["required"] = [r for r in node["required"] if r != path[-1]]
            if not node["required"]:
                del node["required"]
        yield Case(case.fmt, schema, case.values)


def days(text: str) -> int:
    return (datetime.date.fromisoformat(text) - datetime.date(1970, 1, 1)).days


def micros(text: str) -> int:
    value = datetime.datetime.fromisoformat(text)
    delta = value - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
