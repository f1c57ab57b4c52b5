"""A registered Protobuf schema as descriptors, and a message type as an Arrow type.

The registry returns a schema as .proto text (Confluent's Java clients, users, Apicurio) or
as a base64 ``FileDescriptorProto`` (what Confluent's Python serializer registers); both are
read. Imports resolve through the schema's references, or to the well-known files Python's
protobuf ships (``google/protobuf/*.proto``; ``google/type/*.proto`` when
googleapis-common-protos is installed). Each writer schema gets a pool of its own: two
versions of one file declare the same names.

The Arrow type follows Spark's ``from_protobuf`` (spark-protobuf's SchemaConverters) with
``upcast.unsigned.ints`` on, so no value is lost: uint32/fixed32 are int64, uint64/fixed64
are decimal(20, 0).
"""

from __future__ import annotations

import base64
import binascii
import importlib
import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from google.protobuf import descriptor, descriptor_pb2, descriptor_pool, message_factory

from ..errors import ConfigError
from . import proto_text
from .schemas import RegisteredSchema, SchemaLookup

_F = descriptor.FieldDescriptor

#: Scalar field types to Arrow (Spark's IntegerType, LongType, ... as Arrow types).
SCALAR_ARROW: dict[int, pa.DataType] = {
    _F.TYPE_INT32: pa.int32(), _F.TYPE_SINT32: pa.int32(), _F.TYPE_SFIXED32: pa.int32(),
    _F.TYPE_UINT32: pa.int64(), _F.TYPE_FIXED32: pa.int64(),
    _F.TYPE_INT64: pa.int64(), _F.TYPE_SINT64: pa.int64(), _F.TYPE_SFIXED64: pa.int64(),
    _F.TYPE_UINT64: pa.decimal128(20, 0), _F.TYPE_FIXED64: pa.decimal128(20, 0),
    _F.TYPE_FLOAT: pa.float32(), _F.TYPE_DOUBLE: pa.float64(), _F.TYPE_BOOL: pa.bool_(),
    _F.TYPE_STRING: pa.string(), _F.TYPE_BYTES: pa.binary(), _F.TYPE_ENUM: pa.string(),
}
TIMESTAMP = "google.protobuf.Timestamp"
DURATION = "google.protobuf.Duration"
TIMESTAMP_ARROW = pa.timestamp("us", tz="UTC")
DURATION_ARROW = pa.duration("us")

#: Files some registries treat as built in (no reference), with the messages they declare.
_BUILTIN_TEXT = {
    # Confluent's field metadata; only its options use it, and options are dropped.
    "confluent/meta.proto": 'syntax = "proto3"; package confluent; '
                            "message Meta { string doc = 1; map<string, string> params = 2; "
                            "repeated string tags = 3; }",
}

_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")


@dataclass(frozen=True)
class ProtoFile:
    """A schema's main file, ready to parse messages: its pool holds its imports too."""

    schema: RegisteredSchema
    file: descriptor.FileDescriptor
    proto: descriptor_pb2.FileDescriptorProto

    def message(self, indexes: list[int]) -> descriptor.Descriptor:
        """The message a Confluent message-index path names (first index: a top-level
        message; the rest: nested ones)."""
        protos = self.proto.message_type
        name = self.proto.package
        for index in indexes:
            if not 0 <= index < len(protos):
                raise LookupError(f"message index path {indexes} names no message in the "
                                  "writer schema")
            name = f"{name}.{protos[index].name}" if name else protos[index].name
            protos = protos[index].nested_type
        return self.file.pool.FindMessageTypeByName(name)

    def named(self, name: str | None) -> tuple[descriptor.Descriptor, list[int]]:
        """The message called ``name`` (full or short; None: the file's first message) and
        its index path."""
        if not self.proto.message_type:
            raise ConfigError(f"Protobuf schema id {self.schema.id} declares no message; "
                              "register a .proto file with a message")
        if name is None:
            return self.message([0]), [0]
        found: list[tuple[str, list[int]]] = []

        def walk(prefix: str, protos: Any, path: list[int]) -> None:
            for i, proto in enumerate(protos):
                full = f"{prefix}.{proto.name}" if prefix else proto.name
                found.append((full, path + [i]))
                walk(full, proto.nested_type, path + [i])

        walk(self.proto.package, self.proto.message_type, [])
        for full, path in found:
            if name in (full, full.rsplit(".", 1)[-1]):
                return self.message(path), path
        names = ", ".join(full for full, _ in found)
        raise ConfigError(f"Protobuf schema id {self.schema.id} has no message {name!r}; "
                          f"it declares {names}")

    def message_class(self, desc: descriptor.Descriptor) -> Any:
        return message_factory.GetMessageClass(desc)


def _serialized(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """A base64 ``FileDescriptorProto`` (as Confluent's Python client registers), else
    None for .proto text."""
    if not _BASE64.fullmatch(text):
        return None
    try:
        proto = descriptor_pb2.FileDescriptorProto.FromString(
            base64.b64decode("".join(text.split()), validate=True))
    except (binascii.Error, ValueError, Exception):  # DecodeError is not a ValueError
        return None
    return proto if proto.message_type or proto.enum_type else None


def _well_known(name: str) -> descriptor_pb2.FileDescriptorProto | None:
    if name in _BUILTIN_TEXT:
        return proto_text.parse(_BUILTIN_TEXT[name], name)
    if not name.startswith(("google/protobuf/", "google/type/")) or not name.endswith(
            ".proto"):
        return None
    module = name[:-len(".proto")].replace("/", ".") + "_pb2"
    try:
        file = importlib.import_module(module).DESCRIPTOR
    except ImportError:
        return None
    proto = descriptor_pb2.FileDescriptorProto()
    file.CopyToProto(proto)
    return proto


def _text_proto(text: str, name: str) -> descriptor_pb2.FileDescriptorProto:
    proto = _serialized(text)
    if proto is not None:
        proto.name = name
        return proto
    return proto_text.parse(text, name)


def load(schema: RegisteredSchema, lookup: SchemaLookup) -> ProtoFile:
    """The schema's file and its imports in a pool of their own. Raises ConfigError naming
    the schema id when the text does not parse or an import is missing."""
    files: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    order: list[str] = []
    main_name = f"eoskafka_schema_{schema.id}.proto"

    def add(name: str, text: str, source: RegisteredSchema | None,
            proto: descriptor_pb2.FileDescriptorProto | None = None) -> None:
        if name in files:
            return
        if proto is None:
            proto = _text_proto(text, name)
        files[name] = proto
        refs = {r.name: r for r in source.references} if source is not None else {}
        for dep in proto.dependency:
            if dep in files:
                continue
            if dep in refs:
                ref = refs[dep]
                referenced = lookup.version(ref.subject, ref.version)
                add(dep, referenced.text, referenced)
                continue
            known = _well_known(dep)
            if known is None:
                raise ConfigError(
                    f"Protobuf schema id {schema.id} imports {dep!r}, which is neither one "
                    "of its references nor a well-known file; register the schema with a "
                    f"reference named {dep!r}")
            add(dep, "", None, known)
        order.append(name)

    try:
        add(main_name, schema.text, schema)
        known: dict[str, int] = {}
        for proto in files.values():
            known.update(proto_text.declared_types(proto))
        for proto in files.values():
            proto_text.resolve(proto, known)
        pool = descriptor_pool.DescriptorPool()
        for name in order:
            pool.Add(files[name])
        file = pool.FindFileByName(main_name)
    except proto_text.ProtoSyntaxError as exc:
        raise ConfigError(f"Protobuf schema id {schema.id} does not parse: {exc}") from None
    except (TypeError, KeyError) as exc:
        raise ConfigError(f"Protobuf schema id {schema.id} is not a valid .proto file: "
                          f"{exc}") from None
    return ProtoFile(schema, file, files[main_name])


# --- message type -> Arrow ---------------------------------------------------------------

def is_map(field: descriptor.FieldDescriptor) -> bool:
    return (field.is_repeated and field.message_type is not None
            and field.message_type.GetOptions().map_entry)


def _element_type(field: descriptor.FieldDescriptor, seen: tuple[str, ...]) -> pa.DataType | None:
    """A field's Arrow type ignoring ``repeated``; None to drop it (an empty message, as
    Spark drops it)."""
    if field.type != _F.TYPE_MESSAGE:
        if field.type == _F.TYPE_GROUP:
            raise ConfigError(f"field {field.full_name} is a proto2 group, which eoskafka "
                              "does not read; use a message field")
        return SCALAR_ARROW[field.type]
    msg = field.message_type
    if msg.full_name == TIMESTAMP:
        return TIMESTAMP_ARROW
    if msg.full_name == DURATION:
        return DURATION_ARROW
    if msg.full_name in seen:
        raise ConfigError(f"field {field.full_name} makes message {msg.full_name} recursive, "
                          "which has no Arrow type; read the value as binary and decode it "
                          "yourself")
    struct = struct_type(msg, seen + (msg.full_name,))
    return struct if struct.num_fields else None


def field_type(field: descriptor.FieldDescriptor, seen: tuple[str, ...]) -> pa.DataType | None:
    if is_map(field):
        key = _element_type(field.message_type.fields_by_name["key"], seen)
        value = _element_type(field.message_type.fields_by_name["value"], seen)
        if key is None or value is None:
            return None
        return pa.map_(key, value)
    element = _element_type(field, seen)
    if element is None:
        return None
    return pa.list_(element) if field.is_repeated else element


def struct_type(msg: descriptor.Descriptor, seen: tuple[str, ...] | None = None) -> pa.StructType:
    """The Arrow struct of a message: its fields in declaration order, oneof members as
    ordinary nullable fields."""
    seen = seen if seen is not None else (msg.full_name,)
    fields = []
    for field in msg.fields:
        arrow = field_type(field, seen)
        if arrow is not None:
            fields.append(pa.field(field.name, arrow))
    return pa.struct(fields)


# --- Arrow -> .proto (auto.register.schemas) ---------------------------------------------

def _proto_scalar(arrow: pa.DataType, where: str) -> str:
    table = [(pa.types.is_int8, "int32"), (pa.types.is_int16, "int32"),
             (pa.types.is_int32, "int32"), (pa.types.is_int64, "int64"),
             (pa.types.is_float32, "float"), (pa.types.is_float64, "double"),
             (pa.types.is_boolean, "bool"), (pa.types.is_string, "string"),
             (pa.types.is_large_string, "string"), (pa.types.is_binary, "bytes"),
             (pa.types.is_large_binary, "bytes"), (pa.types.is_timestamp,
                                                   "google.protobuf.Timestamp"),
             (pa.types.is_duration, "google.protobuf.Duration")]
    for test, name in table:
        if test(arrow):
            return name
    raise ConfigError(f"column field {where} of type {arrow} has no Protobuf type; cast it "
                      "(a date or decimal to a string, say) before writing")


def schema_for(arrow_type: pa.DataType, *, name: str, namespace: str) -> str:
    """proto3 text for a column's type: a struct is a message (fields numbered in order;
    scalars ``optional`` so a null stays null), a list is ``repeated``, a map ``map<>``,
    timestamps Timestamp. Anything else is the single field ``value`` of the message."""
    imports: set[str] = set()
    if not pa.types.is_struct(arrow_type):
        arrow_type = pa.struct([pa.field("value", arrow_type)])

    def message(msg_name: str, struct: pa.StructType, indent: str, path: str) -> list[str]:
        lines = [f"{indent}message {msg_name} {{"]
        inner = indent + "  "
        for number, field in enumerate(struct, 1):
            where = f"{path}.{field.name}" if path else field.name
            label, typ = "optional ", field.type
            if pa.types.is_list(typ) or pa.types.is_large_list(typ):
                label, typ = "repeated ", typ.value_type
                if pa.types.is_list(typ) or pa.types.is_map(typ):
                    raise ConfigError(f"column field {where} is a list of lists or maps, "
                                      "which Protobuf has no type for; wrap the inner one "
                                      "in a struct")
            if pa.types.is_map(typ):
                key = _proto_scalar(typ.key_type, where)
                if key not in ("int32", "int64", "bool", "string"):
                    raise ConfigError(f"column field {where} is a map keyed by {typ.key_type};"
                                      " Protobuf map keys are integers, bools or strings")
                value = typ.item_type
                if pa.types.is_struct(value):
                    entry = _camel(field.name) + "Value"
                    lines += message(entry, value, inner, where)
                    value_name = entry
                else:
                    value_name = _proto_scalar(value, where)
                lines.append(f"{inner}map<{key}, {value_name}> {field.name} = {number};")
                _note_import(value_name, imports)
                continue
            if pa.types.is_struct(typ):
                nested = _camel(field.name)
                lines += message(nested, typ, inner, where)
                type_name = nested
                label = "repeated " if label == "repeated " else ""
            else:
                type_name = _proto_scalar(typ, where)
                _note_import(type_name, imports)
                if type_name.startswith("google.") and label != "repeated ":
                    label = ""
            lines.append(f"{inner}{label}{type_name} {field.name} = {number};")
        lines.append(f"{indent}}}")
        return lines

    body = message(name, arrow_type, "", "")
    head = ['syntax = "proto3";']
    if namespace:
        head.append(f"package {namespace};")
    head += [f'import "{path}";' for path in sorted(imports)]
    return "\n".join(head + [""] + body) + "\n"


def _note_import(type_name: str, imports: set[str]) -> None:
    if type_name == "google.protobuf.Timestamp":
        imports.add("google/protobuf/timestamp.proto")
    elif type_name == "google.protobuf.Duration":
        imports.add("google/protobuf/duration.proto")


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", name)
                   if part) or "Field"
