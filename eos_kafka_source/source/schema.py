"""The schema a read returns: Spark's Kafka source schema, column for column.

``EosKafkaDataSource.schema()`` answers Spark with it (a ``valueFormat``/``keyFormat``
read replaces the payload columns: :mod:`eos_kafka_source.formats.resolve`), and the
partition reader builds its Arrow batches to match it on pyspark releases that cannot
convert it themselves.

>>> kafka_schema(False).fieldNames()                             # doctest: +SKIP
['key', 'value', 'topic', 'partition', 'offset', 'timestamp', 'timestampType']
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

#: ``headers`` column type when ``includeHeaders=true`` (as in Spark's Kafka source).
HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema, every column nullable as in Spark."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)
