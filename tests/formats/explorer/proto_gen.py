"""Random Protobuf schemas and messages, from a seed, built with protobuf's own runtime.

A schema is a JSON model of one .proto file (proto2 or proto3, with or without a package):
messages with every scalar type, nested messages and enums, repeated fields, maps of every
key type, oneofs, proto3 ``optional``, proto2 ``required``, and the well-known types
(Timestamp, Duration, the wrappers, Empty, FieldMask, Any). :func:`descriptor_proto` builds
its ``FileDescriptorProto`` directly (the reference: protobuf's runtime classes come from
it), :func:`proto_text` writes the .proto text eoskafka is given (so its own parser is
tested too); both are in proto_files.py. Values are serialized messages, set field by field
by the runtime; a smaller schema (shrinking) parses the same bytes, the removed fields then
unknown.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from tests.formats.explorer.cases import Case
from tests.formats.explorer.proto_files import WELL_KNOWN, message_class
from tests.formats.explorer.values import (
    INT32,
    INT64,
    pick_bytes,
    pick_float,
    pick_int,
    pick_string,
)

SCALARS = ["double", "float", "int64", "uint64", "int32", "fixed64", "fixed32", "bool",
           "string", "bytes", "uint32", "sfixed32", "sfixed64", "sint32", "sint64"]
MAP_KEYS = ["int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
            "sfixed32", "sfixed64", "bool", "string"]


class ProtoGen:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.count = 0

    def _name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def schema(self) -> dict[str, Any]:
        syntax = self.rng.choice(["proto3", "proto3", "proto2"])
        root = self.message(0, syntax)
        messages = [root]
        if self.rng.random() < 0.3:  # a top-level sibling the root may use by name
            sibling = self.message(2, syntax)
            messages.append(sibling)
            number = max(f["number"] for f in root["fields"]) + 1
            root["fields"].append(self._field(number, syntax,
                                              ("message", sibling["name"])))
        return {"syntax": syntax, "package": self.rng.choice(["", "ex", "ex.deep"]),
                "messages": messages}

    def message(self, depth: int, syntax: str) -> dict[str, Any]:
        rng = self.rng
        msg: dict[str, Any] = {"name": self._name("M"), "fields": [], "nested": [], "enums": []}
        numbers = iter(rng.sample(range(1, 60), 30) if rng.random() < 0.3 else range(1, 60))
        oneof: str | None = None
        for _ in range(rng.randint(1, 6 if depth == 0 else 3)):
            kind = rng.choice(["scalar"] * 6 + ["enum", "wkt"] + (["message", "map"] * 2
                                                                 if depth < 2 else []))
            if kind == "enum":
                enum = {"name": self._name("E"),
                        "values": [f"V{self.count}_{i}" for i in range(rng.randint(1, 4))]}
                msg["enums"].append(enum)
                target: tuple[str, str] = ("enum", enum["name"])
            elif kind == "message":
                nested = self.message(depth + 1, syntax)
                msg["nested"].append(nested)
                target = ("message", nested["name"])
            elif kind == "wkt":
                target = ("message", rng.choice(sorted(WELL_KNOWN)))
            elif kind == "map":
                value_kind = rng.choice(["scalar", "scalar", "enum", "message"])
                if value_kind == "enum":
                    enum = {"name": self._name("E"), "values": [f"V{self.count}_0",
                                                                f"V{self.count}_1"]}
                    msg["enums"].append(enum)
                    value: tuple[str, str] = ("enum", enum["name"])
                elif value_kind == "message":
                    nested = self.message(depth + 1, syntax)
                    msg["nested"].append(nested)
                    value = ("message", nested["name"])
                else:
                    value = ("scalar", rng.choice(sorted(SCALARS)))
                field = {"name": self._name("f"), "number": next(numbers), "label": "",
                         "kind": "map", "key": rng.choice(MAP_KEYS), "value_kind": value[0],
                         "type": value[1], "oneof": None}
                msg["fields"].append(field)
                continue
            else:
                target = ("scalar", rng.choice(sorted(SCALARS)))
            field = self._field(next(numbers), syntax, target)
            if field["label"] in ("", "optional") and rng.random() < 0.25:
                if oneof is None or rng.random() < 0.3:
                    oneof = self._name("o")
                field["oneof"], field["label"] = oneof, ""
            msg["fields"].append(field)
        return msg

    def _field(self, number: int, syntax: str, target: tuple[str, str]) -> dict[str, Any]:
        rng = self.rng
        labels = ["", "", "optional", "repeated"] if syntax == "proto3" else [
            "optional", "optional", "required", "repeated"]
        label = rng.choice(labels)
        if syntax == "proto3" and target[0] == "message" and label == "optional":
            label = ""
        return {"name": self._name("f"), "number": number, "label": label, "kind": target[0],
                "type": target[1], "oneof": None}


# --- values -------------------------------------------------------------------------------

def fill(msg: Any, rng: random.Random, depth: int = 0) -> None:
    """Set a random subset of ``msg``'s fields (one member per oneof at most)."""
    desc = msg.DESCRIPTOR
    chosen = {o.name: rng.choice(list(o.fields) + [None]) for o in desc.oneofs
              if not o.name.startswith("_")}
    for f in desc.fields:
        o = f.containing_oneof
        if o is not None and not o.name.startswith("_") and chosen[o.name] is not f:
            continue
        if not f.is_required and rng.random() < 0.25:
            continue
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            key_f, value_f = f.message_type.fields_by_name["key"], f.message_type.fields_by_name[
                "value"]
            container = getattr(msg, f.name)
            for _ in range(rng.choice([0, 1, 2, 3])):
                key = _scalar(key_f, rng)
                if value_f.message_type is not None:
                    fill(container[key], rng, depth + 1)
                else:
                    container[key] = _scalar(value_f, rng)
            continue
        if f.is_repeated:
            container = getattr(msg, f.name)
            for _ in range(rng.choice([0, 1, 2, 3])):
                if f.message_type is not None:
                    _fill_message(container.add(), f.message_type.full_name, rng, depth)
                else:
                    container.append(_scalar(f, rng))
            continue
        if f.message_type is not None:
            _fill_message(getattr(msg, f.name), f.message_type.full_name, rng, depth)
            getattr(msg, f.name).SetInParent()
        else:
            setattr(msg, f.name, _scalar(f, rng))


def _fill_message(sub: Any, name: str, rng: random.Random, depth: int) -> None:
    if name == "google.protobuf.Timestamp":
        sub.seconds = rng.choice([-62135596800, -12219292800, 0, 951782400, 253402300799,
                                  rng.randint(-10**10, 10**10)])
        sub.nanos = rng.choice([0, 1000, 999_999_000, rng.randint(0, 999_999) * 1000])
    elif name == "google.protobuf.Duration":
        seconds = rng.choice([0, 1, -1, 315576000000, -315576000000, rng.randint(-10**6, 10**6)])
        nanos = rng.randint(0, 999_999) * 1000
        sub.seconds, sub.nanos = seconds, (-nanos if seconds < 0 else nanos)
    elif name == "google.protobuf.Any":
        sub.type_url, sub.value = "type.googleapis.com/ex.Thing", pick_bytes(rng)
    elif depth < 4:
        fill(sub, rng, depth + 1)


def _scalar(f: Any, rng: random.Random) -> Any:
    t = f.type
    if f.enum_type is not None:
        values = [v.number for v in f.enum_type.values]
        open_enum = not getattr(f.enum_type, "is_closed", True)
        return 17 if open_enum and rng.random() < 0.05 else rng.choice(values)
    if t in (f.TYPE_INT32, f.TYPE_SINT32, f.TYPE_SFIXED32):
        return pick_int(rng, *INT32)
    if t in (f.TYPE_INT64, f.TYPE_SINT64, f.TYPE_SFIXED64):
        return pick_int(rng, *INT64)
    if t in (f.TYPE_UINT32, f.TYPE_FIXED32):
        return pick_int(rng, 0, 2**32 - 1)
    if t in (f.TYPE_UINT64, f.TYPE_FIXED64):
        return pick_int(rng, 0, 2**64 - 1)
    if t == f.TYPE_FLOAT:
        return pick_float(rng, True)
    if t == f.TYPE_DOUBLE:
        return pick_float(rng, False)
    if t == f.TYPE_BOOL:
        return rng.random() < 0.5
    if t == f.TYPE_STRING:
        return pick_string(rng)
    return pick_bytes(rng)


def generate(rng: random.Random) -> tuple[dict[str, Any], list[Any]]:
    """One schema and 1 to 5 serialized messages of its root (now and then a null)."""
    schema = ProtoGen(rng).schema()
    cls = message_class(schema)
    values: list[Any] = []
    for _ in range(rng.randint(1, 5)):
        msg = cls()
        fill(msg, rng)
        values.append(msg.SerializeToString())
    if rng.random() < 0.15:
        values.insert(rng.randrange(len(values) + 1), None)
    return schema, values


def features(schema: dict[str, Any]) -> set[str]:
    """Names a known difference may be about: the syntax and the well-known types used."""
    found = {schema["syntax"]}

    def walk(msg: dict[str, Any]) -> None:
        for f in msg["fields"]:
            if f["type"] in WELL_KNOWN:
                found.add(f["type"].rpartition(".")[2])
            if f["kind"] == "map":
                found.add("map")
            if f["oneof"]:
                found.add("oneof")
            if f["label"] == "required" and f["type"] == "google.protobuf.Empty":
                found.add("required-empty")
        for n in msg["nested"]:
            walk(n)
    for m in schema["messages"]:
        walk(m)
    return found


def candidates(case: Case) -> Iterator[Case]:
    """Smaller cases: one message alone, then one field (or nested message, enum or
    sibling) fewer anywhere; the bytes stay, the removed fields read as unknown."""
    rows = [v for v in case.values if v is not None]
    if len(case.values) > 1:
        for row in rows:
            yield Case(case.fmt, case.schema, [row])
    schema = case.schema

    def smaller(path: list[tuple[str, int]]) -> dict[str, Any]:
        import copy

        out = copy.deepcopy(schema)
        node: Any = out
        for key, i in path[:-1]:
            node = node[key][i]
        key, i = path[-1]
        del node[key][i]
        return out

    def walk(msg: dict[str, Any], path: list[tuple[str, int]]) -> Iterator[list[tuple[str, int]]]:
        for key in ("fields", "nested", "enums"):
            for i in range(len(msg[key])):
                yield path + [(key, i)]
        for i, n in enumerate(msg["nested"]):
            yield from walk(n, path + [("nested", i)])

    for i in range(1, len(schema["messages"])):
        yield Case(case.fmt, smaller([("messages", i)]), case.values)
    for p in walk(schema["messages"][0], [("messages", 0)]):
        if p[-1][0] == "fields" and len(_at(schema, p[:-1])["fields"]) == 1:
            continue
        yield Case(case.fmt, smaller(p), case.values)


def _at(schema: dict[str, Any], path: list[tuple[str, int]]) -> Any:
    node: Any = schema
    for key, i in path:
        node = node[key][i]
    return node
