"""spark-avro's ``from_avro`` as the oracle, many schemas in one Spark job.

Each case is a binary column of one DataFrame (its Avro bodies, header stripped, null
padded); each column is read with its own schema by ``from_avro`` (PERMISSIVE: a record
Spark cannot read is null, which the explorer compares with eoskafka's refusal). A schema
Spark refuses at analysis is told apart first, column by column; if the one job still
fails (a value Spark refuses at run time), the batch is halved until the column that fails
it is found, and its refusal is the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa


@dataclass
class SparkRead:
    """What Spark made of one case: its type and rows, or why it refused."""

    data_type: Any = None
    rows: pa.Array | None = None
    refused: str | None = None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def session(cores: int = 1) -> Any:
    """A local SparkSession with spark-avro 4.2.0 (fetched once, like the format tests')."""
    import os
    import sys

    from pyspark.sql import SparkSession

    from eos_kafka_source.apache_kafka.spark_connector import AVRO_ARTIFACT, connector_jars

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    jars = ",".join(str(p) for p in connector_jars(None, AVRO_ARTIFACT))
    spark = (SparkSession.builder.master(f"local[{cores}]").appName("eoskafka-explore-formats")
             .config("spark.jars", jars).config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.shuffle.partitions", "1").getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    return spark


Read = tuple[str, str | None, list[bytes | None]]


def _from_avro(k: int, case: Read, mode: str | None) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    options = {} if mode is None else {"mode": mode}
    if case[1] is not None:
        options["avroSchema"] = case[1]  # the reader's schema; the first is the writer's
    return from_avro(F.col(f"c{k}"), case[0], options).alias(f"c{k}")


def read_all(spark: Any, cases: list[Read]) -> list[SparkRead]:
    """``cases``: (writer schema JSON, reader schema JSON or None, bodies) each; one
    :class:`SparkRead` per case."""
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    height = max((len(c[2]) for c in cases), default=0)
    table = pa.table({f"c{k}": pa.array(c[2] + [None] * (height - len(c[2])), pa.binary())
                      for k, c in enumerate(cases)})
    df = spark.createDataFrame(table) if cases else None
    out = [SparkRead() for _ in cases]
    _analyse(df, [(k, _from_avro(k, c, None)) for k, c in enumerate(cases)], out)
    _collect(df, {k: _from_avro(k, c, "PERMISSIVE") for k, c in enumerate(cases)
                  if out[k].refused is None}, out)
    for read, (_, _, bodies) in zip(out, cases, strict=True):
        if read.rows is not None:
            read.rows = read.rows[:len(bodies)]
    return out


def _analyse(df: Any, schemas: list[tuple[int, Any]], out: list[SparkRead]) -> None:
    """Each column's type as FAILFAST gives it (PERMISSIVE makes every field nullable), all
    at once; halved until the schema Spark refuses is found."""
    if not schemas:
        return
    try:
        fields = df.select(*[column for _, column in schemas]).schema.fields
    except Exception as exc:  # noqa: BLE001 - Spark's refusal is the oracle's answer
        if len(schemas) == 1:
            out[schemas[0][0]].refused = f"spark-avro refuses the schema: {_first_line(exc)}"
            return
        half = len(schemas) // 2
        _analyse(df, schemas[:half], out)
        _analyse(df, schemas[half:], out)
        return
    for (k, _), f in zip(schemas, fields, strict=True):
        out[k].data_type = f.dataType


def _collect(df: Any, columns: dict[int, Any], out: list[SparkRead]) -> None:
    if not columns:
        return
    keys = sorted(columns)
    try:
        table = df.select(*[columns[k] for k in keys]).toArrow()
    except Exception as exc:  # noqa: BLE001 - halve until the failing column is found
        if len(keys) == 1:
            out[keys[0]].refused = f"spark-avro fails reading it: {_first_line(exc)}"
            return
        half = len(keys) // 2
        _collect(df, {k: columns[k] for k in keys[:half]}, out)
        _collect(df, {k: columns[k] for k in keys[half:]}, out)
        return
    for k in keys:
        out[k].rows = table.column(f"c{k}").combine_chunks()


def fails(spark: Any, case: tuple[str, str | None], body: bytes) -> bool:
    """Whether ``from_avro`` in FAILFAST refuses one record: in PERMISSIVE, a record Spark
    cannot read comes back as a struct of nulls, which a record of null fields also is."""
    df = spark.createDataFrame(pa.table({"c0": pa.array([body], pa.binary())}))
    try:
        df.select(_from_avro(0, case, "FAILFAST")).toArrow()
    except Exception:  # noqa: BLE001 - the refusal is the answer
        return True
    return False
