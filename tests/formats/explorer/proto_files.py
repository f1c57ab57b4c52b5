"""A generated Protobuf model (proto_gen.py) as protobuf's runtime and a user see it: its
``FileDescriptorProto`` built directly (the reference's message classes come from it, not
from eoskafka's parser) and its .proto text (what eoskafka is given)."""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_FDP = descriptor_pb2.FieldDescriptorProto
SCALARS = {
    "double": _FDP.TYPE_DOUBLE, "float": _FDP.TYPE_FLOAT, "int64": _FDP.TYPE_INT64,
    "uint64": _FDP.TYPE_UINT64, "int32": _FDP.TYPE_INT32, "fixed64": _FDP.TYPE_FIXED64,
    "fixed32": _FDP.TYPE_FIXED32, "bool": _FDP.TYPE_BOOL, "string": _FDP.TYPE_STRING,
    "bytes": _FDP.TYPE_BYTES, "uint32": _FDP.TYPE_UINT32, "sfixed32": _FDP.TYPE_SFIXED32,
    "sfixed64": _FDP.TYPE_SFIXED64, "sint32": _FDP.TYPE_SINT32, "sint64": _FDP.TYPE_SINT64,
}
WELL_KNOWN = {
    "google.protobuf.Timestamp": "google/protobuf/timestamp.proto",
    "google.protobuf.Duration": "google/protobuf/duration.proto",
    "google.protobuf.Int32Value": "google/protobuf/wrappers.proto",
    "google.protobuf.Int64Value": "google/protobuf/wrappers.proto",
    "google.protobuf.UInt64Value": "google/protobuf/wrappers.proto",
    "google.protobuf.DoubleValue": "google/protobuf/wrappers.proto",
    "google.protobuf.FloatValue": "google/protobuf/wrappers.proto",
    "google.protobuf.BoolValue": "google/protobuf/wrappers.proto",
    "google.protobuf.StringValue": "google/protobuf/wrappers.proto",
    "google.protobuf.BytesValue": "google/protobuf/wrappers.proto",
    "google.protobuf.Empty": "google/protobuf/empty.proto",
    "google.protobuf.FieldMask": "google/protobuf/field_mask.proto",
    "google.protobuf.Any": "google/protobuf/any.proto",
}


def _full(schema: dict[str, Any], scope: list[str], name: str, known: set[str]) -> str:
    """A type name resolved from ``scope`` outwards, as protoc resolves it."""
    if name.startswith("google.protobuf."):
        return name
    package = schema["package"]
    for depth in range(len(scope), -1, -1):
        candidate = ".".join([p for p in [package] if p] + scope[:depth] + [name])
        if candidate in known:
            return candidate
    raise KeyError(name)


def _declared(schema: dict[str, Any]) -> set[str]:
    known: set[str] = set()

    def walk(msg: dict[str, Any], prefix: str) -> None:
        full = f"{prefix}.{msg['name']}" if prefix else msg["name"]
        known.add(full)
        for e in msg["enums"]:
            known.add(f"{full}.{e['name']}")
        for n in msg["nested"]:
            walk(n, full)
    for m in schema["messages"]:
        walk(m, schema["package"])
    return known


def descriptor_proto(schema: dict[str, Any]) -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name="explored.proto", syntax=schema["syntax"])
    if schema["package"]:
        file.package = schema["package"]
    known = _declared(schema)
    imports: set[str] = set()

    def build(msg: dict[str, Any], proto: Any, scope: list[str]) -> None:
        proto.name = msg["name"]
        here = scope + [msg["name"]]
        for e in msg["enums"]:
            ep = proto.enum_type.add(name=e["name"])
            for i, v in enumerate(e["values"]):
                ep.value.add(name=v, number=i)
        for n in msg["nested"]:
            build(n, proto.nested_type.add(), here)
        oneofs: dict[str, int] = {}
        for f in msg["fields"]:
            fp = proto.field.add(name=f["name"], number=f["number"], json_name=f["name"])
            if f["kind"] == "map":
                entry = proto.nested_type.add(name=_entry_name(f["name"]))
                entry.options.map_entry = True
                entry.field.add(name="key", number=1, label=_FDP.LABEL_OPTIONAL,
                                type=SCALARS[f["key"]], json_name="key")
                vp = entry.field.add(name="value", number=2, label=_FDP.LABEL_OPTIONAL,
                                     json_name="value")
                _set_type(vp, f["value_kind"], f["type"], schema, here, known, imports)
                fp.label = _FDP.LABEL_REPEATED
                fp.type = _FDP.TYPE_MESSAGE
                fp.type_name = "." + ".".join([p for p in [schema["package"]] if p] + here
                                              + [entry.name])
                continue
            _set_type(fp, f["kind"], f["type"], schema, here, known, imports)
            fp.label = {"repeated": _FDP.LABEL_REPEATED, "required": _FDP.LABEL_REQUIRED
                        }.get(f["label"], _FDP.LABEL_OPTIONAL)
            if f["oneof"]:
                if f["oneof"] not in oneofs:
                    oneofs[f["oneof"]] = len(proto.oneof_decl)
                    proto.oneof_decl.add(name=f["oneof"])
                fp.oneof_index = oneofs[f["oneof"]]
        for f in msg["fields"]:  # proto3 optional: synthetic oneofs come after real ones
            if schema["syntax"] == "proto3" and f["label"] == "optional":
                fp = next(p for p in proto.field if p.name == f["name"])
                fp.proto3_optional = True
                fp.oneof_index = len(proto.oneof_decl)
                proto.oneof_decl.add(name=f"_{f['name']}")

    for m in schema["messages"]:
        build(m, file.message_type.add(), [])
    file.dependency.extend(sorted(imports))
    return file


def _entry_name(field: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in field.split("_")) + "Entry"


def _set_type(fp: Any, kind: str, name: str, schema: dict[str, Any], scope: list[str],
              known: set[str], imports: set[str]) -> None:
    if kind == "scalar":
        fp.type = SCALARS[name]
        return
    fp.type = _FDP.TYPE_ENUM if kind == "enum" else _FDP.TYPE_MESSAGE
    if name in WELL_KNOWN:
        imports.add(WELL_KNOWN[name])
    fp.type_name = "." + _full(schema, scope, name, known)


def message_class(schema: dict[str, Any]) -> Any:
    """The root message's class, from a pool of its own."""
    from google.protobuf import (
        any_pb2,
        duration_pb2,
        empty_pb2,
        field_mask_pb2,
        timestamp_pb2,
        wrappers_pb2,
    )

    pool = descriptor_pool.DescriptorPool()
    for module in (any_pb2, duration_pb2, empty_pb2, field_mask_pb2, timestamp_pb2,
                   wrappers_pb2):
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        pool.Add(proto)
    file = descriptor_proto(schema)
    pool.Add(file)
    root = ".".join(p for p in [schema["package"], schema["messages"][0]["name"]] if p)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(root))


def proto_text(schema: dict[str, Any]) -> str:
    """The .proto text of the model (what a user would register)."""
    lines = [f'syntax = "{schema["syntax"]}";']
    if schema["package"]:
        lines.append(f"package {schema['package']};")
    lines += [f'import "{i}";' for i in sorted(descriptor_proto(schema).dependency)]

    def render(msg: dict[str, Any], indent: str) -> None:
        lines.append(f"{indent}message {msg['name']} {{")
        inner = indent + "  "
        for e in msg["enums"]:
            lines.append(f"{inner}enum {e['name']} {{ " + " ".join(
                f"{v} = {i};" for i, v in enumerate(e["values"])) + " }")
        for n in msg["nested"]:
            render(n, inner)
        done: set[str] = set()
        for f in msg["fields"]:
            if f["oneof"]:
                if f["oneof"] in done:
                    continue
                done.add(f["oneof"])
                members = [g for g in msg["fields"] if g["oneof"] == f["oneof"]]
                lines.append(f"{inner}oneof {f['oneof']} {{")
                lines.extend(f"{inner}  {g['type']} {g['name']} = {g['number']};"
                             for g in members)
                lines.append(f"{inner}}}")
            elif f["kind"] == "map":
                lines.append(f"{inner}map<{f['key']}, {f['type']}> {f['name']} = "
                             f"{f['number']};")
            else:
                label = f"{f['label']} " if f["label"] else ""
                lines.append(f"{inner}{label}{f['type']} {f['name']} = {f['number']};")
        lines.append(f"{indent}}}")

    for m in schema["messages"]:
        render(m, "")
    return "\n".join(lines) + "\n"


