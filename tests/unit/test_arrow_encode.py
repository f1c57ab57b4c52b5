"""The sink's column-wise encoder writes exactly what the record-by-record encoder writes."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from eos_kafka_source.records import encode_batch, iter_batches
from eos_kafka_source.records.arrow_encode import TABLE_SIZE, encode_arrow
from eos_kafka_source.sink.task.columns import unpack

IDENTITY = {"producer_id": 7, "producer_epoch": 3, "base_sequence": 11}
T0 = 1_700_000_000_000


def _both(keys: list[bytes | None] | None, values: list[bytes | None],
          stamps: list[int] | int, *, transactional: bool = True) -> tuple[bytes | None, bytes]:
    arrow = encode_arrow(
        None if keys is None else pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
        stamps if isinstance(stamps, int) else pa.array(stamps, pa.int64()),
        transactional=transactional, **IDENTITY,
    )
    python = encode_batch([None] * len(values) if keys is None else keys, values, stamps,
                          transactional=transactional, pure=True, **IDENTITY)
    return arrow, python


@pytest.mark.parametrize("transactional", [True, False])
def test_plain_values_one_timestamp(transactional: bool) -> None:
    values = [b"%012d" % i + b"v" * 88 for i in range(10_000)]
    arrow, python = _both(None, values, T0, transactional=transactional)
    assert arrow == python


def test_keys_nulls_empty_and_varied_lengths_and_timestamps() -> None:
    rng = random.Random(5)
    n = 500
    keys = [None if i % 3 else b"k%d" % i for i in range(n)]
    values = [None if i % 7 == 0 else bytes(rng.randrange(256) for _ in range(i % 300))
              for i in range(n)]
    values[1] = b""
    stamps = [T0 + rng.randint(-5_000, 5_000) for _ in range(n)]
    arrow, python = _both(keys, values, stamps)
    assert arrow == python
    ((header, _),) = list(iter_batches(arrow, check_crc=True))  # type: ignore[arg-type]
    assert header.record_count == n and header.max_timestamp == max(stamps)


def test_two_byte_varints_at_the_edges() -> None:
    values = [b"x" * size for size in (63, 64, 127, 128, 8191, 8192, 16_383, 16_384)]
    arrow, python = _both(None, values, [T0, T0 + 63, T0 + 64, T0 - 64, T0 - 65, T0, T0, T0])
    assert arrow == python


def test_outside_the_table_it_declines() -> None:
    assert _both(None, [b"y" * TABLE_SIZE], T0)[0] is None  # a record too long for the table
    assert _both(None, [b"a", b"b"], [T0, T0 + TABLE_SIZE])[0] is None  # timestamps far apart
    assert _both(None, [b"a"] * (TABLE_SIZE // 2 + 1), T0)[0] is None  # too many records
    assert encode_arrow(None, pa.array([], pa.binary()), T0, transactional=True,
                        **IDENTITY) is None


def test_sliced_input_arrays() -> None:
    values = pa.array([b"v%d" % i for i in range(100)], pa.binary()).slice(10, 50)
    keys = pa.array([b"k%d" % i if i % 2 else None for i in range(100)], pa.binary()).slice(10, 50)
    arrow = encode_arrow(keys, values, T0, transactional=True, **IDENTITY)
    python = encode_batch(keys.to_pylist(), values.to_pylist(), T0, transactional=True,
                          pure=True, **IDENTITY)
    assert arrow == python


def test_unpack_truncates_sub_millisecond_timestamps() -> None:
    micros = pa.array([1_500, 2_000_999, None], pa.timestamp("us", tz="UTC"))
    batch = pa.RecordBatch.from_arrays([pa.array([b"a", b"b", b"c"]), micros],
                                       names=["value", "timestamp"])
    rows = unpack(batch)
    assert rows.timestamps_ms is not None
    assert rows.timestamps_ms.to_pylist() == [1, 2_000, None]


def test_unpack_keeps_columns_as_arrow_and_all_null_keys_as_keyless() -> None:
    batch = pa.RecordBatch.from_pydict({"value": ["x", "y"], "key": pa.array([None, None],
                                                                             pa.string())})
    rows = unpack(batch)
    assert rows.values.type == pa.binary()  # type: ignore[union-attr]
    assert rows.keys is None and rows.key_array is None
    keyed = unpack(pa.RecordBatch.from_pydict({"value": [b"x"], "key": ["k"]}))
    assert keyed.keys == [b"k"] and keyed.key_array is not None


def test_the_varint_table_is_what_the_encoder_writes() -> None:
    from eos_kafka_source.records import arrow_encode

    table = arrow_encode._build_varints().to_pylist()
    assert table == [arrow_encode._varint(i) for i in range(TABLE_SIZE)]


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_decode_to_what_was_encoded(codec: int) -> None:
    """kafka.compression.type on write: the column-wise encoder compresses the records
    section and marks the codec; both decoders read it back."""
    from eos_kafka_source.records import ColumnBuilder

    values = [b"%06d" % i + b"x" * 94 for i in range(2_000)]
    keys = [b"k%d" % (i % 7) for i in range(2_000)]
    arrow = encode_arrow(pa.array(keys, pa.binary()), pa.array(values, pa.binary()), T0,
                         transactional=True, compression=codec, **IDENTITY)
    python = encode_batch(keys, values, T0, transactional=True, compression=codec, pure=True,
                          **IDENTITY)
    assert arrow is not None and len(arrow) < 100 * 2_000 // 3  # it did compress
    for data in (arrow, python):
        [(header, view)] = list(iter_batches(data))
        assert header.compression == codec and header.is_transactional
        for pure in (True, False):
            builder = ColumnBuilder("t", 0, False, pure=pure)
            builder.add_batch(header, view, 0, 1 << 40)
            table = builder.to_arrow()
            assert table.column("value").to_pylist() == values
            assert table.column("key").to_pylist() == keys
