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
    IntegerType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from ..errors import SchemaError

_ACCEPTED = {
    "value": "binary or string",
    "key": "binary or string",
    "topic": "string",
    "partition": "int",
    "headers": "array<struct<key: string, value: binary>>",
    "timestamp": "timestamp",
}


def validate(schema: StructType, topic_option: str | None) -> None:
    """Raise SchemaError naming the column and the accepted types."""
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
        f = fields.get(name)
        if f is not None and not ok(f.dataType):
            raise SchemaError(
                f"column '{name}' has type {f.dataType.simpleString()}; the Kafka sink accepts "
                f"{_ACCEPTED[name]}. Cast it, e.g. CAST({name} AS "
                f"{_ACCEPTED[name].split(' or ')[0].upper()})"
            )
    if topic_option is None and "topic" not in fields:
        raise SchemaError(
            "no topic: set the 'topic' option or provide a string 'topic' column"
        )


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
    """One Arrow batch unpacked into Python lists, ready for the record encoder."""

    values: list[bytes | None]
    keys: list[bytes | None] | None
    topics: list[str | None] | None
    partitions: list[int | None] | None
    headers: list[list[tuple[str, bytes | None]]] | None
    timestamps_ms: list[int] | None

    def __len__(self) -> int:
        return len(self.values)


def unpack(batch: pa.RecordBatch) -> Rows:
    names = {name.lower(): i for i, name in enumerate(batch.schema.names)}

    def column(name: str) -> pa.Array | None:
        i = names.get(name)
        return None if i is None else batch.column(i)

    def as_bytes(arr: pa.Array | None) -> list[bytes | None] | None:
        if arr is None:
            return None
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            arr = arr.cast(pa.binary())
        return arr.to_pylist()

    values = as_bytes(column("value"))
    assert values is not None
    timestamps = column("timestamp")
    ts: list[int] | None = None
    if timestamps is not None:
        as_ms = pa.timestamp("ms", tz=timestamps.type.tz)
        ts = timestamps.cast(as_ms).cast(pa.int64()).to_pylist()
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
        keys=as_bytes(column("key")),
        topics=None if topics is None else topics.to_pylist(),
        partitions=None if partitions is None else partitions.to_pylist(),
        headers=hdrs,
        timestamps_ms=ts,
    )
