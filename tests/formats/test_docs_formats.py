"""docs/formats.md's read and write blocks, run as written against Kafka and the registry
(only addresses, topic names and the checkpoint path are replaced)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.schema_registry.avro import AvroDeserializer

from tests import doc_blocks as docs
from tests.formats.spark_io import consume_committed, process_all, registry
from tests.formats.test_avro_spark import ORDER, _produce, order
from tests.kafka_helpers import create_topic
from tests.oracle import assert_no_open_transactions

pytestmark = [pytest.mark.spark, pytest.mark.kafka_only]

PAGE = "docs/formats.md"


def _run(first_line: str, swaps: dict[str, str], namespace: dict) -> None:
    text = docs.block(PAGE, first_line).text
    for old, new in swaps.items():
        assert old in text, f"{PAGE}: the snippet no longer contains {old!r}"
        text = text.replace(old, new)
    exec(compile(text, f"{PAGE}: {first_line}", "exec"), namespace)  # noqa: S102 - our docs


def test_read_and_write_blocks(spark, bootstrap, schema_registry, unique,
                               tmp_path: Path) -> None:
    topic, copy = f"{unique}-orders", f"{unique}-orders-copy"
    create_topic(bootstrap, topic)
    create_topic(bootstrap, copy)
    records = [order(i) for i in range(10)]
    _produce(bootstrap, schema_registry.url, topic, ORDER, records[:1])  # registers it
    common = {'"localhost:9092"': repr(bootstrap),
              '"http://localhost:8081"': repr(schema_registry.url)}
    ns: dict = {"spark": spark}
    _run('orders = (spark.readStream.format("eoskafka")', {**common, '"orders"': repr(topic)},
         ns)
    assert [f.name for f in ns["totals"].schema.fields] == ["customer", "total",
                                                             "valueSchemaId"]
    _run('query = (orders.select("value")',
         {**common, '"orders-copy"': repr(copy),
          '"/checkpoints/orders-copy"': repr(str(tmp_path / "chk"))}, ns)
    query = ns["query"]
    try:
        process_all(query)  # the read starts at the latest offsets (a stream's default)
        _produce(bootstrap, schema_registry.url, topic, ORDER, records)
        process_all(query)
    finally:
        query.stop()
    got = consume_committed(bootstrap, copy, len(records),
                            AvroDeserializer(registry(schema_registry.url)))
    assert sorted(got, key=lambda r: r["id"]) == records
    assert_no_open_transactions(bootstrap, copy)


def test_dead_letter_recipe(spark, bootstrap, schema_registry, unique, tmp_path: Path) -> None:
    """The dead-letter recipe as written: each record once, in the clean topic or the
    dead-letter topic (tests/formats/dead_letter_feed.py judges from the raw logs)."""
    from confluent_kafka.schema_registry import Schema

    from tests.formats.dead_letter_feed import assert_each_once, feed

    topic, clean, dlq = f"{unique}-orders", f"{unique}-clean", f"{unique}-dlq"
    create_topic(bootstrap, topic, partitions=2)
    create_topic(bootstrap, clean, partitions=2)
    create_topic(bootstrap, dlq)
    url = schema_registry.url
    registry(url).register_schema(f"{topic}-value", Schema(ORDER, "AVRO"))
    ns: dict = {"spark": spark}
    _run('rows = (spark.readStream.format("eoskafka")',
         {'"localhost:9092"': repr(bootstrap), '"http://localhost:8081"': repr(url),
          '"orders"': repr(topic), '"orders-clean"': repr(clean), '"orders-dlq"': repr(dlq),
          '"/checkpoints/orders-clean"': repr(str(tmp_path / "chk"))}, ns)
    query = ns["query"]
    try:
        process_all(query)  # the read starts at the latest offsets (a stream's default)
        fed = feed(bootstrap, url, topic, partitions=2)
        process_all(query)
    finally:
        query.stop()
    assert fed.bad and fed.good
    assert_each_once(bootstrap, url, topic, clean, dlq, fed)
    assert_no_open_transactions(bootstrap, clean)
    assert_no_open_transactions(bootstrap, dlq)
