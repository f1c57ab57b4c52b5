"""The Avro schema spark-avro's ``to_avro`` derives from a column's type.

``SchemaConverters.toAvroType``: a nullable type is the union ``[type, "null"]`` (null
last, no default), a struct a record named after its field in the namespace of the records
around it, a decimal a fixed of the fewest bytes its precision needs named
``<namespace>.<field>.fixed``. So a schema eoskafka registers for a column is the one a Spark
user writing the same column with ``to_avro`` would get.
"""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa

from ..errors import ConfigError


def _min_bytes(precision: int) -> int:
    """Spark's ``Decimal.minBytesForPrecision``."""
    size = 1
    while math.pow(2.0, 8 * size - 1) < math.pow(10.0, precision):
        size += 1
    return size


def avro_schema_for(arrow_type: pa.DataType, name: str = "topLevelRecord",
                    namespace: str = "") -> Any:
    """The Avro schema JSON ``to_avro`` derives from a (non-null) column of this type."""
    return _to_avro(arrow_type, False, name, namespace)


def _to_avro(t: pa.DataType, nullable: bool, name: str, namespace: str) -> Any:
    schema: Any
    if pa.types.is_boolean(t):
        schema = "boolean"
    elif pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
        schema = "int"
    elif pa.types.is_int64(t):
        schema = "long"
    elif pa.types.is_date32(t):
        schema = {"type": "int", "logicalType": "date"}
    elif pa.types.is_timestamp(t):
        schema = {"type": "long", "logicalType": "timestamp-micros" if t.tz else
                  "local-timestamp-micros"}
    elif pa.types.is_time(t):
        schema = {"type": "long", "logicalType": "time-micros",
                  "spark.sql.catalyst.type": "time(6)"}
    elif pa.types.is_float32(t):
        schema = "float"
    elif pa.types.is_float64(t):
        schema = "double"
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        schema = "string"
    elif pa.types.is_null(t):
        return "null"
    elif pa.types.is_decimal(t):
        # Avro splits the name Spark gives ("ns.field.fixed") at its last dot.
        space = f"{namespace}.{name}" if namespace else name
        schema = {"type": "fixed", "name": "fixed", "namespace": space,
                  "size": _min_bytes(t.precision), "logicalType": "decimal",
                  "precision": t.precision, "scale": t.scale}
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        schema = "bytes"
    elif pa.types.is_map(t):
        if not (pa.types.is_string(t.key_type) or pa.types.is_large_string(t.key_type)):
            raise ConfigError(f"a map with {t.key_type} keys has no Avro type (Avro maps have "
                              "string keys); cast the keys to string")
        schema = {"type": "map", "values": _to_avro(t.item_type, t.item_field.nullable, name,
                                                    namespace)}
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        schema = {"type": "array", "items": _to_avro(t.value_type, t.value_field.nullable,
                                                     name, namespace)}
    elif pa.types.is_struct(t):
        child_space = f"{namespace}.{name}" if namespace else name
        schema = {"type": "record", "name": name}
        if namespace:
            schema["namespace"] = namespace
        schema["fields"] = [
            {"name": f.name, "type": _to_avro(f.type, f.nullable, f.name, child_space)}
            for f in t]
    else:
        raise ConfigError(f"a column of type {t} has no Avro type spark-avro would derive; "
                          "cast it to a Spark type (string, long, timestamp, struct, ...)")
    return [schema, "null"] if nullable else schema
