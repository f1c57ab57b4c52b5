"""Shared by the formats tests: Confluent's serializers on one side, eoskafka on the other.

Records are produced with kafka-python (tests/kafka_helpers.py) after Confluent's own
serializers made the bytes, and read back with Confluent's consumer (read_committed) and
deserializers: the wire format is what the two ends agree on, never eoskafka with itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.waiting import until


def registry(url: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": url})


def value_context(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


def read(spark, bootstrap: str, url: str, topic: str, *, streaming: bool = False,
         **options: str):
    r = (spark.readStream if streaming else spark.read).format("eoskafka")
    r = (r.option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
         .option("startingOffsets", "earliest").option("schema.registry.url", url))
    for key, value in options.items():
        r = r.option(key, value)
    return r.load()


class Batches:
    """foreachBatch target: every non-empty micro-batch's rows, as plain dicts."""

    def __init__(self) -> None:
        self.batches: list[list[dict[str, Any]]] = []

    def __call__(self, df, batch_id: int) -> None:
        rows = [r.asDict(recursive=True) for r in df.collect()]
        if rows:
            self.batches.append(rows)

    @property
    def rows(self) -> list[dict[str, Any]]:
        return [r for b in self.batches for r in b]


def process_all(q, timeout_s: float = 300) -> None:
    """``processAllAvailable`` under a deadline (the query is stopped past it)."""
    timer = threading.Timer(timeout_s, q.stop)
    timer.daemon = True
    timer.start()
    try:
        q.processAllAvailable()
    finally:
        timer.cancel()
    assert q.isActive, f"processAllAvailable() did not return within {timeout_s}s"


def consume_committed(bootstrap: str, topic: str, n: int,
                      deserialize: Callable[[bytes, SerializationContext], Any]) -> list[Any]:
    """The first ``n`` records a read_committed Confluent consumer sees, deserialized."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[Any] = []
    try:
        def poll() -> int:
            for msg in consumer.consume(num_messages=500, timeout=1.0):
                if msg.error() is None:
                    got.append(deserialize(msg.value(), value_context(topic)))
            return len(got)

        until(poll, lambda count: count >= n, what=f"{n} committed records of {topic}",
              timeout_s=120)
    finally:
        consumer.close()
    return got
