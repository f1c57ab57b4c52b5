"""The sink's column check: each wrong type gets a fix that works for that type."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from eos_kafka_source.errors import SchemaError
from eos_kafka_source.sink.task.columns import validate

STRUCT = StructType([StructField("id", LongType()), StructField("name", StringType())])


def _message(column: str, t: DataType) -> str:
    fields = [StructField("value", BinaryType())] if column != "value" else []
    with pytest.raises(SchemaError) as info:
        validate(StructType([*fields, StructField(column, t)]), "out")
    return str(info.value)


@pytest.mark.parametrize("column", ["value", "key"])
@pytest.mark.parametrize("t", [STRUCT, ArrayType(StringType()), MapType(StringType(), LongType())],
                         ids=["struct", "array", "map"])
def test_a_nested_value_is_pointed_at_a_format_or_to_json(column: str, t: DataType) -> None:
    """CAST(struct AS BINARY) fails in Spark: the hint names the format option and
    to_json, and no cast."""
    message = _message(column, t)
    assert f".option('{column}Format', 'avro')" in message and "schema.registry.url" in message
    assert f"to_json({column}) AS {column}" in message
    assert "CAST" not in message


@pytest.mark.parametrize("column", ["value", "key"])
@pytest.mark.parametrize("t", [LongType(), IntegerType(), BooleanType()])
def test_a_scalar_value_is_written_as_text(column: str, t: DataType) -> None:
    """A bigint cast to binary would be 8 raw bytes: the hint casts to STRING."""
    message = _message(column, t)
    assert f"CAST({column} AS STRING) AS {column}" in message and "BINARY" not in message


@pytest.mark.parametrize("column, t, fix", [
    ("topic", LongType(), "CAST(topic AS STRING) AS topic"),
    ("partition", StringType(), "CAST(partition AS INT) AS partition"),
    ("timestamp", LongType(), "CAST(timestamp AS TIMESTAMP) AS timestamp"),
    ("headers", StringType(), "array(struct("),
])
def test_other_columns_get_their_cast(column: str, t: DataType, fix: str) -> None:
    assert fix in _message(column, t)
