"""Where an Avro write's time goes: ``python -m benchmarks.formats split``.

The same cached rows as ``make bench-formats``, handed to Python workers with
``mapInArrow`` (what Spark's Python data source writer gets: Arrow batches), timed as:
the framed binary column alone (what a ``raw`` write hands over), the struct column alone
(what a ``valueFormat=avro`` write hands over), and the struct column encoded by
eoskafka's Avro encoder in the worker. Beside them, the fixed cost of one query: a
one-row eoskafka write with ``valueFormat=avro`` and ``raw`` (planning, registry, the
transaction). Kafka is needed only for that last pair; the medians go to stdout.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from eos_kafka_source.apache_kafka import KafkaCluster

from ..common import KAFKA_VERSION, load
from .endtoend import SCHEMA_JSON, Bench, start_spark


def _drain(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    n = sum(b.num_rows for b in batches)
    yield pa.RecordBatch.from_pydict({"n": [n]})


def _encoding(schema_id: int) -> Callable[[Iterator[pa.RecordBatch]],
                                          Iterator[pa.RecordBatch]]:
    def encode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from eos_kafka_source.formats import avro
        from eos_kafka_source.formats.schemas import AVRO, RegisteredSchema

        enc = avro.encoder(RegisteredSchema(schema_id, AVRO, SCHEMA_JSON), None)  # type: ignore[arg-type]
        n = 0
        for b in batches:
            n += len(enc.encode(b.column(0), "value"))
        yield pa.RecordBatch.from_pydict({"n": [n]})
    return encode


def median_s(runs: int, fn: Callable[[], Any]) -> tuple[float, float, float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), min(times), max(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.formats split",
                                     description=__doc__)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    from tests.schema_registry import ApicurioRegistry

    spark = None
    try:
        with KafkaCluster(nodes=1, version=KAFKA_VERSION) as kafka, \
                ApicurioRegistry() as registry:
            spark = start_spark()
            b = Bench(spark, kafka.bootstrap_servers, registry, args.records, args.runs)
            b.write_eoskafka()  # warm-up: the sink's first transaction on a new broker
            one_struct = b.structs.limit(1).cache()
            one_framed = b.framed.limit(1).cache()
            one_struct.count()
            one_framed.count()
            work: dict[str, Callable[[], Any]] = {
                "handoff: framed binary column -> Python": lambda: b.framed.mapInArrow(
                    _drain, "n long").collect(),
                "handoff: struct column -> Python": lambda: b.structs.mapInArrow(
                    _drain, "n long").collect(),
                "handoff + Avro encode in the worker": lambda: b.structs.mapInArrow(
                    _encoding(b.schema_id), "n long").collect(),
                "eoskafka write, 1 row, avro": lambda: b.write_eoskafka(df=one_struct),
                "eoskafka write, 1 row, raw": lambda: b.write_eoskafka(avro=False,
                                                                        df=one_framed),
            }
            print(f"{args.records:,} records, load {load():.1f}")
            for name, fn in work.items():
                fn()
                med, lo, hi = median_s(args.runs, fn)
                rate = f"{args.records / med / 1e3:,.0f}k rec/s" if "1 row" not in name else ""
                print(f"{name:<45} {med:6.2f} s ({lo:.2f}–{hi:.2f})  {rate}  "
                      f"load {load():.1f}", flush=True)
    finally:
        if spark is not None:
            spark.stop()
    return 0
