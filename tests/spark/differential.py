"""Run the same read or write through ``format("kafka")`` and ``format("eoskafka")``.

Spark's own connector is on the session's classpath when the suite runs on
Apache Kafka (tests/conftest.py). Each helper returns the two results in one
comparable form, so a test states its case and asserts equality. Spark's
connector reads uncommitted by default; eoskafka committed: :func:`read_both`
gives Spark ``kafka.isolation.level=read_committed`` unless the case sets a level.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition

FORMATS = ("kafka", "eoskafka")
COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp", "timestampType")

Row = tuple[Any, ...]


def _options(fmt: str, bootstrap: str, options: dict[str, str]) -> dict[str, str]:
    out = {"kafka.bootstrap.servers": bootstrap, **options}
    if fmt == "kafka" and "kafka.isolation.level" not in out:
        out["kafka.isolation.level"] = "read_committed"
    return out


def normalise(rows: list[Any], headers: bool = False) -> list[Row]:
    """Rows as sorted plain tuples (bytes for binary columns, headers as tuples)."""
    out = []
    for r in rows:
        row: list[Any] = [r.topic, r.partition, r.offset,
                          None if r.key is None else bytes(r.key),
                          None if r.value is None else bytes(r.value), r.timestamp,
                          r.timestampType]
        if headers:
            row.append(None if r.headers is None else tuple(
                (h.key, None if h.value is None else bytes(h.value)) for h in r.headers))
        out.append(tuple(row))
    return sorted(out, key=lambda t: (t[0], t[1], t[2]))


def read_batch(spark, fmt: str, bootstrap: str, **options: str) -> list[Row]:
    reader = spark.read.format(fmt)
    for key, value in _options(fmt, bootstrap, options).items():
        reader = reader.option(key, value)
    headers = options.get("includeHeaders", "false") == "true"
    return normalise(reader.load().collect(), headers)


def read_both(spark, bootstrap: str, **options: str) -> dict[str, list[Row]]:
    """One batch read per format with the same options: ``{"kafka": rows, "eoskafka": rows}``."""
    return {fmt: read_batch(spark, fmt, bootstrap, **options) for fmt in FORMATS}


class Collect:
    """foreachBatch target keeping every micro-batch's normalised rows, by batch id."""

    def __init__(self, headers: bool = False) -> None:
        self.headers = headers
        self.batches: dict[int, list[Row]] = {}

    def __call__(self, df, batch_id: int) -> None:
        self.batches[batch_id] = normalise(df.collect(), self.headers)

    @property
    def rows(self) -> list[Row]:
        return sorted((r for rows in self.batches.values() for r in rows),
                      key=lambda t: (t[0], t[1], t[2]))


def start_stream(spark, fmt: str, bootstrap: str, sink: Collect, checkpoint: str,
                 trigger: dict[str, Any] | None = None, **options: str):
    reader = spark.readStream.format(fmt)
    for key, value in _options(fmt, bootstrap, options).items():
        reader = reader.option(key, value)
    writer = reader.load().writeStream.foreachBatch(sink).option("checkpointLocation",
                                                                 checkpoint)
    if trigger is not None:
        writer = writer.trigger(**trigger)
    return writer.start()


def _parsed(offset: Any) -> Any:
    return json.loads(offset) if isinstance(offset, str) else offset


def offset_ranges(query) -> list[tuple[Any, Any]]:
    """(startOffset, endOffset) of every batch that read something, parsed from progress."""
    out = []
    for p in query.recentProgress:
        source = p["sources"][0]
        start, end = _parsed(source["startOffset"]), _parsed(source["endOffset"])
        if start != end:
            out.append((start, end))
    return out


def available_now_both(spark, bootstrap: str, tmp_path, name: str = "run",
                       headers: bool = False, **options: str) -> dict[str, tuple[Collect, Any]]:
    """One Trigger.AvailableNow run per format (its own checkpoint under ``tmp_path``);
    ``{fmt: (rows collected, the finished query)}``. Rerun with the same ``name`` to resume."""
    out = {}
    for fmt in FORMATS:
        sink = Collect(headers)
        q = start_stream(spark, fmt, bootstrap, sink, str(tmp_path / f"{name}-{fmt}"),
                         {"availableNow": True}, **options)
        q.awaitTermination()
        out[fmt] = (sink, q)
    return out


@contextmanager
def admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    """kafka-python's admin client (an independent client for topic changes)."""
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        yield client
    finally:
        client.close()


def delete_topic(bootstrap: str, topic: str) -> None:
    with admin(bootstrap) as a:
        a.delete_topics([topic], timeout_ms=30000)


def delete_records(bootstrap: str, topic: str, before: dict[int, int]) -> None:
    """Move partitions' log start to ``before[p]`` (what retention does, without waiting)."""
    with admin(bootstrap) as a:
        a.delete_records({TopicPartition(topic, p): o for p, o in before.items()},
                         timeout_ms=30000)
