"""The ``deadLetter`` column of a PERMISSIVE read: each record that did not decode, as it was.

With ``includeDeadLetter=true`` a PERMISSIVE read adds one struct column, null on every
row that decoded, and on a row that did not: the record's own key and value bytes, its
headers, where it was (topic, partition, offset), its timestamp, which side failed
(``stage``, Kafka Connect's converter stage names) and why (``error``). A query keeps the
column through its transformation; the sink writes the rows that carry one, raw, to its
``deadLetterTopic`` in the same transaction as the good rows (sink/task/dead_letters.py).

Built column-wise from the failing rows only, so a batch where everything decoded costs
one all-null column.

Runs on: executors (the partition reader), and on the driver for the schema.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import StructType

DEAD_LETTER_COLUMN = "deadLetter"
#: Which converter failed, in Kafka Connect's names (its ``__connect.errors.stage`` header).
STAGES = {"key": "KEY_CONVERTER", "value": "VALUE_CONVERTER"}


def _kafka_columns() -> pa.Schema:
    """The Kafka columns a dead letter keeps: Spark's Kafka source columns, headers
    included, as the records layer defines them."""
    # Imported here: the sink's driver side imports this module for the column name only,
    # and the record decoder would bring pyarrow.compute and aiokafka into every process.
    from ..records.decode import arrow_schema

    return arrow_schema(include_headers=True)


def dead_letter_type() -> StructType:
    """The Spark type of the ``deadLetter`` column: the Kafka columns, then ``stage`` and
    ``error``."""
    from pyspark.sql.pandas.types import from_arrow_type

    spark = from_arrow_type(pa.struct([*_kafka_columns(), pa.field("stage", pa.string()),
                                       pa.field("error", pa.string())]))
    assert isinstance(spark, StructType)  # an Arrow struct converts to one
    return spark


def dead_letters(batch: pa.RecordBatch, errors: dict[str, pa.Array | None],
                 arrow_type: pa.DataType) -> pa.Array:
    """The ``deadLetter`` column of ``batch`` (the raw Kafka columns, headers included),
    given each decoded side's error column (None: every row of that side decoded).

    A row is a dead letter when any side failed; its ``stage`` is the first failing side
    in the order Connect converts (key, then value), its ``error`` that side's reason, or
    both reasons, each named, when both failed.
    """
    import pyarrow.compute as pc  # executors only: the sink's driver side imports this module

    n = len(batch)
    failing: dict[str, pa.Array] = {}
    for side in ("key", "value"):
        column = errors.get(side)
        if column is not None and column.null_count < n:
            failing[side] = column
    if not failing:
        return pa.nulls(n, arrow_type)
    mask = None
    for column in failing.values():
        valid = pc.is_valid(column)
        mask = valid if mask is None else pc.or_(mask, valid)
    assert mask is not None
    rows = pc.indices_nonzero(mask)
    reasons = {side: pc.take(column, rows).to_pylist() for side, column in failing.items()}
    stages: list[str] = []
    messages: list[str] = []
    for i in range(len(rows)):
        why = {side: r[i] for side, r in reasons.items() if r[i] is not None}
        stages.append(STAGES[next(iter(why))])
        messages.append(next(iter(why.values())) if len(why) == 1
                        else "; ".join(f"{side}: {w}" for side, w in why.items()))
    fields = [name for name in _kafka_columns().names if name in batch.schema.names]
    children = [pc.take(batch.column(name), rows) for name in fields]
    sub = pa.StructArray.from_arrays(
        [*children, pa.array(stages, pa.string()), pa.array(messages, pa.string())],
        names=[*fields, "stage", "error"]).cast(arrow_type)  # cast the few failing rows
    # Back to the batch's rows: take() with a null index gives a null row.
    positions = pc.if_else(mask, pc.subtract(pc.cumulative_sum(mask.cast(pa.int64())), 1),
                           pa.scalar(None, pa.int64()))
    return pc.take(sub, positions)
