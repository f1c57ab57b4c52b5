"""eoskafka's INFO lines reach the driver's stderr with EOSKAFKA_LOG_LEVEL=INFO, and
docs/operations.md's log4j2 file drops Spark's own INFO lines while keeping them.

The query runs in a process of its own (tests/spark/log_job.py): its stderr is what an
operator's driver log holds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import doc_blocks
from tests.kafka_helpers import create_topic, write_plain

pytestmark = [pytest.mark.spark]

JOB = Path(__file__).with_name("log_job.py")
LOG4J2 = "# log4j2.properties: Spark's WARN and above on stderr; eoskafka's lines come beside them"


def test_batch_committed_line_reaches_the_driver_log(bootstrap: str, unique: str,
                                                     tmp_path: Path) -> None:
    source, out = f"{unique}-in", f"{unique}-out"
    create_topic(bootstrap, source, partitions=2)
    create_topic(bootstrap, out, partitions=2)
    write_plain(bootstrap, source, [b"a", b"b", b"c"])
    log4j2 = tmp_path / "log4j2.properties"
    log4j2.write_text(doc_blocks.block("docs/operations.md", LOG4J2).text)
    env = {**os.environ, "EOSKAFKA_LOG_LEVEL": "INFO"}
    done = subprocess.run([sys.executable, str(JOB), bootstrap, source, out,
                           str(tmp_path / "chk"), str(log4j2)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "LOG-JOB done" in done.stdout, done.stderr[-4000:]
    lines = done.stderr.splitlines()
    committed = [ln for ln in lines if "INFO eos_kafka_source.sink: eoskafka: batch 0 "
                                       "committed " in ln]
    assert committed and "3 records" in committed[0], done.stderr[-4000:]
    spark_info = [ln for ln in lines if " INFO " in ln and "eos_kafka_source" not in ln]
    assert not spark_info, spark_info[:5]
