"""The mixed pipeline: Spark's own Kafka source, read_committed, into eoskafka's sink.

Spark's connector reads (``format("kafka")``, ``kafka.isolation.level=read_committed``;
its offsets live in Spark's checkpoint, its jars on the classpath as in
tests/spark/test_migrate.py) and eoskafka's exactly-once sink writes. The input holds
committed and aborted transactions; the output, read from the raw log by tests/oracle.py
and by Kafka's own Java consumer (tests/java_oracle.py), must hold every committed input
record exactly once, through a driver killed inside the sink's commit and restarted
(docs/latency.md, "The mixed pipeline"). Without read_committed the same pipeline copies
the aborted records too: the read side's setting is the user's to make.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.java_oracle import assert_java_agrees
from tests.kafka_helpers import TxnWriter, create_topic
from tests.oracle import assert_no_open_transactions, committed_view
from tests.spark.test_source_stream import process_all

pytestmark = [pytest.mark.spark, pytest.mark.kafka_only]

JOB = Path(__file__).with_name("pipeline_job.py")
ROOT = Path(__file__).parents[2]


def _input(bootstrap: str, topic: str, unique: str) -> tuple[Counter[bytes], set[bytes]]:
    """Committed and aborted transactions over three partitions: (committed, aborted)."""
    create_topic(bootstrap, topic, partitions=3)
    aborted: set[bytes] = set()
    with (TxnWriter(bootstrap, f"{unique}-feed-a") as a,
          TxnWriter(bootstrap, f"{unique}-feed-b") as b):
        for round_ in range(2):
            for p in range(3):
                a.committed(topic, [f"a{round_}-{p}-{i}".encode() for i in range(40)],
                            partition=p)
                gone = [f"x{round_}-{p}-{i}".encode() for i in range(10)]
                b.aborted(topic, gone, partition=p)
                aborted.update(gone)
    return _committed(bootstrap, topic), aborted


def _committed(bootstrap: str, topic: str) -> Counter[bytes]:
    return Counter(v for pv in committed_view(bootstrap, topic).values()
                   for v in pv.committed_values)


def _run_killed(bootstrap: str, src: str, out: str, ckpt: Path, faults: str) -> int:
    """tests/spark/pipeline_job.py with Spark's source, as its own driver process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EOSKAFKA_TEST_SOURCE": "kafka",
           "EOSKAFKA_TEST_FAULTS": faults}
    env.pop("EOSKAFKA_TEST_FAULTS_FILE", None)
    proc = subprocess.run([sys.executable, str(JOB), bootstrap, src, out, str(ckpt), "150"],
                          env=env, start_new_session=True, capture_output=True, timeout=600)
    if proc.returncode not in (0, -9) or os.environ.get("EOSKAFKA_TEST_VERBOSE"):
        print(proc.stdout.decode()[-3000:], proc.stderr.decode()[-6000:])
    return proc.returncode


@pytest.mark.faults
@pytest.mark.parametrize("point", ["commit.before_decision", "endtxn.commit.answered"])
def test_spark_source_into_eoskafka_sink_exactly_once_through_a_driver_kill(
        spark, bootstrap: str, unique: str, tmp_path: Path, point: str) -> None:
    """Killed undecided (the batch is aborted, then written again) or half committed (rolled
    forward; Spark replays the batch from its checkpoint's offsets and the sink discards
    the replay): either way each committed input record is in the output once."""
    from tests.spark.pipeline_job import start_pipeline

    src, out = f"{unique}-in", f"{unique}-out"
    expected, aborted = _input(bootstrap, src, unique)
    create_topic(bootstrap, out, partitions=2)
    flag = tmp_path / "fired"
    assert _run_killed(bootstrap, src, out, tmp_path / "ckpt",
                       f"{point}=killgroup@{flag}") == -9
    assert flag.exists(), f"fault {point} never fired"
    query = start_pipeline(spark, bootstrap, src, out, str(tmp_path / "ckpt"), "150",
                           source_format="kafka")
    assert query.awaitTermination(480), "the restarted query did not end within 480 s"
    assert query.exception() is None
    written = _committed(bootstrap, out)
    assert written == expected
    assert not aborted & set(written)
    assert_java_agrees(bootstrap, out)
    assert_no_open_transactions(bootstrap, out)


def test_without_read_committed_the_aborted_input_is_copied(
        spark, bootstrap: str, unique: str, tmp_path: Path) -> None:
    """Spark's source reads read_uncommitted by default: the sink then commits, exactly once,
    records whose own transaction aborted. Why the mixed pipeline must set the option."""
    src, out = f"{unique}-in", f"{unique}-out"
    expected, aborted = _input(bootstrap, src, unique)
    create_topic(bootstrap, out, partitions=2)
    query = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", src).option("startingOffsets", "earliest").load()
             .selectExpr("key", "value").writeStream.format("eoskafka")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", out)
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    process_all(query)
    query.awaitTermination(120)
    assert query.exception() is None
    written = _committed(bootstrap, out)
    assert aborted <= set(written), json.dumps(sorted(v.decode() for v in aborted
                                                      - set(written))[:5])
    assert written - Counter(aborted) == expected
