"""Confluent's wire format: headers split column-wise, message indexes as Confluent writes them."""

from __future__ import annotations

import json
import random
import struct
from io import BytesIO

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.common.serde import SchemaId
from confluent_kafka.serialization import MessageField, SerializationContext

from eos_kafka_source.formats import framing
from eos_kafka_source.formats.framing import BAD_MAGIC, NULL, OK, TOO_SHORT


def test_split_marks_each_kind_of_row() -> None:
    rows = [b"\x00\x00\x00\x00\x07body", None, b"\x00\x00\x00", b"\x01\x00\x00\x00\x07x",
            b"", b"\x00\xff\xff\xff\xfe", b"\x00\x00\x01\x00\x00"]
    framed = framing.split(pa.array(rows, pa.binary()))
    assert framed.state.tolist() == [OK, NULL, TOO_SHORT, BAD_MAGIC, TOO_SHORT, OK, OK]
    assert framed.id_array().to_pylist() == [7, None, None, None, None, -2, 65536]
    assert framed.body(0) == b"body" and framed.body(5) == b"" and framed.body(6) == b""


def test_split_a_sliced_chunked_large_column() -> None:
    rng = random.Random(3)
    rows = [None if i % 11 == 0 else framing.header(i) + rng.randbytes(i % 9)
            for i in range(1000)]
    arr = pa.chunked_array([pa.array(rows[:400], pa.large_binary()),
                            pa.array(rows[400:], pa.large_binary())])
    framed = framing.split(arr)
    assert framed.id_array().to_pylist() == [None if r is None else i
                                             for i, r in enumerate(rows)]
    assert [framed.body(i) for i in range(1000) if rows[i] is not None] == \
        [r[5:] for r in rows if r is not None]
    sliced = framing.split(pa.array(rows, pa.binary()).slice(37, 100))
    assert sliced.id_array().to_pylist() == [None if r is None else i + 37
                                             for i, r in enumerate(rows[37:137])]
    assert sliced.body(1) == rows[38][5:]  # type: ignore[index]


def test_split_of_nothing_and_of_all_nulls() -> None:
    assert len(framing.split(pa.array([], pa.binary()))) == 0
    framed = framing.split(pa.array([None, None], pa.binary()))
    assert framed.state.tolist() == [NULL, NULL]


def test_header_is_magic_and_big_endian_id() -> None:
    assert framing.header(1) == b"\x00\x00\x00\x00\x01"
    assert framing.header(0x01020304) == b"\x00\x01\x02\x03\x04"
    assert framing.header(5, [0]) == b"\x00\x00\x00\x00\x05\x00"


def test_confluent_avro_serializer_bytes_split() -> None:
    """Genuine bytes from Confluent's serializer (its mock registry gives the ids)."""
    client = SchemaRegistryClient.new_client({"url": "mock://framing"})
    schema = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
    client.register_schema("other-value", _schema(
        json.dumps({"type": "record", "name": "O", "fields": []})))
    ser = AvroSerializer(client, schema)
    payload = ser({"a": 3}, SerializationContext("t", MessageField.VALUE))
    assert payload is not None
    schema_id = client.get_latest_version("t-value").schema_id
    framed = framing.split(pa.array([payload], pa.binary()))
    assert framed.id_array().to_pylist() == [schema_id]
    assert framed.body(0) == b"\x06"  # zigzag 3


def _schema(text: str, kind: str = "AVRO") -> object:
    from confluent_kafka.schema_registry import Schema

    return Schema(text, kind)


@pytest.mark.parametrize("indexes", [[0], [1], [0, 0], [2, 5, 1], [63], [64], [127], [300, 0],
                                     list(range(20))])
def test_message_indexes_as_confluent_writes_and_reads_them(indexes: list[int]) -> None:
    """Confluent's SchemaId (its serializers' and deserializers' header code) is the oracle."""
    theirs = SchemaId("PROTOBUF", 9, message_indexes=indexes).id_to_bytes()
    assert framing.header(9, indexes) == theirs
    ours = framing.write_message_indexes(indexes)
    assert framing.read_message_indexes(ours + b"rest") == (indexes, len(ours))
    read_back = SchemaId("PROTOBUF")
    rest = read_back.from_bytes(BytesIO(framing.header(9, indexes) + b"rest"))
    assert (read_back.id, read_back.message_indexes, rest.read()) == (9, indexes, b"rest")


def test_message_indexes_known_bytes() -> None:
    assert framing.write_message_indexes([0]) == b"\x00"
    assert framing.write_message_indexes([1]) == b"\x02\x02"  # count 1, index 1 (zigzag)
    assert framing.write_message_indexes([0, 2]) == b"\x04\x00\x04"


@pytest.mark.parametrize("bad", [b"", b"\x02", b"\x80", b"\x04\x02", b"\x01",
                                 b"\xff" * 11])
def test_message_indexes_that_do_not_parse(bad: bytes) -> None:
    with pytest.raises(ValueError):
        framing.read_message_indexes(bad)


def test_split_message_indexes_column_wise() -> None:
    rows = [framing.header(1, [0]) + b"a", framing.header(2, [3, 1]) + b"bc", None,
            framing.header(3) + b"\x05", b"\x00\x00\x00\x00\x04"]
    framed = framing.split(pa.array(rows, pa.binary()))
    indexes, starts = framing.split_message_indexes(framed)
    assert indexes == [[0], [3, 1], None, None, None]
    assert framed.data[starts[0]:framed.end[0]].tobytes() == b"a"
    assert framed.data[starts[1]:framed.end[1]].tobytes() == b"bc"
    assert struct.unpack(">bi", rows[0][:5]) == (0, 1)  # type: ignore[index]
