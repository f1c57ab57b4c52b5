"""Input columns of a write, as Spark's built-in Kafka sink defines them.

``value`` (binary or string) is required; ``key`` (binary or string),
``topic`` (string), ``partition`` (int), ``headers``
(array<struct<key: string, value: binary>>) and ``timestamp`` are optional.
Checked once on the driver at query start; unpacked per Arrow batch on executors.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    MapType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from ...errors import SchemaError
from .dead_letters import check_column

_ACCEPTED = {
    "value": "binary or string",
    "key": "binary or string",
    "topic": "string",
    "partition": "int",
    "headers": "array<struct<key: string, value: binary>>",
    "timestamp": "timestamp",
}


def validate(schema: StructType, topic_option: str | None,
             encoded: tuple[str, ...] = (), dead_letter_topic: str | None = None) -> None:
    """Raise SchemaError naming the column and the accepted types. ``encoded`` names the
    columns a format encodes (``valueFormat``/``keyFormat``): any type its codec takes,
    checked against the schema when the writer resolves it (formats/resolve.py). The
    ``deadLetter`` column comes with ``deadLetterTopic`` (dead_letters.py)."""
    check_column(schema, dead_letter_topic)
    fields = {f.name.lower(): f for f in schema.fields}
    if "value" not in fields:
        raise SchemaError(
            "the input has no 'value' column; the Kafka sink needs one (binary or string). "
            "Select or alias a column as value, e.g. df.selectExpr('CAST(x AS STRING) AS value')"
        )
    checks = {
        "value": lambda t: isinstance(t, (BinaryType, StringType)),
        "key": lambda t: isinstance(t, (BinaryType, StringType)),
        "topic": lambda t: isinstance(t, StringType),
        "partition": lambda t: isinstance(t, IntegerType),
        "timestamp": lambda t: isinstance(t, (TimestampType, TimestampNTZType)),
        "headers": _is_headers,
    }
    for name, ok in checks.items():
        if name in encoded:
            continue
        f = fields.get(name)
        if f is not None and not ok(f.dataType):
            raise SchemaError(
                f"column '{name}' has type {f.dataType.simpleString()}; the Kafka sink accepts "
                f"{_ACCEPTED[name]}. {_fix(name, f.dataType)}"
            )
    if topic_option is None and "topic" not in fields:
        raise SchemaError(
            "no topic: set the 'topic' option or provide a string 'topic' column"
        )


def _fix(name: str, t: DataType) -> str:
    """What to do about column ``name`` of type ``t``, as fits the type: a struct, array or map
    key/value is encoded (a payload format, or JSON text); a number, boolean, date or
    timestamp becomes its text (a cast to binary would write a bigint as 8 raw bytes and fails
    for a struct)."""
    if name in ("value", "key"):
        if isinstance(t, (StructType, ArrayType, MapType)):
            return (f"Encode it: .option('{name}Format', 'avro') (or 'protobuf', 'json') with "
                    f"schema.registry.url writes it through a schema registry "
                    f"(docs/formats.md); without one, to_json({name}) AS {name} writes it as "
                    "JSON text.")
        return f"Write its text: CAST({name} AS STRING) AS {name}."
    target = {"topic": "STRING", "partition": "INT", "timestamp": "TIMESTAMP"}.get(name)
    if target is None:  # headers
        return ("Build it as array(struct(CAST(k AS STRING) AS key, CAST(v AS BINARY) AS "
                "value)).")
    return f"Cast it: CAST({name} AS {target}) AS {name}."


def _is_headers(t: object) -> bool:
    if not isinstance(t, ArrayType) or not isinstance(t.elementType, StructType):
        return False
    inner = {f.name: f.dataType for f in t.elementType.fields}
    return (
        set(inner) == {"key", "value"}
        and isinstance(inner["key"], StringType)
        and isinstance(inner["value"], BinaryType)
    )


@dataclass
class Rows:
    """One Arrow batch unpacked for routing and encoding.

    ``values``, ``key_array`` and ``timestamps_ms`` stay Arrow arrays (binary, binary,
    int64 milliseconds) so the encoder works column-wise; ``keys`` (Python, for the
    partitioner's murmur2) is there only when some row has a key, and ``topics``,
    ``partitions`` and ``headers`` are Python lists when their column exists.
    """

    values: pa.Array | list[bytes | None]
    keys: list[bytes | None] | None
    topics: list[str | None] | None
    partitions: list[int | None] | None
    headers: list[list[tuple[str, bytes | None]]] | None
    timestamps_ms: pa.Array | None
    key_array: pa.Array | None = None

    def __len__(self) -> int:
        return len(self.values)


def as_binary(arr: pa.Array | None) -> pa.Array | None:
    """A string or binary column as ``binary`` (what the encoder reads)."""
    if arr is None or arr.type == pa.binary():
        return arr
    return arr.cast(pa.binary())


def unpack(batch: pa.RecordBatch) -> Rows:
    names = {name.lower(): i for i, name in enumerate(batch.schema.names)}

    def column(name: str) -> pa.Array | None:
        i = names.get(name)
        return None if i is None else batch.column(i)

    values = as_binary(column("value"))
    assert values is not None
    key_array = as_binary(column("key"))
    if key_array is not None and key_array.null_count == len(key_array):
        key_array = None  # every key null: rows are spread like keyless ones
    timestamps = column("timestamp")
    ts: pa.Array | None = None
    if timestamps is not None:
        # Kafka timestamps are milliseconds; Spark's are microseconds: truncate, as Spark's
        # own Kafka sink does (a safe cast would refuse any sub-millisecond part).
        as_ms = pa.timestamp("ms", tz=timestamps.type.tz)
        ts = timestamps.cast(as_ms, safe=False).cast(pa.int64())
    headers = column("headers")
    hdrs = None
    if headers is not None:
        hdrs = [
            [(h["key"], h["value"]) for h in row] if row else []
            for row in headers.to_pylist()
        ]
    topics = column("topic")
    partitions = column("partition")
    return Rows(
        values=values,
        keys=None if key_array is None else key_array.to_pylist(),
        topics=None if topics is None else topics.to_pylist(),
        partitions=None if partitions is None else partitions.to_pylist(),
        headers=hdrs,
        timestamps_ms=ts,
        key_array=key_array,
    )
