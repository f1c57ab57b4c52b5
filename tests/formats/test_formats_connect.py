"""valueFormat=avro over Spark Connect: the server's schema() looks the reader schema up
(``value.customer`` analyses on the client), and an exactly-once Avro write from a stream."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.schema_registry.avro import AvroDeserializer

from tests.connect_server import ConnectServer
from tests.formats.spark_io import consume_committed, registry
from tests.formats.test_avro_spark import ORDER, _produce, order
from tests.kafka_helpers import create_topic
from tests.oracle import assert_no_open_transactions

pytestmark = [pytest.mark.spark, pytest.mark.connect, pytest.mark.kafka_only]

JOB = Path(__file__).with_name("connect_formats_job.py")


def test_avro_read_and_exactly_once_write_over_connect(bootstrap, schema_registry, unique,
                                                       tmp_path: Path) -> None:
    source, out = f"{unique}-in", f"{unique}-out"
    create_topic(bootstrap, source)
    create_topic(bootstrap, out, partitions=2)
    records = [order(i) for i in range(8)]
    _produce(bootstrap, schema_registry.url, source, ORDER, records)
    with ConnectServer(tmp_path / "server") as server:
        proc = subprocess.run(
            [sys.executable, str(JOB), server.url, bootstrap, schema_registry.url, source, out,
             str(tmp_path / "chk")], capture_output=True, text=True, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("CONNECT-JOB ")]
    assert proc.returncode == 0 and lines, f"client exited {proc.returncode}:\n" \
                                           f"{proc.stderr[-4000:]}"
    seen = json.loads(lines[-1].removeprefix("CONNECT-JOB "))
    assert seen["session"] == "pyspark.sql.connect.session"
    assert seen["read"] == [r["customer"] for r in records]
    assert seen["stream_input_rows"] == len(records)
    got = consume_committed(bootstrap, out, len(records),
                            AvroDeserializer(registry(schema_registry.url)))
    assert sorted(got, key=lambda r: r["id"]) == records
    assert_no_open_transactions(bootstrap, out)
