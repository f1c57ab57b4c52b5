"""Per-batch growth without Spark: the hooks of one micro-batch, called in a loop.

``python -m benchmarks.longrun loop BATCHES`` starts one Apache Kafka node (the reference
release) and runs BATCHES micro-batches in this one process the way Spark's long-lived
workers call them: the stream reader's ``latestOffset``/``partitions``/``commit`` (the
planning worker), ``streamWriter()`` per batch (its worker is reused), the tasks'
``read``/``write`` and the writer's ``commit``. Every ``--every`` batches it prints Python
heap (tracemalloc), open files, threads and RSS, and at the end the allocation sites that
grew most since the warm-up: a leak that takes hours to show in RSS under Spark shows here
in minutes.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

from pyspark.sql.types import StructType

from eos_kafka_source.apache_kafka import KafkaCluster
from eos_kafka_source.broker import EmbeddedBroker
from eos_kafka_source.datasource import EosKafkaDataSource
from eos_kafka_source.sink.spark_writer import EosKafkaStreamWriter, _Writer

from ..common import KAFKA_VERSION, client, ready_topic
from .bench import PARTITIONS, Feeder


class Batches:
    """One query's hooks, called as Spark calls them for each micro-batch."""

    def __init__(self, bootstrap: str, source: str, sink: str, checkpoint: str,
                 max_offsets: int = 20) -> None:
        Path(checkpoint, "metadata").write_text(json.dumps({"id": str(uuid.uuid4())}) + "\n")
        opts = {"kafka.bootstrap.servers": bootstrap, "subscribe": source,
                "startingOffsets": "earliest", "maxOffsetsPerTrigger": str(max_offsets)}
        self.source = EosKafkaDataSource(opts)
        self.schema = self.source.schema()
        self.reader = self.source.streamReader(self.schema)
        self.out_schema = StructType([f for f in self.schema.fields if f.name in ("key", "value")])
        self.sink_opts = {"kafka.bootstrap.servers": bootstrap, "topic": sink,
                          "checkpointLocation": checkpoint}
        self.start = self.reader.initialOffset()
        self.batch = 0
        self.rows = 0

    def run_one(self) -> bool:
        """One micro-batch; False if there was nothing to read (Spark runs no batch)."""
        from pyspark.sql.streaming.datasource import ReadMaxRows

        end = self.reader.latestOffset(self.start, ReadMaxRows(20))
        if end == self.start:
            return False
        parts = self.reader.partitions(self.start, end)
        sink = EosKafkaDataSource(self.sink_opts)
        writer = sink.streamWriter(self.out_schema, False)  # the planning-side writer
        messages = []
        for part in parts:
            batches = [b.select(["key", "value"]) for b in self.reader.read(part)]
            self.rows += sum(b.num_rows for b in batches)
            messages.append(writer.write(iter(batches)))
        # commit() runs in another worker, on a fresh writer that skips the planning steps.
        committer = EosKafkaStreamWriter.__new__(EosKafkaStreamWriter)
        _Writer.__init__(committer, self.sink_opts, self.out_schema, streaming=True)
        committer.commit(messages, self.batch)
        self.reader.commit(end)
        self.start, self.batch = end, self.batch + 1
        return True


def _print_growth(base: Any, top: int) -> None:
    """The allocation sites that grew most since ``base`` (live blocks, not churn)."""
    for stat in tracemalloc.take_snapshot().compare_to(base, "traceback")[:top]:
        print(f"  {stat.size_diff / 1024:+.1f} KiB {stat.count_diff:+d} blocks", flush=True)
        for line in stat.traceback.format()[-6:]:
            print("     ", line, flush=True)


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.longrun loop",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("batches", type=int)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--base", type=int, default=200, help="batch of the heap's baseline")
    ap.add_argument("--broker", choices=("kafka", "tansu"), default="kafka",
                    help="tansu: the embedded broker (light; Python-side growth only)")
    args = ap.parse_args(argv)
    broker = (KafkaCluster(nodes=1, version=KAFKA_VERSION) if args.broker == "kafka"
              else EmbeddedBroker())
    with broker as kafka:
        cfg = client(kafka.bootstrap_servers)
        source, sink = ready_topic(cfg, "loop-in", PARTITIONS), ready_topic(cfg, "loop-out",
                                                                            PARTITIONS)
        feeder = Feeder(kafka.bootstrap_servers, source)
        feeder.start()
        loop = Batches(kafka.bootstrap_servers, source, sink, tempfile.mkdtemp(prefix="loop-"))
        tracemalloc.start(6)
        base: Any = None
        started = time.monotonic()
        try:
            while loop.batch < args.batches:
                feeder.consumed = loop.rows
                if not loop.run_one():
                    feeder.stopping.wait(0.05)  # nothing new yet: the feeder is behind
                    continue
                if loop.batch % args.every == 0:
                    gc.collect()
                    heap, _ = tracemalloc.get_traced_memory()
                    print(json.dumps({"batch": loop.batch, "t": round(time.monotonic() - started),
                                      "heap_kb": heap // 1024, "fds": fds(),
                                      "threads": threading.active_count(),
                                      "rss_mb": round(rss_mb(), 1),
                                      "objects": len(gc.get_objects())}), flush=True)
                    if base is None and loop.batch >= args.base:
                        base = tracemalloc.take_snapshot()
                    elif base is not None:
                        _print_growth(base, 3)
        finally:
            feeder.stopping.set()
        if base is not None:
            gc.collect()
            _print_growth(base, 8)
    return 0


if __name__ == "__main__":
    sys.exit(main())
