"""A .proto file's text to a ``FileDescriptorProto``, without protoc.

A registry holds a Protobuf schema as .proto text (references name its imports), and
Python's protobuf reads only descriptors. Rather than ship protoc (grpcio-tools, a native
wheel pinned to one protobuf range), this reads the part of the language a message schema
uses: proto2 and proto3 syntax, packages, imports, nested messages and enums, scalar, message
and enum fields, ``repeated``, ``optional`` (proto3 presence), ``required``, ``map<K, V>``,
``oneof``, field defaults, ``packed``, ``json_name``, ``reserved`` and ``allow_alias``. Other
options, services and extensions are read past and dropped: they do not change the bytes of a
message. Type names are resolved here with protoc's scoping rules, so a typo fails with the
name rather than inside the descriptor pool. ``DescriptorPool.Add`` then checks the rest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from google.protobuf import descriptor_pb2

_F = descriptor_pb2.FieldDescriptorProto

SCALARS = {
    "double": _F.TYPE_DOUBLE, "float": _F.TYPE_FLOAT, "int64": _F.TYPE_INT64,
    "uint64": _F.TYPE_UINT64, "int32": _F.TYPE_INT32, "fixed64": _F.TYPE_FIXED64,
    "fixed32": _F.TYPE_FIXED32, "bool": _F.TYPE_BOOL, "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES, "uint32": _F.TYPE_UINT32, "sfixed32": _F.TYPE_SFIXED32,
    "sfixed64": _F.TYPE_SFIXED64, "sint32": _F.TYPE_SINT32, "sint64": _F.TYPE_SINT64,
}

_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>[-+]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?))
  | (?P<ident>\.?[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<symbol>[{}\[\]()<>=;,:.\-+/])
""", re.VERBOSE | re.DOTALL)


class ProtoSyntaxError(ValueError):
    """The text is not a .proto file this reader understands (the message says where)."""


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out: list[tuple[str, str, int]] = []
    pos, line = 0, 1
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ProtoSyntaxError(f"line {line}: unexpected character {text[pos]!r}")
        kind = match.lastgroup or ""
        value = match.group()
        if kind != "space":
            out.append((kind, value, line))
        line += value.count("\n")
        pos = match.end()
    return out


def _unquote(token: str) -> str:
    body = token[1:-1]
    if "\\" not in body:
        return body
    return body.encode("latin-1", "backslashreplace").decode("unicode_escape")


def _camel(name: str) -> str:
    """protoc's map entry name: ``my_map`` -> ``MyMapEntry`` (without the suffix)."""
    parts = name.split("_")
    out = "".join(p[:1].upper() + p[1:] for p in parts)
    return out[:1].upper() + out[1:]


class _Parser:
    def __init__(self, text: str, name: str) -> None:
        self.toks = _tokens(text)
        self.pos = 0
        self.file = descriptor_pb2.FileDescriptorProto(name=name)
        self.file.syntax = "proto2"

    # -- token helpers --------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> str:
        at = self.pos + ahead
        return self.toks[at][1] if at < len(self.toks) else ""

    def next(self) -> str:
        if self.pos >= len(self.toks):
            raise ProtoSyntaxError("unexpected end of the file")
        self.pos += 1
        return self.toks[self.pos - 1][1]

    def kind(self) -> str:
        return self.toks[self.pos][0] if self.pos < len(self.toks) else ""

    def fail(self, what: str) -> ProtoSyntaxError:
        line = self.toks[min(self.pos, len(self.toks) - 1)][2] if self.toks else 1
        found = repr(self.peek()) if self.pos < len(self.toks) else "the unexpected end"
        return ProtoSyntaxError(f"line {line}: {what} (found {found})")

    def expect(self, value: str) -> None:
        if self.peek() != value:
            raise self.fail(f"expected {value!r}")
        self.pos += 1

    def ident(self) -> str:
        if self.kind() != "ident":
            raise self.fail("expected a name")
        return self.next()

    def integer(self) -> int:
        if self.kind() != "number":
            raise self.fail("expected a number")
        text = self.next()
        digits = text.lstrip("-+")
        sign = -1 if text.startswith("-") else 1
        try:
            if digits[:2].lower() == "0x":
                return sign * int(digits[2:], 16)
            if len(digits) > 1 and digits.startswith("0"):
                return sign * int(digits[1:], 8)
            return sign * int(digits)
        except ValueError as exc:
            raise self.fail(f"{text!r} is not an integer") from exc

    def skip_statement(self) -> None:
        """Skip to the end of a statement or a balanced block."""
        depth = 0
        while True:
            tok = self.next()
            if tok in "{[(<" and tok:
                depth += 1
            elif tok in "}])>" and tok:
                depth -= 1
                if depth == 0 and tok == "}":
                    return
            elif tok == ";" and depth == 0:
                return

    def constant(self) -> str:
        """An option's value as text (strings unquoted; aggregates skipped)."""
        if self.peek() == "{":
            self.skip_statement()
            return ""
        kind, tok = self.kind(), self.next()
        if kind == "string":
            value = _unquote(tok)
            while self.kind() == "string":  # adjacent literals concatenate
                value += _unquote(self.next())
            return value
        if tok in ("-", "+"):
            return tok + self.next()
        return tok

    def option_name(self) -> str:
        name = ""
        while self.peek() not in ("=", ""):
            name += self.next()
        return name

    # -- grammar --------------------------------------------------------------------------
    def parse(self) -> descriptor_pb2.FileDescriptorProto:
        while self.pos < len(self.toks):
            tok = self.peek()
            if tok == "syntax":
                self.next()
                self.expect("=")
                syntax = self.constant()
                if syntax not in ("proto2", "proto3"):
                    raise self.fail(f"syntax {syntax!r} is not proto2 or proto3")
                self.file.syntax = syntax
                self.expect(";")
            elif tok == "edition":
                raise self.fail("Protobuf editions are not supported; use proto2 or proto3")
            elif tok == "package":
                self.next()
                self.file.package = self.ident().lstrip(".")
                self.expect(";")
            elif tok == "import":
                self.next()
                kind = self.peek()
                if kind in ("public", "weak"):
                    self.next()
                if self.kind() != "string":
                    raise self.fail("expected the imported file's name")
                index = len(self.file.dependency)
                self.file.dependency.append(_unquote(self.next()))
                if kind == "public":
                    self.file.public_dependency.append(index)
                self.expect(";")
            elif tok == "option":
                self.next()
                self.option_name()
                self.expect("=")
                self.constant()
                self.expect(";")
            elif tok == "message":
                self.next()
                self.message(self.file.message_type.add())
            elif tok == "enum":
                self.next()
                self.enum(self.file.enum_type.add())
            elif tok in ("service", "extend"):
                self.skip_statement()
            elif tok == ";":
                self.next()
            else:
                raise self.fail("expected syntax, package, import, option, message or enum")
        return self.file

    def message(self, msg: descriptor_pb2.DescriptorProto) -> None:
        msg.name = self.ident()
        self.expect("{")
        synthetic: list[tuple[Any, str]] = []
        while self.peek() != "}":
            self.member(msg, synthetic, oneof=None)
        self.next()
        # proto3 `optional` fields each get a synthetic oneof, after the real ones.
        for field, name in synthetic:
            field.oneof_index = len(msg.oneof_decl)
            msg.oneof_decl.add(name=name)

    def member(self, msg: descriptor_pb2.DescriptorProto,
               synthetic: list[tuple[Any, str]], oneof: int | None) -> None:
        tok = self.peek()
        block = self.peek(2) == "{"  # `message Foo {`, not a field of a type named so
        if tok == "message" and block:
            self.next()
            self.message(msg.nested_type.add())
        elif tok == "enum" and block:
            self.next()
            self.enum(msg.enum_type.add())
        elif tok == "oneof" and block and oneof is None:
            self.next()
            index = len(msg.oneof_decl)
            msg.oneof_decl.add(name=self.ident())
            self.expect("{")
            while self.peek() != "}":
                self.member(msg, synthetic, oneof=index)
            self.next()
        elif tok in ("reserved", "extensions", "extend", "option"):
            self.skip_statement()
        elif tok == ";":
            self.next()
        else:
            self.field(msg, synthetic, oneof)

    def field(self, msg: descriptor_pb2.DescriptorProto,
              synthetic: list[tuple[Any, str]], oneof: int | None) -> None:
        field = msg.field.add()
        label = self.peek()
        explicit_optional = False
        if label in ("repeated", "optional", "required") and self.peek(2) != "=":
            self.next()
            field.label = {"repeated": _F.LABEL_REPEATED, "optional": _F.LABEL_OPTIONAL,
                           "required": _F.LABEL_REQUIRED}[label]
            explicit_optional = label == "optional"
        else:
            field.label = _F.LABEL_OPTIONAL
        if self.peek() == "group":
            raise self.fail("proto2 groups are not supported")
        if self.peek() == "map" and self.peek(1) == "<":
            self.next()
            self.next()
            key = self.ident()
            self.expect(",")
            value = self.ident()
            self.expect(">")
            field.name = self.ident()
            entry = msg.nested_type.add(name=_camel(field.name) + "Entry")
            entry.options.map_entry = True
            for number, (name, type_name) in enumerate((("key", key), ("value", value)), 1):
                sub = entry.field.add(name=name, number=number, label=_F.LABEL_OPTIONAL)
                self._type(sub, type_name)
            field.label = _F.LABEL_REPEATED
            field.type_name = entry.name
            field.type = _F.TYPE_MESSAGE
        else:
            self._type(field, self.ident())
            field.name = self.ident()
        self.expect("=")
        field.number = self.integer()
        if self.peek() == "[":
            self.next()
            while True:
                name = self.option_name()
                self.expect("=")
                value = self.constant()
                if name == "default":
                    field.default_value = value
                elif name == "packed":
                    field.options.packed = value == "true"
                elif name == "json_name":
                    field.json_name = value
                elif name == "deprecated":
                    field.options.deprecated = value == "true"
                if self.peek() == ",":
                    self.next()
                    continue
                self.expect("]")
                break
        self.expect(";")
        if oneof is not None:
            field.oneof_index = oneof
        elif explicit_optional and self.file.syntax == "proto3":
            field.proto3_optional = True
            name = "_" + field.name
            while any(o.name == name for o in msg.oneof_decl) or any(
                    n == name for _, n in synthetic):
                name = "X" + name
            synthetic.append((field, name))

    def _type(self, field: Any, name: str) -> None:
        if name in SCALARS:
            field.type = SCALARS[name]  # type: ignore[assignment]
        else:
            field.type_name = name  # resolved in resolve()

    def enum(self, enum: descriptor_pb2.EnumDescriptorProto) -> None:
        enum.name = self.ident()
        self.expect("{")
        while self.peek() != "}":
            tok = self.peek()
            if tok == "option":
                self.next()
                name = self.option_name()
                self.expect("=")
                value = self.constant()
                if name == "allow_alias":
                    enum.options.allow_alias = value == "true"
                self.expect(";")
            elif tok == "reserved":
                self.skip_statement()
            elif tok == ";":
                self.next()
            else:
                value_name = self.ident()
                self.expect("=")
                enum.value.add(name=value_name, number=self.integer())
                if self.peek() == "[":
                    while self.next() != "]":
                        pass
                self.expect(";")
        self.next()


def _declared(prefix: str, messages: Iterable[descriptor_pb2.DescriptorProto],
              enums: Iterable[descriptor_pb2.EnumDescriptorProto],
              out: dict[str, int]) -> None:
    for enum in enums:
        out[f"{prefix}.{enum.name}"] = _F.TYPE_ENUM
    for msg in messages:
        full = f"{prefix}.{msg.name}"
        out[full] = _F.TYPE_MESSAGE
        _declared(full, msg.nested_type, msg.enum_type, out)


def declared_types(file: descriptor_pb2.FileDescriptorProto) -> dict[str, int]:
    """Every message and enum a file declares, by full name with a leading dot."""
    out: dict[str, int] = {}
    _declared("." + file.package if file.package else "", file.message_type, file.enum_type,
              out)
    return out


def _resolve(name: str, scope: str, known: dict[str, int]) -> str | None:
    if name.startswith("."):
        return name if name in known else None
    first, _, rest = name.partition(".")
    parts = scope.split(".")
    while True:
        base = ".".join(parts)
        candidate = f"{base}.{first}"
        # protoc: the first component binds to the innermost scope declaring it (a
        # package counts), then the rest must resolve within it.
        if candidate in known or any(k.startswith(candidate + ".") for k in known):
            full = f"{candidate}.{rest}" if rest else candidate
            return full if full in known else None
        if not parts or parts == [""]:
            return None
        parts.pop()


def resolve(file: descriptor_pb2.FileDescriptorProto, known: dict[str, int]) -> None:
    """Make every field's type name full (leading dot) and set its type; ``known`` is
    :func:`declared_types` of the file and all it imports."""

    def visit(scope: str, msg: descriptor_pb2.DescriptorProto) -> None:
        here = f"{scope}.{msg.name}"
        for field in msg.field:
            if field.type_name and not field.type_name.startswith("."):
                full = _resolve(field.type_name, here, known)
                if full is None:
                    raise ProtoSyntaxError(
                        f"type {field.type_name!r} of field {msg.name}.{field.name} is not "
                        "declared in the file or its imports")
                field.type_name = full
                field.type = known[full]  # type: ignore[assignment]
        for nested in msg.nested_type:
            visit(here, nested)

    root = "." + file.package if file.package else ""
    for msg in file.message_type:
        visit(root, msg)


def parse(text: str, name: str) -> descriptor_pb2.FileDescriptorProto:
    """The descriptor of one .proto file, type names not yet resolved (see :func:`resolve`).

    Raises :class:`ProtoSyntaxError` naming the line.
    """
    return _Parser(text, name).parse()
