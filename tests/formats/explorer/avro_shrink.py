"""Smaller Avro cases: a schema with one part removed or simplified, the values carried
along (a value the smaller schema cannot hold drops its row).

Reductions, tried in order: a record field removed, a nested record hoisted to the top, an
array or map replaced by its element, a union narrowed to one branch or one branch fewer,
a logical type removed (the raw value stays), each applied at any depth.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

from tests.formats.explorer.avro_evolve import evolved
from tests.formats.explorer.cases import Case

Reduce = Callable[[Any], Any]


class Drop(Exception):
    """The value has no form in the smaller schema: its row goes."""


def candidates(case: Case) -> Iterator[Case]:
    rows = [v for v in case.values if v is not None]
    if len(case.values) > 1:
        for row in rows:
            yield Case(case.fmt, case.schema, [row])
    if evolved(case.schema):
        yield from _evolved(case, rows)
        return
    for schema, reduce in _record(case.schema, top=True):
        values = []
        for v in case.values:
            try:
                values.append(None if v is None else reduce(v))
            except (Drop, KeyError, TypeError, IndexError):
                continue
        if values and any(v is not None for v in values):
            yield Case(case.fmt, schema, values)


def _evolved(case: Case, rows: list[Any]) -> Iterator[Case]:
    """An evolved case: without the evolution (the writer's schema read as itself), then
    one top field fewer on both sides."""
    writer, reader = case.schema["writer"], case.schema["reader"]
    yield Case(case.fmt, writer, case.values)
    for f in writer["fields"]:
        name = f["name"]
        if len(writer["fields"]) < 2:
            break
        smaller = {"writer": dict(writer, fields=[g for g in writer["fields"]
                                                  if g["name"] != name]),
                   "reader": dict(reader, fields=[g for g in reader["fields"]
                                                  if g["name"] != name
                                                  and name not in g.get("aliases", ())])}
        if smaller["reader"]["fields"]:
            yield Case(case.fmt, smaller, [None if v is None else
                                           {k: x for k, x in v.items() if k != name}
                                           for v in case.values])


def _record(schema: dict[str, Any], top: bool = False) -> Iterator[tuple[Any, Reduce]]:
    fields = schema["fields"]
    for j, f in enumerate(fields):
        name = f["name"]
        if len(fields) > 1:
            smaller = dict(schema, fields=fields[:j] + fields[j + 1:])
            yield smaller, lambda v, name=name: {k: x for k, x in v.items() if k != name}
    for j, f in enumerate(fields):
        name = f["name"]
        if top and isinstance(f["type"], dict) and f["type"].get("type") == "record":
            inner = copy.deepcopy(f["type"])
            if "namespace" not in inner and "namespace" in schema:
                inner["namespace"] = schema["namespace"]
            yield inner, lambda v, name=name: _need_dict(v[name])
        for smaller_type, reduce in _type(f["type"], replace=True):
            new_field = {k: x for k, x in f.items() if k != "default"}
            new_field["type"] = smaller_type
            smaller = dict(schema, fields=fields[:j] + [new_field] + fields[j + 1:])
            yield smaller, lambda v, name=name, reduce=reduce: {**v, name: reduce(v[name])}


def _need_dict(v: Any) -> Any:
    if not isinstance(v, dict):
        raise Drop
    return v


def _first(v: Any) -> Any:
    if not v:
        raise Drop
    return v[0] if isinstance(v, list) else next(iter(v.values()))


def _type(schema: Any, replace: bool) -> Iterator[tuple[Any, Reduce]]:
    """Smaller forms of ``schema``; ``replace``: also ones of another kind (an array by
    its element), which a union branch cannot take (its name would change)."""
    if isinstance(schema, list):
        yield from _union(schema, replace)
        return
    if not isinstance(schema, dict):
        return
    kind = schema.get("type")
    if kind == "record":
        yield from _record(schema)
    elif kind in ("array", "map"):
        key = "items" if kind == "array" else "values"
        if replace:
            yield schema[key], _first
        for smaller, reduce in _type(schema[key], replace=True):
            if kind == "array":
                yield dict(schema, items=smaller), lambda v, r=reduce: [
                    None if x is None else r(x) for x in v]
            else:
                yield dict(schema, values=smaller), lambda v, r=reduce: {
                    k: None if x is None else r(x) for k, x in v.items()}
    if "logicalType" in schema:
        plain = {k: x for k, x in schema.items()
                 if k not in ("logicalType", "precision", "scale")}
        yield (plain if kind == "fixed" else plain["type"]), lambda v: v


def _union(branches: list[Any], replace: bool) -> Iterator[tuple[Any, Reduce]]:
    names = [_tag_of(b) for b in branches]
    if replace:
        for i, b in enumerate(branches):
            yield b, lambda v, i=i: _only(v, names[i])
    if len(branches) > 2:
        for i in range(len(branches)):
            rest = branches[:i] + branches[i + 1:]
            yield rest, lambda v, i=i: _not(v, names[i])
    for i, b in enumerate(branches):
        for smaller, reduce in _type(b, replace=False):
            yield (branches[:i] + [smaller] + branches[i + 1:],
                   lambda v, i=i, r=reduce: _inside(v, names[i], r))


def _tag_of(branch: Any) -> str | None:
    """The short name a branch's tuple values carry (None: the null branch)."""
    if branch == "null":
        return None
    if isinstance(branch, str):
        return branch.rpartition(".")[2]
    if branch.get("type") in ("record", "enum", "fixed"):
        return str(branch["name"]).rpartition(".")[2]
    return str(branch["type"])


def _matches(v: Any, tag: str | None) -> bool:
    if v is None:
        return tag is None
    return isinstance(v, tuple) and v[0].rpartition(".")[2] == tag


def _only(v: Any, tag: str | None) -> Any:
    if not _matches(v, tag):
        raise Drop
    return None if v is None else v[1]


def _not(v: Any, tag: str | None) -> Any:
    if _matches(v, tag):
        raise Drop
    return v


def _inside(v: Any, tag: str | None, reduce: Reduce) -> Any:
    if _matches(v, tag) and v is not None:
        return (v[0], reduce(v[1]))
    return v
