"""The .proto reader: what it builds is what protoc would (checked through the descriptor
pool and against the descriptors protoc generated for the well-known types)."""

from __future__ import annotations

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from eos_kafka_source.formats import proto_text

PROTO2 = r"""
// proto2, with what proto3 dropped
syntax = "proto2";
package a.b;
option java_package = "x.y";
option (my.custom) = { k: 1 nested { v: "}" } };

message Outer {
  option deprecated = true;
  required int32 id = 1;
  optional string name = 2 [default = "it's \"q\""];
  optional int64 big = 3 [default = -0x10];
  optional Kind kind = 4 [default = B];
  repeated int32 packed_nums = 5 [packed = true];
  optional Inner.Deep deep = 6;
  enum Kind { option allow_alias = true; A = 0; B = 1; BEE = 1; }
  message Inner {
    message Deep { optional .a.b.Outer.Kind k = 1; }
    optional Deep d = 1;
  }
  extensions 100 to 199;
  reserved 50, 60 to 70;
  reserved "gone";
  optional int32 octal = 7 [default = 017];
}
service S { rpc Get(Outer) returns (Outer); }
extend Outer { optional int32 ext = 100; }
"""


def _pool_class(text: str, message: str) -> type:
    proto = proto_text.parse(text, "t.proto")
    known = proto_text.declared_types(proto)
    ts = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(ts)
    known.update(proto_text.declared_types(ts))
    proto_text.resolve(proto, known)
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(message))


def test_proto2_labels_defaults_nesting_and_skipped_statements() -> None:
    cls = _pool_class(PROTO2, "a.b.Outer")
    msg = cls(id=1)
    assert msg.name == 'it\'s "q"' and msg.big == -16 and msg.octal == 15
    assert msg.kind == 1 and not msg.HasField("kind")
    fields = cls.DESCRIPTOR.fields_by_name
    assert fields["id"].is_required and fields["packed_nums"].is_packed
    assert fields["deep"].message_type.full_name == "a.b.Outer.Inner.Deep"
    deep = fields["deep"].message_type.fields_by_name["k"]
    assert deep.enum_type.full_name == "a.b.Outer.Kind"
    assert cls.FromString(msg.SerializeToString()) == msg


def test_proto3_optional_oneof_map_and_imports() -> None:
    text = """
    syntax = "proto3";
    import public "google/protobuf/timestamp.proto";
    /* several messages */
    message M {
      optional int32 a = 1;
      oneof choice { string s = 2; M n = 3; }
      map<string, M> my_map = 4;
      google.protobuf.Timestamp at = 5 [json_name = "when"];
      int32 plain = 6;
    }
    """
    cls = _pool_class(text, "M")
    fields = cls.DESCRIPTOR.fields_by_name
    assert fields["a"].has_presence and not fields["plain"].has_presence
    assert fields["s"].containing_oneof.name == "choice"
    assert [o.name for o in cls.DESCRIPTOR.oneofs] == ["choice", "_a"]  # synthetic last
    entry = fields["my_map"].message_type
    assert entry.name == "MyMapEntry" and entry.GetOptions().map_entry
    assert fields["at"].json_name == "when"
    msg = cls(a=0, my_map={"k": {"plain": 2}}, n={"s": "x"})
    back = cls.FromString(msg.SerializeToString())
    assert back.HasField("a") and back.my_map["k"].plain == 2 and back.n.s == "x"


def test_scalar_type_table_matches_protoc() -> None:
    """The timestamp descriptor protoc generated, and ours from the same text, agree."""
    text = ('syntax = "proto3"; package google.protobuf; '
            "message Timestamp { int64 seconds = 1; int32 nanos = 2; }")
    ours = proto_text.parse(text, "google/protobuf/timestamp.proto")
    theirs = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(theirs)
    assert [(f.name, f.number, f.type, f.label) for f in ours.message_type[0].field] == [
        (f.name, f.number, f.type, f.label) for f in theirs.message_type[0].field]


@pytest.mark.parametrize(("text", "why"), [
    ("message A { int32 a = 1 }", "line 1: expected ';'"),
    ('syntax = "proto4";', "is not proto2 or proto3"),
    ('edition = "2023";', "editions are not supported"),
    ("message A {\n  group G = 1 { }\n}", "line 2: proto2 groups"),
    ("message A { int32 a = x; }", "expected a number"),
    ("message A { int32 a = 1; ", "unexpected end"),
    ("message A { int32 a = 1; } $", "unexpected character '\\$'"),
])
def test_syntax_errors_name_the_line(text: str, why: str) -> None:
    with pytest.raises(proto_text.ProtoSyntaxError, match=why):
        proto_text.parse(text, "t.proto")


def test_unknown_type_is_named() -> None:
    proto = proto_text.parse("package p; message A { B b = 1; }", "t.proto")
    with pytest.raises(proto_text.ProtoSyntaxError, match="type 'B' of field A.b"):
        proto_text.resolve(proto, proto_text.declared_types(proto))
