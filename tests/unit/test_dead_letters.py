"""Dead letters: the source's ``deadLetter`` column (formats/dead_letter.py), the options on
both sides, and the sink's split into good rows and raw records for ``deadLetterTopic``
(sink/task/dead_letters.py). tests/formats/test_dead_letter_kafka.py runs it on Kafka."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from eos_kafka_source.errors import ConfigError, SchemaError
from eos_kafka_source.formats.dead_letter import dead_letter_type, dead_letters
from eos_kafka_source.formats.payload import Decoding
from eos_kafka_source.formats.plans import ReadPlan, SideRead
from eos_kafka_source.formats.resolve import read_schema
from eos_kafka_source.formats.schemas import AVRO, PERMISSIVE, Decoded, RegisteredSchema
from eos_kafka_source.options import SinkOptions, SourceOptions
from eos_kafka_source.records.decode import arrow_schema
from eos_kafka_source.sink.task.columns import unpack, validate
from eos_kafka_source.sink.task.dead_letters import (
    EXCEPTION_CLASS,
    HEADER_PREFIX,
    records,
    routed,
    split,
)
from eos_kafka_source.sink.task.partitioner import Router
from eos_kafka_source.source.partition_reader import arrow_schema_of
from eos_kafka_source.source.schema import kafka_schema

BOOT = {"kafka.bootstrap.servers": "b:9092"}
REG = {"schema.registry.url": "http://registry:8081"}
ORDER = pa.struct([pa.field("id", pa.int64())])
SCHEMA = RegisteredSchema(7, AVRO, "{}", "t-value", 1)
DL_ARROW = arrow_schema_of(StructType([StructField("deadLetter", dead_letter_type())])
                           ).field("deadLetter").type


# -- options -------------------------------------------------------------------------------


def _read(**options: str) -> SourceOptions:
    return SourceOptions.parse({**BOOT, "subscribe": "t", **options}, streaming=True)


def _write(**options: str) -> SinkOptions:
    return SinkOptions.parse({**BOOT, "topic": "out", **options})


def test_include_dead_letter_is_parsed_with_permissive_mode() -> None:
    fmt = _read(valueFormat="avro", mode="permissive", includeDeadLetter="true", **REG).formats
    assert fmt is not None and fmt.include_dead_letter and fmt.mode == PERMISSIVE


@pytest.mark.parametrize(("options", "needle"), [
    ({"valueFormat": "avro", **REG}, "needs mode=PERMISSIVE"),
    ({"valueFormat": "avro", "mode": "FAILFAST", **REG}, "needs mode=PERMISSIVE"),
    ({}, "includeDeadLetter only applies with valueFormat or keyFormat"),
    ({"valueFormat": "avro", "mode": "PERMISSIVE", **REG, "includeDeadLetter": "yes"},
     "includeDeadLetter must be true or false"),
], ids=["failfast default", "failfast", "raw", "not a bool"])
def test_include_dead_letter_refused_where_it_would_do_nothing(options, needle) -> None:
    with pytest.raises(ConfigError, match=needle):
        _read(includeDeadLetter="true", **options) if "includeDeadLetter" not in options \
            else _read(**options)


def test_dead_letter_topic_is_parsed_and_checked() -> None:
    assert _write(deadLetterTopic=" orders-dlq ").dead_letter_topic == "orders-dlq"
    assert _write().dead_letter_topic is None
    with pytest.raises(ConfigError, match="mixed with the good ones.*out-dlq"):
        _write(deadLetterTopic="out")
    with pytest.raises(ConfigError, match="deadLetterTopic: 'a b' is not a valid Kafka topic"):
        _write(deadLetterTopic="a b")
    with pytest.raises(ConfigError, match="did you mean 'deadLetterTopic'"):
        _write(deadLetterTopics="x")


# -- the sink's column check -----------------------------------------------------------------


def _schema(dead_letter: bool = True, dl_type=None) -> StructType:
    fields = [StructField("value", BinaryType())]
    if dead_letter:
        fields.append(StructField("deadLetter", dl_type or dead_letter_type()))
    return StructType(fields)


def test_the_column_and_the_topic_go_together() -> None:
    validate(_schema(), "out", (), "dlq")
    validate(_schema(False), "out")
    with pytest.raises(SchemaError, match="no deadLetterTopic.*option\\('deadLetterTopic'"):
        validate(_schema(), "out")
    with pytest.raises(SchemaError, match="includeDeadLetter', 'true'"):
        validate(_schema(False), "out", (), "dlq")


def test_a_column_of_another_shape_is_refused() -> None:
    with pytest.raises(SchemaError, match="has type string"):
        validate(_schema(dl_type=StringType()), "out", (), "dlq")
    no_error = StructType([StructField("value", BinaryType())])
    with pytest.raises(SchemaError, match="at least value binary and error string"):
        validate(_schema(dl_type=no_error), "out", (), "dlq")
    wrong = StructType([StructField("value", BinaryType()), StructField("error", StringType()),
                        StructField("offset", StringType())])
    with pytest.raises(SchemaError, match="at least value binary"):
        validate(_schema(dl_type=wrong), "out", (), "dlq")
    minimal = StructType([StructField("value", BinaryType()), StructField("error", StringType()),
                          StructField("offset", LongType())])
    validate(_schema(dl_type=minimal), "out", (), "dlq")


# -- the source's column -------------------------------------------------------------------


def _raw_batch(values: list[bytes | None], headers=None) -> pa.RecordBatch:
    rows = [{"key": f"k{i}".encode(), "value": v, "topic": "in", "partition": 2,
             "offset": 10 + i, "timestamp": 1_700_000_000_000_000 + i, "timestampType": 0,
             "headers": (headers or {}).get(i, [])}
            for i, v in enumerate(values)]
    return pa.RecordBatch.from_pylist(rows, schema=arrow_schema(True))


def test_no_error_costs_an_all_null_column() -> None:
    batch = _raw_batch([b"a", b"b"])
    column = dead_letters(batch, {"value": None}, DL_ARROW)
    assert column.null_count == 2 and column.type == DL_ARROW
    column = dead_letters(batch, {"value": pa.nulls(2, pa.string())}, DL_ARROW)
    assert column.null_count == 2


def test_failing_rows_keep_their_record_and_reason() -> None:
    batch = _raw_batch([b"ok", b"\x00bad", None, b"bad2"],
                       headers={1: [{"key": "h", "value": b"1"}]})
    value_errors = pa.array([None, "not Avro", None, "unknown id"], pa.string())
    key_errors = pa.array([None, None, None, "key broke"], pa.string())
    column = dead_letters(batch, {"value": value_errors, "key": key_errors}, DL_ARROW)
    got = column.to_pylist()
    assert got[0] is None and got[2] is None
    assert got[1]["value"] == b"\x00bad" and got[1]["key"] == b"k1"
    assert (got[1]["topic"], got[1]["partition"], got[1]["offset"]) == ("in", 2, 11)
    assert got[1]["headers"] == [{"key": "h", "value": b"1"}]
    assert got[1]["stage"] == "VALUE_CONVERTER" and got[1]["error"] == "not Avro"
    assert got[1]["timestamp"] is not None
    # Both sides failed: Connect converts the key first; both reasons are kept.
    assert got[3]["stage"] == "KEY_CONVERTER"
    assert got[3]["error"] == "key: key broke; value: unknown id"


class _Decoder:
    arrow_type = ORDER

    def decode(self, payloads: pa.Array, where) -> Decoded:
        ok = [p is None or p.startswith(b"o") for p in payloads.to_pylist()]
        rows = [{"id": i} if good and p is not None else None
                for i, (good, p) in enumerate(zip(ok, payloads.to_pylist(), strict=True))]
        errors = pa.array([None if good else f"bad at {where(i)}" for i, good in enumerate(ok)],
                          pa.string())
        return Decoded(pa.array(rows, ORDER), pa.array([7] * len(rows), pa.int32()), errors)


def test_a_permissive_read_adds_the_column_last() -> None:
    plan = ReadPlan((SideRead("value", "avro", SCHEMA, ORDER),), None, PERMISSIVE, False, True)
    schema = read_schema(kafka_schema(False), plan)
    assert schema.fieldNames()[-2:] == ["valueError", "deadLetter"]
    decoding = Decoding(plan, arrow_schema_of(schema))
    decoding._decoders = {"value": _Decoder()}  # type: ignore[dict-item]
    out = decoding.apply(_raw_batch([b"ok", b"xx"]))
    rows = out.to_pylist()
    assert rows[0]["deadLetter"] is None and rows[0]["value"] == {"id": 0}
    assert rows[1]["value"] is None and rows[1]["valueError"] == "bad at in-2 at offset 11"
    assert rows[1]["deadLetter"]["value"] == b"xx"
    assert rows[1]["deadLetter"]["error"] == rows[1]["valueError"]


# -- the sink's split ----------------------------------------------------------------------


def _sink_batch(n: int, dead: set[int]) -> pa.RecordBatch:
    source = _raw_batch([b"x" if i in dead else b"o" for i in range(n)])
    errors = pa.array([("bad" if i in dead else None) for i in range(n)], pa.string())
    column = dead_letters(source, {"value": errors}, DL_ARROW)
    return pa.RecordBatch.from_arrays(
        [pa.array([f"good{i}".encode() for i in range(n)]), column],
        names=["value", "deadLetter"])


def test_without_dead_letters_the_batch_passes_whole() -> None:
    batch = _sink_batch(3, set())
    out = list(routed([batch], "dlq", None))
    assert len(out) == 1 and out[0][1] is None
    assert out[0][0].schema.names == ["value"] and out[0][0].num_rows == 3


def test_good_rows_are_encoded_and_dead_letters_go_raw_to_their_topic() -> None:
    batch = _sink_batch(5, {1, 3})
    encoded: list[int] = []

    def encode(b: pa.RecordBatch) -> pa.RecordBatch:
        encoded.append(b.num_rows)
        return b

    out = list(routed([batch], "dlq", encode))
    assert encoded == [3]  # only the good rows reach the encoder
    (good, no_topic), (dead, topic) = out
    assert no_topic is None and topic == "dlq"
    assert good.column("value").to_pylist() == [b"good0", b"good2", b"good4"]
    assert dead.column("value").to_pylist() == [b"x", b"x"]
    assert dead.column("key").to_pylist() == [b"k1", b"k3"]
    assert len(good) + len(dead) == 5


def test_only_dead_letters_give_no_good_batch() -> None:
    out = list(routed([_sink_batch(2, {0, 1})], "dlq", None))
    assert [t for _, t in out] == ["dlq"]


def test_a_dead_letter_carries_connects_context_headers() -> None:
    source = _raw_batch([b"x"], headers={0: [{"key": "trace", "value": b"t1"}]})
    column = dead_letters(source, {"value": pa.array(["not Avro"], pa.string())}, DL_ARROW)
    dead = records(column)
    (headers,) = dead.column("headers").to_pylist()
    assert headers[0] == {"key": "trace", "value": b"t1"}  # the record's own, first
    context = {h["key"]: h["value"] for h in headers[1:]}
    assert context == {
        HEADER_PREFIX + "topic": b"in", HEADER_PREFIX + "partition": b"2",
        HEADER_PREFIX + "offset": b"10", HEADER_PREFIX + "stage": b"VALUE_CONVERTER",
        HEADER_PREFIX + "exception.class.name": EXCEPTION_CLASS.encode(),
        HEADER_PREFIX + "exception.message": b"not Avro",
    }
    assert HEADER_PREFIX == "__connect.errors."
    # What the writer makes of it: the original timestamp, in milliseconds.
    rows = unpack(dead)
    assert rows.timestamps_ms is not None and rows.timestamps_ms.to_pylist() == [1_700_000_000_000]
    assert rows.keys == [b"k0"] and rows.headers is not None and len(rows.headers[0]) == 7


def test_a_context_header_the_record_has_is_not_added_again() -> None:
    """A dead letter read again (a dead-letter topic copied through): Connect keeps the
    first context and adds no second header of the same name."""
    mine = [{"key": HEADER_PREFIX + "topic", "value": b"first"}]
    source = _raw_batch([b"x"], headers={0: mine})
    dead = records(dead_letters(source, {"value": pa.array(["e"], pa.string())}, DL_ARROW))
    (headers,) = dead.column("headers").to_pylist()
    topics = [h["value"] for h in headers if h["key"] == HEADER_PREFIX + "topic"]
    assert topics == [b"first"]


def test_a_user_built_dead_letter_gets_connects_unknown_origin() -> None:
    dl = pa.StructArray.from_arrays([pa.array([b"v"]), pa.array(["why"])],
                                    names=["value", "error"])
    (headers,) = records(dl).column("headers").to_pylist()
    context = {h["key"]: h["value"] for h in headers}
    assert context[HEADER_PREFIX + "topic"] == b""
    assert context[HEADER_PREFIX + "partition"] == b"-1"
    assert context[HEADER_PREFIX + "offset"] == b"-1"


def test_split_drops_the_column_from_the_good_rows() -> None:
    good, dead = split(_sink_batch(3, {2}))
    assert good is not None and good.schema.names == ["value"] and good.num_rows == 2
    assert dead is not None and len(dead) == 1


def test_the_router_sends_every_dead_letter_to_its_topic() -> None:
    """Over the topic option and a topic column alike."""
    router = Router("out", lambda _: 3, start=0)
    rows = unpack(pa.RecordBatch.from_pydict({"value": [b"a", b"b"], "topic": ["x", "y"]}))
    assert {tp[0] for tp, _ in router.route(rows, 4, "dlq")} == {"dlq"}
    assert {tp[0] for tp, _ in router.route(rows, 4)} == {"out"}
    column_router = Router(None, lambda _: 3, start=0)
    assert {tp[0] for tp, _ in column_router.route(rows, 4, "dlq")} == {"dlq"}
    assert {tp[0] for tp, _ in column_router.route(rows, 4)} == {"x", "y"}
