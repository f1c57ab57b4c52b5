"""Avro end to end, eoskafka beside Spark's connector with spark-avro: ``make bench-formats``.

One run: one Apache Kafka broker (KRaft, one node), one Apicurio Registry, one
``local[2]`` SparkSession with Spark's Kafka connector and spark-avro (same version);
the same records for every variant, each measure interleaved (runs alternate which variant
goes first) so load that comes and goes on a shared machine hits all alike. The records are
benchmarks/formats/codec_speed.py's 10-field ``Event`` (strings, longs, doubles, an int,
a boolean, a timestamp-millis, a nullable string), Confluent-framed, in 4 partitions.

- read: eoskafka ``valueFormat=avro`` against ``format("kafka")`` +
  ``from_avro(substring(value, 6), schema)``, every field into ``noop`` (nothing pruned);
  eoskafka ``raw`` (no decoding) as a third row.
- write: eoskafka exactly-once ``valueFormat=avro`` of the struct against
  ``format("kafka")`` at-least-once of ``concat(header, to_avro(value, schema))``, both
  from the same cached struct column (so both encode in the timed run); then both writing
  the same payloads already encoded (cached), as the ``raw`` row beside its own reference.

Writes ``bench-results/formats.md`` + ``.json``; docs/performance.md's table is
``benchmarks/formats/current.json`` (:mod:`benchmarks.published`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from eos_kafka_source.apache_kafka import KafkaCluster
from eos_kafka_source.apache_kafka.spark_connector import connector_version, spark_jars
from eos_kafka_source.client.config import ClientConfig

from ..common import KAFKA_LABEL, KAFKA_VERSION, load, ready_topic
from ..throughput.versus import Measure, _with_retries, interleaved
from .codec_speed import SCHEMA

DEFAULT_OUT = Path("bench-results/formats.md")
PARTITIONS = 4
#: The write of payloads encoded already (eoskafka's; Spark's is named with "kafka").
RAW_WRITE = "eoskafka raw (encoded already)"
SCHEMA_JSON = json.dumps(SCHEMA)
#: codec_speed.rows() as Spark SQL over ``spark.range``: every field non-null but ``note``.
EVENT = ("named_struct('id', id, 'user', concat('user-', CAST(id % 5000 AS STRING)), "
         "'kind', CASE id % 3 WHEN 0 THEN 'click' WHEN 1 THEN 'view' ELSE 'buy' END, "
         "'seq', id * 7, 'amount', CAST(id AS DOUBLE) * 0.25D, "
         "'score', CAST(id % 977 AS DOUBLE) * 1.5D, "
         "'at', timestamp_millis(1767225600000 + id), "
         "'note', CASE WHEN id % 4 = 0 THEN concat('note ', CAST(id AS STRING)) END, "
         "'count', CAST(id % 1000 AS INT), 'ok', id % 2 = 0)")


class Bench:
    """The broker, the registry, the session, the cached input and the input topic."""

    def __init__(self, spark: Any, bootstrap: str, registry: Any, records: int,
                 runs: int) -> None:
        from pyspark.sql.avro.functions import to_avro
        from pyspark.sql.functions import col, concat, expr

        self.spark, self.bootstrap, self.registry = spark, bootstrap, registry
        self.records, self.runs = records, runs
        self.cfg = ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap})
        self.input = self.topic("avro-in")
        self.subject = f"{self.input}-value"
        reply = registry.call("POST", f"/subjects/{self.subject}/versions",
                              {"schema": SCHEMA_JSON})
        self.schema_id = int(reply["id"])
        header = expr(f"unhex('00{self.schema_id:08x}')")
        self.structs = (spark.range(0, records, 1, 2).selectExpr(f"{EVENT} AS value")
                        .cache())
        self.structs.count()
        #: to_avro runs in each write of this one (the reference for a valueFormat=avro write)
        self.encoding = self.structs.select(concat(header, to_avro(col("value"), SCHEMA_JSON))
                                            .alias("value"))
        self.framed = self.encoding.cache()  # the same payloads, encoded once
        self.framed.count()

    def topic(self, name: str) -> str:
        return ready_topic(self.cfg, name, PARTITIONS)

    def _kafka(self) -> dict[str, str]:
        return {"kafka.bootstrap.servers": self.bootstrap}

    def _avro(self) -> dict[str, str]:
        return {"valueFormat": "avro", "schema.registry.url": self.registry.url,
                "valueSubject": self.subject}

    def fill_input(self) -> None:
        """The input topic, written once by Spark's connector (to_avro, framed)."""
        self.write_builtin(self.input)

    def read_eoskafka(self, avro: bool = True) -> None:
        r = self.spark.read.format("eoskafka").options(**self._kafka())
        r = r.option("subscribe", self.input)
        if avro:
            r = r.options(**self._avro())
        df = r.load()
        (df.select("value.*") if avro else df).write.format("noop").mode("overwrite").save()

    def read_builtin(self) -> None:
        from pyspark.sql.avro.functions import from_avro
        from pyspark.sql.functions import expr

        (self.spark.read.format("kafka").options(**self._kafka())
         .option("subscribe", self.input).load()
         .select(from_avro(expr("substring(value, 6)"), SCHEMA_JSON).alias("value"))
         .select("value.*").write.format("noop").mode("overwrite").save())

    def write_eoskafka(self, avro: bool = True, df: Any = None) -> None:
        if df is None:
            df = self.structs if avro else self.framed
        w = df.write.format("eoskafka").mode("append")
        w = w.options(**self._kafka()).option("topic", self.topic("avro-e"))
        if avro:
            w = w.options(**self._avro(), **{"auto.register.schemas": "false",
                                             "use.latest.version": "true"})
        w.save()

    def write_builtin(self, topic: str | None = None, encoded: bool = False) -> None:
        """Spark's connector writing ``concat(header, to_avro(value))`` computed from the
        cached structs, or (``encoded``) the cached payloads."""
        df = self.framed if encoded or topic else self.encoding
        (df.write.format("kafka").mode("append").options(**self._kafka())
         .option("topic", topic or self.topic("avro-k")).save())

    def check(self) -> None:
        """Both readers give the same rows (a differential guard on what is measured)."""
        from pyspark.sql.avro.functions import from_avro
        from pyspark.sql.functions import expr

        ours = (self.spark.read.format("eoskafka").options(**self._kafka())
                .option("subscribe", self.input).options(**self._avro()).load()
                .select("value.*"))
        theirs = (self.spark.read.format("kafka").options(**self._kafka())
                  .option("subscribe", self.input).load()
                  .select(from_avro(expr("substring(value, 6)"), SCHEMA_JSON).alias("v"))
                  .select("v.*"))
        assert ours.count() == theirs.count() == self.records, "a reader lost records"
        assert ours.exceptAll(theirs).limit(1).count() == 0, "the readers' rows differ"


def bench(b: Bench, out: list[Measure]) -> None:
    """Append each measure as it completes (a failure keeps the earlier ones)."""
    b.fill_input()
    b.check()
    out.append(interleaved(
        Measure("read: batch -> noop, every field", b.records,
                target="eoskafka ≥ 1.0× built-in + from_avro"), b.runs,
        {"kafka": b.read_builtin, "eoskafka": b.read_eoskafka,
         "eoskafka raw (no decoding)": lambda: b.read_eoskafka(avro=False)}))
    out.append(interleaved(
        Measure("write: batch", b.records,
                target="eoskafka exactly-once ≥ 1.0× built-in + to_avro at-least-once"),
        b.runs,
        {"kafka": b.write_builtin, "eoskafka": b.write_eoskafka,
         RAW_WRITE.replace("eoskafka", "kafka"): lambda: b.write_builtin(encoded=True),
         RAW_WRITE: lambda: b.write_eoskafka(avro=False)}))


def start_spark() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("eoskafka-formats")
             .config("spark.jars", spark_jars(avro=True))
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.python.authenticate.socketTimeout", "120s")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def rows(measures: list[Measure]) -> list[list[str]]:
    """One row per eoskafka variant: medians, min-max, ratio to the built-in's median (the
    built-in variant of the same name, ``kafka`` for ``eoskafka``, where there is one)."""
    out = []
    for m in measures:
        for name in [n for n in m.times if n.startswith("eoskafka")]:
            base = "kafka" + name[len("eoskafka"):]
            base = base if base in m.times else "kafka"
            ratio = m.rate(name) / m.rate(base)
            met = ("yes" if ratio >= 1.0 else "no") if name == "eoskafka" else ""
            out.append([f"{m.name}" if name == "eoskafka" else f"{m.name}: {name}",
                        _rate(m, base), _rate(m, name), f"{ratio:.2f}×", met])
    return out


def _rate(m: Measure, name: str) -> str:
    rates = sorted(m.records / t for t in m.times[name])
    return f"{m.rate(name) / 1e3:,.0f}k rec/s ({rates[0] / 1e3:,.0f}–{rates[-1] / 1e3:,.0f}k)"


COLUMNS = ["measure", "Spark's `kafka` + spark-avro (min–max)", "eoskafka (min–max)",
           "eoskafka / Spark's", "≥ 1×"]


def save(out: Path, measures: list[Measure], env: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"# Avro end to end: eoskafka vs Spark's connector + spark-avro ({env['when']})",
             "", ", ".join(f"{k}: {v}" for k, v in env.items() if k != "when"), "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(r) + " |" for r in rows(measures)]
    loads = [x for m in measures for x in m.loads]
    if loads:
        lines += ["", f"load (1 min) during the timed runs: {min(loads):.1f}–{max(loads):.1f}"]
    out.write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps(
        {"env": env, "columns": COLUMNS, "rows": rows(measures),
         "measures": [asdict(m) for m in measures]}, indent=1, ensure_ascii=False))
    print("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    from tests.schema_registry import VERSION as APICURIO
    from tests.schema_registry import ApicurioRegistry

    parser = argparse.ArgumentParser(prog="python -m benchmarks.formats", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    import pyspark

    env = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "records": f"{args.records:,} Avro records (10 fields) in {PARTITIONS} partitions",
           "runs": args.runs, "Spark": f"pyspark {pyspark.__version__}, local[2]",
           "connector": f"spark-sql-kafka-0-10_2.13 + spark-avro_2.13 {connector_version()}",
           "broker": f"{KAFKA_LABEL}, 1 node (KRaft)",
           "registry": f"Apicurio Registry {APICURIO}", "cores": os.cpu_count(),
           "load at start": f"{load():.1f}"}
    measures: list[Measure] = []
    spark = None
    try:
        with KafkaCluster(nodes=1, version=KAFKA_VERSION) as kafka, \
                ApicurioRegistry() as registry:
            spark = start_spark()
            b = Bench(spark, kafka.bootstrap_servers, registry, args.records, args.runs)
            _with_retries(b.write_eoskafka)  # the sink's first transaction on a new broker
            bench(b, measures)
    finally:
        if spark is not None:
            spark.stop()
        if measures:
            env["load at end"] = f"{load():.1f}"
            save(args.out, measures, env)
    return 0
