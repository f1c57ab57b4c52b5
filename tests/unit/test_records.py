"""The v2 record-batch codec: round trips, kafka-python cross-checks, both codec paths."""

from __future__ import annotations

import struct
from datetime import UTC, datetime, timedelta

import crc32c
import pyarrow as pa
import pytest
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaPythonBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from eos_kafka_source.errors import CorruptRecordError, SchemaError
from eos_kafka_source.records import (
    BatchHeader,
    ColumnBuilder,
    _fast,
    control_is_commit,
    encode_batch,
    encode_control_batch,
    iter_batches,
    last_offset,
)
from eos_kafka_source.records.encode import compress
from eos_kafka_source.records.header import HEADER_SIZE, decompress

ALL = (0, 2**62)
TS = 1_700_000_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@pytest.fixture(params=["pure", "fast"])
def pure(request: pytest.FixtureRequest) -> bool:
    """Run a test over the pure-Python codec and over aiokafka's compiled one."""
    if request.param == "fast" and not _fast.AVAILABLE:
        pytest.skip("aiokafka's compiled record codec does not import")
    return request.param == "pure"


def decode(
    buf: bytes, pure: bool, start: int = 0, end: int = 2**62, include_headers: bool = True
) -> list[dict]:
    builder = ColumnBuilder("events", 3, include_headers, pure=pure)
    assert builder.fast is not pure
    for header, batch in iter_batches(buf, check_crc=True):
        builder.add_batch(header, batch, start, end)
    return builder.to_arrow().to_pylist()


def with_attributes(batch: bytes, attributes: int) -> bytes:
    """Rewrite a batch's attributes and fix its CRC (forging what brokers could send)."""
    out = bytearray(batch)
    struct.pack_into(">h", out, 21, attributes)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def test_fast_path_is_available_with_pinned_aiokafka() -> None:
    # Fails when aiokafka moves its private compiled module: the fast path must be re-pinned.
    assert _fast.AVAILABLE


def test_round_trip_columns(pure: bool) -> None:
    keys = [None, b"k1", b"", b"k" * 300]
    values = [b"v0", None, b"", b"x" * 20_000]
    stamps = [TS + 5, TS, TS - 3, TS + 70_000]
    headers = [[], [("h", b"x"), ("n", None)], [("ünï", b"")], []]
    buf = encode_batch(keys, values, stamps, headers, base_offset=40, pure=pure)
    rows = decode(buf, pure)
    assert [r["key"] for r in rows] == keys
    assert [r["value"] for r in rows] == values
    assert [r["offset"] for r in rows] == [40, 41, 42, 43]
    assert {(r["topic"], r["partition"], r["timestampType"]) for r in rows} == {("events", 3, 0)}
    assert [r["headers"] for r in rows] == [
        None,
        [{"key": "h", "value": b"x"}, {"key": "n", "value": None}],
        [{"key": "ünï", "value": b""}],
        None,
    ]
    micros = ColumnBuilder("events", 3, False, pure=pure)
    for header, batch in iter_batches(buf):
        micros.add_batch(header, batch, *ALL)
    column = micros.to_arrow().column("timestamp")
    assert column.type == pa.timestamp("us", tz="UTC")
    assert column.cast(pa.int64()).to_pylist() == [t * 1000 for t in stamps]


def test_header_preserves_producer_fields(pure: bool) -> None:
    buf = encode_batch(
        [None] * 3, [b"a", b"b", b"c"], [TS + 2, TS, TS + 9],
        producer_id=4242, producer_epoch=7, base_sequence=100, transactional=True,
        base_offset=1_000, pure=pure,
    )  # fmt: skip
    [(header, batch)] = list(iter_batches(buf, check_crc=True))
    assert header == BatchHeader(
        base_offset=1_000, last_offset=1_002, batch_length=len(buf), partition_leader_epoch=-1,
        attributes=0x10, producer_id=4242, producer_epoch=7, base_sequence=100, record_count=3,
        first_timestamp=TS + 2, max_timestamp=TS + 9,
    )  # fmt: skip
    assert header.is_transactional and not header.is_control
    assert (header.compression, header.timestamp_type) == (0, 0)
    assert bytes(batch) == buf


def test_non_transactional_defaults(pure: bool) -> None:
    [(header, _)] = list(iter_batches(encode_batch([None], [b"v"], TS, pure=pure)))
    assert not header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, -1)


def test_pure_and_fast_encoders_write_identical_bytes() -> None:
    args = ([None, b"k"], [b"v" * 200, None], [TS, TS + 1], [[("a", b"1")], []])
    kwargs = dict(producer_id=1, producer_epoch=2, base_sequence=3, transactional=True)
    assert encode_batch(*args, **kwargs, pure=True) == encode_batch(*args, **kwargs, pure=False)


@pytest.mark.parametrize("include_headers", [False, True])
def test_offset_range_filtering(pure: bool, include_headers: bool) -> None:
    buf = encode_batch([None] * 10, [b"%d" % i for i in range(10)], TS, base_offset=100, pure=pure)
    rows = decode(buf, pure, 103, 107, include_headers)
    assert [r["offset"] for r in rows] == [103, 104, 105, 106]
    assert [r["value"] for r in rows] == [b"3", b"4", b"5", b"6"]
    assert decode(buf, pure, 110, 200) == []
    assert decode(buf, pure, 0, 100) == []
    [(header, batch)] = list(iter_batches(buf))
    assert ColumnBuilder("t", 0, include_headers, pure=pure).add_batch(header, batch, 0, 101) == 1


def test_many_records_and_long_varints(pure: bool) -> None:
    n = 20_000  # offset deltas beyond the encoder's varint cache, 3-byte varints
    values = [b"%d" % i for i in range(n)]
    buf = encode_batch([None] * n, values, list(range(TS, TS + n)), pure=pure)
    rows = decode(buf, pure, include_headers=False)
    assert [r["value"] for r in rows] == values
    assert rows[-1]["offset"] == n - 1


@pytest.mark.parametrize("encoder_pure", [True, False])
def test_gzip(pure: bool, encoder_pure: bool) -> None:
    values = [b"abc" * 50] * 100
    buf = encode_batch([b"k"] * 100, values, TS, compression=1, base_offset=9, pure=encoder_pure)
    [(header, _)] = list(iter_batches(buf, check_crc=True))
    assert header.compression == 1 and header.record_count == 100
    assert len(buf) < 1_000
    rows = decode(buf, pure, 50, 60)
    assert [r["offset"] for r in rows] == list(range(50, 60))
    assert {r["value"] for r in rows} == {values[0]}


@pytest.mark.parametrize("commit", [True, False])
def test_control_batches(pure: bool, commit: bool) -> None:
    data = encode_batch([None], [b"v"], TS, producer_id=9, producer_epoch=1, base_sequence=0,
                        transactional=True, base_offset=5, pure=pure)  # fmt: skip
    marker = encode_control_batch(
        commit=commit, producer_id=9, producer_epoch=1, base_offset=6, timestamp_ms=TS + 1,
        coordinator_epoch=3,
    )  # fmt: skip
    batches = list(iter_batches(data + marker, check_crc=True))
    assert [h.is_control for h, _ in batches] == [False, True]
    header, batch = batches[1]
    assert header.is_transactional and header.last_offset == 6 and header.producer_id == 9
    assert control_is_commit(batch) is commit
    assert [r["offset"] for r in decode(data + marker, pure)] == [5]
    builder = ColumnBuilder("t", 0, False, pure=pure)
    assert builder.add_batch(header, batch, *ALL) == 0 and len(builder) == 0
    with pytest.raises(CorruptRecordError, match="not a control"):
        control_is_commit(batches[0][1])


def test_control_markers_read_by_kafka_python() -> None:
    records = MemoryRecords(encode_control_batch(
        commit=False, producer_id=9, producer_epoch=1, base_offset=6, timestamp_ms=TS))  # fmt: skip
    batch = records.next_batch()
    assert batch.is_control_batch and batch.is_transactional and batch.validate_crc()
    [record] = list(batch)
    assert record.abort and not record.commit


def test_truncated_trailing_batch_ignored() -> None:
    first = encode_batch([None], [b"a"], TS, base_offset=0)
    second = encode_batch([None], [b"b" * 100], TS, base_offset=1)
    for cut in (1, len(second) // 2, len(second) - 5, len(second) - 13):
        batches = list(iter_batches(first + second[:cut], check_crc=True))
        assert [h.base_offset for h, _ in batches] == [0]
    assert list(iter_batches(b"")) == []


def test_last_offset_is_the_last_complete_batchs_as_iter_batches_reads_it() -> None:
    """The confirmation's short cut over a Fetch answer: only prefixes read, same answer as
    walking every header, a truncated trailing batch ignored, an old format refused."""
    batches = [encode_batch([None] * n, [b"v"] * n, TS, base_offset=o)
               for o, n in ((0, 1), (1, 5), (6, 2))]
    batches.append(encode_control_batch(commit=True, producer_id=7, producer_epoch=0,
                                        base_offset=8, timestamp_ms=TS))
    buf = b"".join(batches)
    for cut in range(len(buf) + 1):
        headers = [h for h, _ in iter_batches(buf[:cut])]
        assert last_offset(buf[:cut]) == (headers[-1].last_offset if headers else None)
    assert last_offset(memoryview(buf)) == 8
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    builder.append(0, timestamp=TS, key=None, value=b"old")
    with pytest.raises(CorruptRecordError, match="unsupported"):
        last_offset(buf + bytes(builder.build()))


def test_crc_corruption_detected() -> None:
    buf = bytearray(encode_batch([None], [b"value"], TS))
    buf[-3] ^= 0xFF
    assert len(list(iter_batches(bytes(buf)))) == 1  # not checked unless asked
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(iter_batches(bytes(buf), check_crc=True))


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_rejected(magic: int) -> None:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    builder.append(0, timestamp=TS if magic else None, key=None, value=b"old")
    buf = bytes(builder.build())
    with pytest.raises(CorruptRecordError, match=rf"magic v{magic}.*v0/v1.*unsupported"):
        list(iter_batches(buf))
    with pytest.raises(CorruptRecordError, match="unsupported"):  # even when truncated
        list(iter_batches(buf[:20]))


def test_log_append_time_uses_max_timestamp(pure: bool) -> None:
    buf = encode_batch([None] * 3, [b"a", b"b", b"c"], [TS, TS + 1, TS + 2], pure=pure)
    buf = with_attributes(buf, 0x08)
    [(header, _)] = list(iter_batches(buf, check_crc=True))
    assert header.timestamp_type == 1
    builder = ColumnBuilder("t", 0, False, pure=pure)
    for header, batch in iter_batches(buf):
        builder.add_batch(header, batch, *ALL)
    table = builder.to_arrow()
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == [(TS + 2) * 1000] * 3
    assert table.column("timestampType").to_pylist() == [1, 1, 1]


def test_mixed_timestamp_types_across_batches(pure: bool) -> None:
    create = encode_batch([None], [b"a"], TS, base_offset=0, pure=pure)
    append = with_attributes(encode_batch([None], [b"b"], TS, base_offset=1, pure=pure), 0x08)
    assert [r["timestampType"] for r in decode(create + append, pure)] == [0, 1]


@pytest.mark.parametrize("compression", [0, 1])
def test_kafka_python_bytes_decode_with_ours(pure: bool, compression: int) -> None:
    builder = KafkaPythonBuilder(
        magic=2, compression_type=compression, is_transactional=True, producer_id=77,
        producer_epoch=2, base_sequence=10, batch_size=1 << 20,
    )  # fmt: skip
    expected = []
    for i in range(50):
        key = None if i % 3 else b"key-%d" % i
        value = None if i == 7 else b"v" * i
        hdrs = [("i", b"%d" % i)] if i % 5 == 0 else []
        builder.append(i, timestamp=TS + i, key=key, value=value, headers=hdrs)
        expected.append((key, value, TS + i, hdrs or None))
    buf = bytes(builder.build())
    [(header, _)] = list(iter_batches(buf, check_crc=True))
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 2, 10)
    assert header.is_transactional and header.compression == compression
    rows = decode(buf, pure)
    got = [
        (r["key"], r["value"], (r["timestamp"] - EPOCH) // timedelta(milliseconds=1),
         [(h["key"], h["value"]) for h in r["headers"]] if r["headers"] else None)
        for r in rows
    ]  # fmt: skip
    assert got == expected


@pytest.mark.parametrize("compression", [0, 1])
def test_our_bytes_decode_with_kafka_python(pure: bool, compression: int) -> None:
    keys = [None, b"k", None]
    values = [b"a" * 100, None, b""]
    headers = [[("x", b"1")], [], [("y", None)]]
    buf = encode_batch(
        keys, values, [TS, TS + 4, TS - 1], headers, producer_id=5, producer_epoch=0,
        base_sequence=0, transactional=True, base_offset=300, compression=compression, pure=pure,
    )  # fmt: skip
    records = MemoryRecords(buf)
    batch = records.next_batch()
    assert records.next_batch() is None
    assert batch.validate_crc()
    assert (batch.base_offset, batch.producer_id, batch.is_transactional) == (300, 5, True)
    assert (batch.compression_type, batch.max_timestamp) == (compression, TS + 4)
    got = [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in batch]
    assert got == [
        (300, None, b"a" * 100, TS, [("x", b"1")]),
        (301, b"k", None, TS + 4, []),
        (302, None, b"", TS - 1, [("y", None)]),
    ]


def test_to_arrow_with_given_schema(pure: bool) -> None:
    header_struct = pa.struct([pa.field("key", pa.string(), nullable=False),
                               pa.field("value", pa.binary())])  # fmt: skip
    schema = pa.schema([
        pa.field("value", pa.binary(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("topic", pa.large_string()),
        pa.field("timestampType", pa.int32()),
        pa.field("headers", pa.list_(pa.field("element", header_struct))),
    ], metadata={b"origin": b"spark"})  # fmt: skip
    buf = encode_batch([None, b"k"], [b"a", b"b"], TS, [[("h", b"1")], []], pure=pure)
    builder = ColumnBuilder("t", 1, True, schema, pure=pure)
    for header, batch in iter_batches(buf):
        builder.add_batch(header, batch, *ALL)
    result = builder.to_arrow()
    assert result.schema.equals(schema, check_metadata=True)
    assert result.column("topic").to_pylist() == ["t", "t"]
    assert len(builder) == 0 and builder.to_arrow().num_rows == 0

    with pytest.raises(SchemaError, match="non-nullable"):
        strict = ColumnBuilder("t", 1, True, schema.set(0, pa.field("key", pa.binary(), False)),
                               pure=pure)  # fmt: skip
        for header, batch in iter_batches(buf):
            strict.add_batch(header, batch, *ALL)
        strict.to_arrow()
    with pytest.raises(SchemaError, match="not Kafka source columns"):
        ColumnBuilder("t", 1, False, schema)


def test_default_schema_is_sparks_kafka_schema() -> None:
    schema = ColumnBuilder("t", 0, True).to_arrow().schema
    assert schema.names == ["key", "value", "topic", "partition", "offset", "timestamp",
                            "timestampType", "headers"]  # fmt: skip
    assert all(field.nullable for field in schema)
    assert ColumnBuilder("t", 0, False).to_arrow().schema.names[-1] == "timestampType"


def test_corrupt_records_raise_and_leave_builder_consistent(pure: bool) -> None:
    good = encode_batch([None], [b"ok"], TS, base_offset=0, pure=pure)
    bad = bytearray(encode_batch([None] * 2, [b"x", b"y"], TS, base_offset=1, pure=pure))
    struct.pack_into(">i", bad, 57, 5)  # record count larger than what is there
    builder = ColumnBuilder("t", 0, False, pure=pure)
    [(header, batch)] = list(iter_batches(good))
    builder.add_batch(header, batch, *ALL)
    [(header, batch)] = list(iter_batches(bytes(bad)))
    with pytest.raises(CorruptRecordError):
        builder.add_batch(header, batch, *ALL)
    assert len(builder) == 1
    assert builder.to_arrow().column("value").to_pylist() == [b"ok"]


def test_missing_codec_names_the_package(pure: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """cramjam is a dependency now, so its absence is simulated in every codec helper."""
    import aiokafka.codec
    import kafka.codec

    monkeypatch.setattr(_fast, "can_decompress", lambda codec: False)
    for module in (aiokafka.codec, kafka.codec):
        monkeypatch.setattr(module, "has_snappy", lambda: False)
    buf = with_attributes(encode_batch([None], [b"v"], TS), 0x02)
    builder = ColumnBuilder("t", 0, False, pure=pure)
    [(header, batch)] = list(iter_batches(buf))
    with pytest.raises(CorruptRecordError, match="pip install cramjam"):
        builder.add_batch(header, batch, *ALL)


def test_gzip_garbage_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="gzip"):
        decompress(1, b"not gzip")


def test_env_var_forces_pure_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EOSKAFKA_PURE_CODEC", "1")
    assert not ColumnBuilder("t", 0, False).fast
    monkeypatch.setenv("EOSKAFKA_PURE_CODEC", "0")
    assert ColumnBuilder("t", 0, False).fast is _fast.AVAILABLE
    assert not ColumnBuilder("t", 0, False, pure=True).fast


def test_pure_python_crc_fallback_agrees() -> None:
    from kafka.record._crc32c import crc as crc_py

    buf = encode_batch([b"k"], [b"v" * 50], TS)
    assert crc_py(buf[21:]) == struct.unpack_from(">I", buf, 17)[0]


def test_encode_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="at least one"):
        encode_batch([], [], TS)
    with pytest.raises(ValueError, match="same length"):
        encode_batch([None], [b"a", b"b"], TS)
    with pytest.raises(ValueError, match="one entry per record"):
        encode_batch([None], [b"a"], [TS, TS])
    with pytest.raises(ValueError, match="producer id"):
        encode_batch([None], [b"a"], TS, transactional=True)


def test_records_start_after_header() -> None:
    buf = encode_batch([None], [b"v"], TS)
    assert HEADER_SIZE == 61 and buf[HEADER_SIZE:] == b"\x0e\x00\x00\x00\x01\x02v\x00"


def test_empty_batch_left_by_compaction(pure: bool) -> None:
    # Compaction keeps empty batches to preserve producer state; they decode to nothing.
    builder = KafkaPythonBuilder(
        magic=2, compression_type=0, is_transactional=True, producer_id=3, producer_epoch=0,
        base_sequence=0, batch_size=1 << 20,
    )  # fmt: skip
    empty = bytes(builder.build())
    after = encode_batch([None], [b"x"], TS, base_offset=1, pure=pure)
    [(header, _), _] = list(iter_batches(empty + after, check_crc=True))
    assert header.record_count == 0
    assert [r["value"] for r in decode(empty + after, pure)] == [b"x"]


def test_compression_levels_mean_what_they_mean_to_the_java_producer():
    """lz4 at its default level (9) is lz4's *fast* compressor, as in Java's
    Lz4BlockOutputStream (HC level 9 costs ~4x the CPU); any other level is HC at that
    level; gzip and zstd take their level as given. Every output decodes back."""
    import gzip

    import cramjam

    section = b"".join(b"record-%06d:" % i + b"payload " * 8 for i in range(3000))

    def lz4_frame(level: int) -> bytes:
        c = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
        c.compress(section)
        return bytes(c.finish())

    assert compress(3, section) == compress(3, section, 9) == lz4_frame(0)
    assert compress(3, section, 12) == lz4_frame(12) != lz4_frame(0)
    assert compress(4, section) == bytes(cramjam.zstd.compress(section, level=3))
    assert compress(4, section, 10) == bytes(cramjam.zstd.compress(section, level=10))
    assert len(compress(1, section, 1)) > len(compress(1, section, 9))
    assert gzip.decompress(compress(1, section, 1)) == section
    for codec, level in ((3, None), (3, 12), (4, None), (4, 10), (1, None), (2, None)):
        assert decompress(codec, compress(codec, section, level)) == section
