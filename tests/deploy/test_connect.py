"""eoskafka over Spark Connect: a started server, a client in its own process.

Read, batch write and streaming (source and exactly-once sink), once through the
static registration (the server's Python finds ``pyspark_eoskafka``) and once
through ``eos_kafka_source.register(spark)`` from the client on a server that has
no static registration (the client asserts it really had none first). Results
come from the client (what it read) and from tests/oracle.py (what is committed).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.connect_server import ConnectServer
from tests.kafka_helpers import TxnWriter, create_topic
from tests.oracle import assert_no_open_transactions, committed_values

pytestmark = [pytest.mark.spark, pytest.mark.connect]

JOB = Path(__file__).with_name("connect_job.py")


def _input(bootstrap: str, topic: str) -> list[bytes]:
    """Committed records in two transactions around an aborted one; returns what is committed."""
    create_topic(bootstrap, topic, partitions=2)
    with TxnWriter(bootstrap, f"{topic}-feeder") as w:
        w.committed(topic, [f"c{i}".encode() for i in range(30)])
        w.aborted(topic, [b"aborted"] * 5)
        w.committed(topic, [f"d{i}".encode() for i in range(20)])
    values = [v for v in committed_values(bootstrap, topic) if v is not None]
    assert len(values) == 50 and b"aborted" not in values
    return values


def _run(server: ConnectServer, bootstrap: str, unique: str, work: Path, mode: str) -> dict:
    source, batch_out, stream_out = unique, f"{unique}-batch", f"{unique}-stream"
    for topic in (batch_out, stream_out):
        create_topic(bootstrap, topic, partitions=2)
    proc = subprocess.run(
        [sys.executable, str(JOB), server.url, bootstrap, source, batch_out, stream_out,
         str(work / "checkpoint"), mode],
        capture_output=True, text=True, timeout=600,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("CONNECT-JOB ")]
    assert proc.returncode == 0 and lines, (
        f"client exited {proc.returncode}:\n{proc.stderr[-4000:]}\nserver log: {server.log_path}")
    return json.loads(lines[-1].removeprefix("CONNECT-JOB "))


@pytest.mark.parametrize("mode", [pytest.param("static", marks=pytest.mark.smoke), "register"])
def test_read_batch_write_and_exactly_once_stream_over_connect(
    bootstrap: str, unique: str, tmp_path: Path, mode: str
) -> None:
    committed = _input(bootstrap, unique)
    with ConnectServer(tmp_path / "server", hide_static=mode == "register") as server:
        out = _run(server, bootstrap, unique, tmp_path, mode)

    assert out["session"] == "pyspark.sql.connect.session"
    assert out["static_before_register"] is (mode == "static")
    assert sorted(out["read"]) == sorted(v.decode() for v in committed)
    assert Counter(committed_values(bootstrap, f"{unique}-batch")) == Counter(committed)
    assert Counter(committed_values(bootstrap, f"{unique}-stream")) == Counter(
        v.upper() for v in committed)
    assert out["stream_input_rows"] == len(committed)
    # A user's mistake reaches the Connect client with our condition in its first lines.
    assert "EOSKAFKA_INVALID_OPTION" in out["bad_option"]
    assert "did you mean 'subscribe'" in out["bad_option"]
    for topic in (f"{unique}-batch", f"{unique}-stream"):
        assert_no_open_transactions(bootstrap, topic)
