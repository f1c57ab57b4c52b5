"""``make demo``: the exactly-once pipeline end to end, on an embedded broker.

Feeds an input topic with transactional producers (some transactions aborted,
one held open for a while), runs ``readStream.format("eoskafka")`` (read_committed)
-> a transformation -> ``writeStream.format("eoskafka")`` (exactly-once) with
one injected task failure, shows progress per micro-batch, and ends with an
audit of the output computed from the transaction markers in the log.

    python -m eos_kafka_source.demo [--broker tansu|kafka] [--bootstrap-server HOST:PORT]
                                    [--records N]

``--broker kafka`` runs Apache Kafka 4.3 as a local JVM process (jars fetched from
Maven Central once) instead of Tansu, and has Kafka's own Java console consumer
(``isolation.level=read_committed``) read the output too: it must agree with the
marker-resolving audit record for record. Exits 1 if the audit finds a lost,
duplicated or leaked record, or an open transaction, or the two readers disagree.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .broker import EmbeddedBroker
from .client.config import ClientConfig
from .wire import KafkaWire, create_topic

TXN_SIZE = 250
ABORT_EVERY = 4  # every 4th input transaction is aborted


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    run = uuid.uuid4().hex[:6]
    work = Path(tempfile.mkdtemp(prefix="eoskafka-demo-"))
    flag = work / "failure-injected"
    # One task of one batch fails after writing and flushing; Spark retries it.
    # (A test switch the sink honours only when this variable is set.)
    os.environ["EOSKAFKA_TEST_FAULTS"] = f"write.after_flush/1=raise@{flag}"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with _broker(args.bootstrap_server, args.broker) as bootstrap:
        source, sink = f"demo-in-{run}", f"demo-out-{run}"
        config = ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap})
        with KafkaWire(config) as wire:
            create_topic(wire, source, args.partitions)
            create_topic(wire, sink, args.partitions)
        _say(f"topics {source} -> {sink}, {args.partitions} partitions each")
        feeder = _Feeder(bootstrap, source, args.records)
        spark = _spark()
        try:
            feeder.start()
            query = _pipeline(spark, bootstrap, source, sink, work / "checkpoint")
            feeder.join()
            _say(f"feeders done: {feeder.committed} records committed, "
                 f"{feeder.aborted} in aborted transactions")
            query.processAllAvailable()
            query.stop()
            if query.exception() is not None:
                raise RuntimeError(f"the pipeline failed: {query.exception()}")
        finally:
            spark.stop()
        _say("injected task failure fired: " + ("yes" if flag.exists() else "no"))
        audit = _audit(config, sink, feeder)
        if args.broker == "kafka" or args.java_check:
            audit.update(_java_check(bootstrap, sink, audit))
    return _report(audit)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m eos_kafka_source.demo",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", choices=("tansu", "kafka"), default="tansu",
                        help="tansu: the embedded pip-only broker (default); kafka: Apache "
                             "Kafka 4.3 as a local JVM process (needs Java 17 and Maven once)")
    parser.add_argument("--bootstrap-server", help="use this broker instead of starting one")
    parser.add_argument("--java-check", action="store_true",
                        help="also read the output with Kafka's Java read_committed consumer "
                             "(always on with --broker kafka)")
    parser.add_argument("--records", type=int, default=20_000, help="input records (default 20000)")
    parser.add_argument("--partitions", type=int, default=4)
    return parser.parse_args(argv)


def _say(message: str) -> None:
    print(f"[demo] {message}", flush=True)


@contextmanager
def _broker(bootstrap: str | None, kind: str) -> Iterator[str]:
    if bootstrap:
        _say(f"using the broker at {bootstrap}")
        yield bootstrap
        return
    if kind == "kafka":
        from .apache_kafka import KafkaCluster

        _say("starting Apache Kafka (KRaft, one node; the first run fetches its jars)")
        with KafkaCluster(nodes=1) as kafka:
            _say(f"Apache Kafka {kafka.version} on {kafka.bootstrap_servers} "
                 f"(log {kafka.log_paths[0]})")
            yield kafka.bootstrap_servers
        _say("Apache Kafka stopped")
        return
    with EmbeddedBroker() as broker:
        _say(f"embedded broker (Tansu) on {broker.bootstrap_servers}")
        yield broker.bootstrap_servers
    _say("embedded broker stopped")


class _Feeder(threading.Thread):
    """Two transactional producers; every 4th transaction aborted; ids are unique."""

    def __init__(self, bootstrap: str, topic: str, records: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.records = bootstrap, topic, records
        self.committed = self.aborted = 0
        self.committed_ids: set[int] = set()
        self.aborted_ids: set[int] = set()
        self.error: BaseException | None = None

    def run(self) -> None:
        from kafka import KafkaProducer

        producers = [KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5,
                                   transactional_id=f"demo-feeder-{uuid.uuid4().hex[:6]}-{i}")
                     for i in range(2)]
        try:
            for p in producers:
                p.init_transactions()
            next_id, txn = 0, 0
            while next_id < self.records:
                producer = producers[txn % 2]
                ids = range(next_id, min(next_id + TXN_SIZE, self.records))
                producer.begin_transaction()
                for i in ids:
                    value = json.dumps({"id": i, "amount": round(i * 0.37, 2)}).encode()
                    producer.send(self.topic, value=value, key=str(i % 97).encode())
                producer.flush()
                if txn % ABORT_EVERY == ABORT_EVERY - 1:
                    producer.abort_transaction()
                    self.aborted += len(ids)
                    self.aborted_ids.update(ids)
                else:
                    producer.commit_transaction()
                    self.committed += len(ids)
                    self.committed_ids.update(ids)
                next_id, txn = ids.stop, txn + 1
        except BaseException as exc:  # reported by the audit
            self.error = exc
            for p in producers:
                try:
                    p.abort_transaction()
                except Exception:
                    pass
        finally:
            for p in producers:
                p.close()


def _spark():
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2,3]").appName("eoskafka-demo")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    # FATAL: the injected failure would otherwise print Spark's full task-failure trace.
    spark.sparkContext.setLogLevel("FATAL")
    return spark


def _pipeline(spark, bootstrap: str, source: str, sink: str, checkpoint: Path):
    from pyspark.sql.streaming import StreamingQueryListener

    class Progress(StreamingQueryListener):
        def onQueryStarted(self, event) -> None:  # noqa: N802 (Spark's names)
            _say("pipeline started: read_committed -> transform -> exactly-once sink")

        def onQueryProgress(self, event) -> None:  # noqa: N802
            p = event.progress
            if p.numInputRows:
                _say(f"batch {p.batchId}: {p.numInputRows} records in, "
                     f"{p.processedRowsPerSecond:,.0f} records/s")

        def onQueryIdle(self, event) -> None:  # noqa: N802
            pass

        def onQueryTerminated(self, event) -> None:  # noqa: N802
            _say("pipeline stopped")

    spark.streams.addListener(Progress())
    df = (spark.readStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", "4000").load())
    cents = df.selectExpr(
        "key",
        "to_json(named_struct('id', get_json_object(CAST(value AS STRING), '$.id'), "
        "'cents', CAST(round(CAST(get_json_object(CAST(value AS STRING), '$.amount') AS DOUBLE)"
        " * 100) AS BIGINT)))"
        " AS value",
    )
    return (cents.writeStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink).option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="1 second").start())


def _audit(config: ClientConfig, topic: str, feeder: _Feeder) -> dict[str, Any]:
    from .cli.audit import audit_topic

    with KafkaWire(config) as wire:
        doc, committed = audit_topic(wire, topic, by="value", id_field="id")
    ids = {int(json.loads(i)) for i in committed}
    totals = doc["totals"]
    return {
        "_ids": ids,
        "feeder ok": feeder.error is None,
        "input committed": feeder.committed,
        "input aborted (never to appear)": feeder.aborted,
        "output committed": totals["committed"],
        "missing": len(feeder.committed_ids - ids),
        "duplicates": totals["duplicates"],
        "aborted records leaked": len(feeder.aborted_ids & ids),
        "open transactions": sum(len(p["open_transactions"]) for p in doc["partitions"]),
    }


def _java_check(bootstrap: str, topic: str, audit: dict[str, Any]) -> dict[str, int | bool]:
    """Kafka's own read_committed consumer (kafka-tools) against the marker-resolving audit:
    the same number of records and exactly the committed ids, each once."""
    from .apache_kafka import KafkaTools

    _say("reading the output with Kafka's Java console consumer (read_committed)")
    records = KafkaTools(bootstrap).consume_expecting(topic, int(audit["output committed"]))
    ids = Counter(json.loads(r.value)["id"] for r in records)
    agrees = (len(records) == audit["output committed"]
              and set(map(int, ids)) == audit.pop("_ids") and set(ids.values()) <= {1})
    return {"java read_committed records": len(records), "java agrees": agrees}


def _report(audit: dict[str, Any]) -> int:
    ok = (audit["feeder ok"] and audit["missing"] == 0 and audit["duplicates"] == 0
          and audit["aborted records leaked"] == 0 and audit["open transactions"] == 0
          and audit["output committed"] == audit["input committed"]
          and audit.get("java agrees", True) is True)
    audit.pop("_ids", None)
    width = max(len(k) for k in audit)
    print("\n  audit of the output topic (resolved from transaction markers)")
    for key, value in audit.items():
        print(f"  {key:<{width}}  {value}")
    print(f"\n  result: {'EXACTLY ONCE' if ok else 'FAILED'}\n", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    started = time.monotonic()
    try:
        code = main()
    except Exception as exc:  # a failed demo says why in one line, then exits 1
        _say(f"FAILED: {type(exc).__name__}: {str(exc).splitlines()[0]}")
        code = 1
    _say(f"finished in {time.monotonic() - started:.0f}s")
    sys.exit(code)
