"""A reader schema evolved from a writer's, by Avro's schema resolution rules.

An evolved case's schema is ``{"writer": ..., "reader": ...}``: the values are written with
the writer's, and eoskafka (the writer's id in each header, the reader's as its reader
schema) and spark-avro (``from_avro`` with the writer's schema and the reader's as its
``avroSchema`` option) read them as the reader's. Changes, one to three of them on the top
record's fields: a field added with a default, a field removed, a number promoted (int to
long, float or double; long to float or double; float to double), string and bytes
swapped, a type made a union with null, an enum given another symbol, a field renamed
with the old name as its alias.
"""

from __future__ import annotations

import copy
import random
from typing import Any

PROMOTIONS = {"int": ["long", "float", "double"], "long": ["float", "double"],
              "float": ["double"], "string": ["bytes"], "bytes": ["string"]}


def evolved(case_schema: Any) -> bool:
    return isinstance(case_schema, dict) and "writer" in case_schema


def writer_of(case_schema: Any) -> Any:
    return case_schema["writer"] if evolved(case_schema) else case_schema


def reader_of(case_schema: Any) -> Any:
    return case_schema["reader"] if evolved(case_schema) else case_schema


def evolve(rng: random.Random, writer: dict[str, Any]) -> dict[str, Any]:
    """A reader schema for ``writer`` (its top record changed in one to three ways)."""
    reader = copy.deepcopy(writer)
    fields = reader["fields"]
    for _ in range(rng.randint(1, 3)):
        change = rng.choice(["add", "remove", "promote", "nullable", "enum", "rename"])
        if change == "add":
            kind, default = rng.choice([("long", -1), ("string", "added"), ("double", 0.5),
                                        (["null", "int"], None), ("boolean", False)])
            fields.append({"name": _fresh(fields, "added", len(fields)), "type": kind,
                           "default": default})
            continue
        if not fields:
            continue
        i = rng.randrange(len(fields))
        f = fields[i]
        if change == "remove" and len(fields) > 1:
            del fields[i]
        elif change == "promote" and isinstance(f["type"], str) and f["type"] in PROMOTIONS:
            f["type"] = rng.choice(PROMOTIONS[f["type"]])
            f.pop("default", None)
        elif change == "nullable" and not isinstance(f["type"], list):
            f["type"] = ["null", f["type"]]
            f["default"] = None
        elif (change == "enum" and isinstance(f["type"], dict)
              and f["type"].get("type") == "enum" and "ADDED" not in f["type"]["symbols"]):
            f["type"]["symbols"] = f["type"]["symbols"] + ["ADDED"]
        elif change == "rename":
            f["aliases"] = list(f.get("aliases", [])) + [f["name"]]
            f["name"] = _fresh(fields, "renamed", i)
    return reader


def _fresh(fields: list[dict[str, Any]], stem: str, n: int) -> str:
    """``stem`` and the first number from ``n`` that no field has as its name or an alias
    (Avro allows a name once within a record: a remove then an add would repeat one)."""
    taken = {name for f in fields for name in (f["name"], *f.get("aliases", ()))}
    while f"{stem}{n}" in taken:
        n += 1
    return f"{stem}{n}"


def features(writer: dict[str, Any], reader: dict[str, Any]) -> set[str]:
    """Names for what an evolution does that a known difference may be about."""
    found = {"evolved"}
    written = {f["name"]: f["type"] for f in writer["fields"]}
    for f in reader["fields"]:
        names = [f["name"], *f.get("aliases", ())]
        before = next((written[n] for n in names if n in written), None)
        if before == "bytes" and _reads_string(f["type"]):
            found.add("bytes-as-string")
    return found


def _reads_string(reader_type: Any) -> bool:
    """A writer's bytes resolve to this reader type's string: the string itself, or a union
    with a string branch and no bytes branch (a promoted field later made nullable)."""
    if isinstance(reader_type, list):
        return "string" in reader_type and "bytes" not in reader_type
    return bool(reader_type == "string")
