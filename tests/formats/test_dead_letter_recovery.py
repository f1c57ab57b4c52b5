"""The dead-letter recipe through a driver killed (SIGKILL) at a commit step, then restarted.

tests/spark/pipeline_job.py runs as its own driver: a PERMISSIVE Avro read with
``includeDeadLetter`` -> the sink with ``valueFormat=avro`` and ``deadLetterTopic``, over
committed and aborted input transactions with records that cannot decode among them. The
driver is killed once at a commit step (both output topics are in every task's
transaction), the query restarts from its checkpoint in the tests' own session, and the raw
logs of both topics (tests/oracle.py; Kafka's own read_committed consumer agrees) hold
each committed input record exactly once: decoded in the clean topic or raw in the
dead-letter topic. A case costs a Spark driver's start, about 30 s: the fault step's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.crash_driver import FULL_SWEEP
from tests.formats.dead_letter_feed import assert_each_once, feed
from tests.java_oracle import assert_java_agrees
from tests.kafka_helpers import create_topic
from tests.oracle import assert_no_open_transactions, committed_view

pytestmark = [pytest.mark.spark, pytest.mark.faults, pytest.mark.kafka_only]

ROOT = Path(__file__).parents[2]
JOB = ROOT / "tests" / "spark" / "pipeline_job.py"
MAX_OFFSETS = "100"
COLUMNS = ["CAST(value.id AS STRING) AS key", "value", "deadLetter"]


def _options(url: str, dlq: str) -> tuple[dict[str, str], dict[str, str]]:
    source = {"valueFormat": "avro", "mode": "PERMISSIVE", "includeDeadLetter": "true",
              "schema.registry.url": url}
    sink = {"valueFormat": "avro", "schema.registry.url": url, "deadLetterTopic": dlq}
    return source, sink


#: An undecided batch: its transactions, dead letters among their records, are aborted and
#: the batch written again. With ``EOSKAFKA_SWEEP=full`` (``make sweep``) also a batch whose
#: EndTxns were sent (rolled forward on both topics, the replay discarded). A case costs
#: about 170-200 s on a loaded 2-core machine (two Spark drivers' starts, the registry's).
POINTS = ["commit.before_decision"] + (["endtxn.commit.answered"] if FULL_SWEEP else [])


@pytest.mark.parametrize("point", POINTS)
def test_dead_letters_once_through_a_driver_kill(spark, bootstrap, schema_registry, unique,
                                                tmp_path, point) -> None:
    src, clean, dlq = f"{unique}-in", f"{unique}-clean", f"{unique}-dlq"
    create_topic(bootstrap, src, partitions=3)
    create_topic(bootstrap, clean, partitions=2)
    create_topic(bootstrap, dlq, partitions=2)
    url = schema_registry.url
    fed = feed(bootstrap, url, src, partitions=3, rounds=2, per_round=40, every=5,
               transactional=f"{unique}-feed")
    source, sink = _options(url, dlq)
    flag, ckpt = tmp_path / "fired", tmp_path / "ckpt"
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "EOSKAFKA_TEST_SINK_OPTIONS": json.dumps(sink),
           "EOSKAFKA_TEST_SOURCE_OPTIONS": json.dumps(source),
           "EOSKAFKA_TEST_COLUMNS": json.dumps(COLUMNS),
           "EOSKAFKA_TEST_FAULTS": f"{point}=killgroup@{flag}"}
    env.pop("EOSKAFKA_TEST_FAULTS_FILE", None)
    proc = subprocess.run(
        [sys.executable, str(JOB), bootstrap, src, clean, str(ckpt), MAX_OFFSETS],
        env=env, start_new_session=True, capture_output=True, timeout=600)
    if proc.returncode != -9:
        print(proc.stdout.decode()[-3000:], proc.stderr.decode()[-6000:])
    assert flag.exists(), f"fault {point} never fired"
    assert proc.returncode == -9
    killed_with = sum(len(pv.open) for pv in committed_view(bootstrap, dlq).values())

    from tests.spark.pipeline_job import start_pipeline

    query = start_pipeline(spark, bootstrap, src, clean, str(ckpt), MAX_OFFSETS, sink,
                           source_options=source, columns=COLUMNS)
    assert query.awaitTermination(480), "the restarted query did not end within 480 s"
    assert query.exception() is None
    assert_each_once(bootstrap, url, src, clean, dlq, fed)
    if point == "commit.before_decision":  # the killed batch's dead letters: aborted
        assert killed_with, "the killed batch held no dead letter"
        assert sum(len(pv.aborted) for pv in committed_view(bootstrap, dlq).values()) \
            >= killed_with
    for topic in (clean, dlq):
        assert_java_agrees(bootstrap, topic)
        assert_no_open_transactions(bootstrap, topic)
