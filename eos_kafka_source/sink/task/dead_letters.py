"""The sink's ``deadLetterTopic``: rows carrying a ``deadLetter`` go there raw, the rest as usual.

A PERMISSIVE read with ``includeDeadLetter=true`` (formats/dead_letter.py) gives each row
that did not decode a non-null ``deadLetter`` struct: its record's own key, value, headers,
timestamp and origin. With ``deadLetterTopic`` set, the sink splits every input batch: the
good rows are encoded (``valueFormat``/``keyFormat``) and routed as always; each dead
letter is written as its original record (key, value, headers, timestamp, as Kafka
Connect's ``errors.deadletterqueue.topic.name`` does) plus Connect's context headers
(``__connect.errors.topic``, ``.partition``, ``.offset``, ``.stage``,
``.exception.class.name``, ``.exception.message``). Both go through the task's one
writer, so they share its transaction: the good records and the dead letters of a batch
commit or abort together.

Runs on: the driver (:func:`check_column`) and executors (:func:`routed`). No network.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from ...errors import SchemaError
from ...formats.dead_letter import DEAD_LETTER_COLUMN

#: Kafka Connect's context header names (DeadLetterQueueReporter's), values UTF-8 text.
HEADER_PREFIX = "__connect.errors."
#: What FAILFAST would have raised: Connect's ``exception.class.name`` for a dead letter.
EXCEPTION_CLASS = "eos_kafka_source.errors.PayloadDecodeError"

_BINARY = (BinaryType,)
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "key": _BINARY, "value": _BINARY, "topic": (StringType,), "partition": (IntegerType,),
    "offset": (LongType, IntegerType), "timestamp": (TimestampType, TimestampNTZType),
    "timestampType": (IntegerType,), "stage": (StringType,), "error": (StringType,),
}
_REQUIRED = ("value", "error")


def check_column(schema: StructType, dead_letter_topic: str | None) -> None:
    """The input's ``deadLetter`` column and ``deadLetterTopic`` go together; the column
    must be the struct a PERMISSIVE read with ``includeDeadLetter`` gives (or one with at
    least its binary ``value`` and string ``error``). SchemaError naming the fix."""
    field = next((f for f in schema.fields if f.name.lower() == DEAD_LETTER_COLUMN.lower()),
                 None)
    if dead_letter_topic is None:
        if field is not None:
            raise SchemaError(
                f"the input has a '{DEAD_LETTER_COLUMN}' column (the records that did not "
                f"decode) but the sink has no deadLetterTopic: its rows would be written as "
                f"good records. Set option('deadLetterTopic', 'orders-dlq'), or drop the "
                f"column.")
        return
    if field is None:
        raise SchemaError(
            f"deadLetterTopic={dead_letter_topic} needs a '{DEAD_LETTER_COLUMN}' column in "
            f"the input: read with option('mode', 'PERMISSIVE') and "
            f"option('includeDeadLetter', 'true'), and keep the column in your select.")
    if not _fits(field.dataType):
        raise SchemaError(
            f"column '{DEAD_LETTER_COLUMN}' has type {field.dataType.simpleString()}; the sink "
            f"writes it as the struct a PERMISSIVE read with includeDeadLetter=true gives "
            f"(at least value binary and error string). Pass the read's column unchanged.")


def _fits(t: DataType) -> bool:
    if not isinstance(t, StructType):
        return False
    fields = {f.name: f.dataType for f in t.fields}
    if any(name not in fields for name in _REQUIRED):
        return False
    for name, dtype in fields.items():
        ok = _FIELD_TYPES.get(name)
        if ok is not None and not isinstance(dtype, ok):
            return False
        if name == "headers" and not _is_headers(dtype):
            return False
    return True


def _is_headers(t: DataType) -> bool:
    return (isinstance(t, ArrayType) and isinstance(t.elementType, StructType)
            and [(f.name, type(f.dataType)) for f in t.elementType.fields]
            == [("key", StringType), ("value", BinaryType)])


def routed(batches: Iterable[pa.RecordBatch], dead_letter_topic: str | None,
           encode: Callable[[pa.RecordBatch], pa.RecordBatch] | None,
           ) -> Iterator[tuple[pa.RecordBatch, str | None]]:
    """Each input batch as (batch, topic override): the good rows encoded (no override),
    then the dead letters as raw records for ``dead_letter_topic``. A batch without dead
    letters passes whole, with no copy."""
    for batch in batches:
        if dead_letter_topic is not None:
            good, dead = split(batch)
        else:
            good, dead = batch, None
        if good is not None and len(good):
            yield (encode(good) if encode is not None else good), None
        if dead is not None:
            yield records(dead), dead_letter_topic


def split(batch: pa.RecordBatch) -> tuple[pa.RecordBatch | None, pa.StructArray | None]:
    """(the rows without a dead letter, minus the column; the dead letters), either None
    when empty."""
    # Here, on the executor: the driver's per-batch processes import this module for
    # check_column, and pyarrow.compute (pandas) is half of the sink's import time.
    import pyarrow.compute as pc

    names = [n.lower() for n in batch.schema.names]
    i = names.index(DEAD_LETTER_COLUMN.lower())
    column = batch.column(i)
    rest = batch.remove_column(i)
    if column.null_count == len(column):
        return rest, None
    dead = pc.is_valid(column)
    good = rest.filter(pc.invert(dead))
    return (good if len(good) else None), column.filter(dead)


def records(dead: pa.StructArray) -> pa.RecordBatch:
    """The dead letters as a sink input batch (value, key, timestamp, headers): each the
    original record, its headers followed by Connect's context headers (a context header
    the record already has is kept, not added twice, as Connect does)."""
    fields = {dead.type.field(i).name: dead.field(i) for i in range(dead.type.num_fields)}
    n = len(dead)

    def py(name: str) -> list:
        column = fields.get(name)
        return [None] * n if column is None else column.to_pylist()

    topics, partitions, offsets = py("topic"), py("partition"), py("offset")
    stages, errors, originals = py("stage"), py("error"), py("headers")
    headers = []
    for i in range(n):
        own = [(h["key"], h["value"]) for h in originals[i] or []]
        context = {
            "topic": topics[i] or "",
            "partition": str(-1 if partitions[i] is None else partitions[i]),
            "offset": str(-1 if offsets[i] is None else offsets[i]),
            "stage": stages[i],
            "exception.class.name": EXCEPTION_CLASS,
            "exception.message": errors[i],
        }
        have = {k for k, _ in own}
        own += [(HEADER_PREFIX + k, v.encode()) for k, v in context.items()
                if v is not None and HEADER_PREFIX + k not in have]
        headers.append(own)
    columns: dict[str, pa.Array] = {
        "value": fields["value"],
        "headers": pa.array(headers, pa.list_(pa.struct([("key", pa.string()),
                                                         ("value", pa.binary())]))),
    }
    if "key" in fields:
        columns["key"] = fields["key"]
    if "timestamp" in fields:
        columns["timestamp"] = fields["timestamp"]
    return pa.RecordBatch.from_pydict(columns)
