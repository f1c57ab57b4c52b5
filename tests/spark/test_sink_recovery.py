"""The driver killed (SIGKILL) or failing at each step of a commit, then restarted.

Each case runs tests/spark/pipeline_job.py as its own driver process
(eoskafka source -> eoskafka sink, checkpoint on disk), arms one fault point
so it fires once, and runs the job again from the checkpoint: in the tests' own
SparkSession, another driver as a restart on another machine would be (a second
process per case cost a JVM's and Spark's start-up, about 10 s, in CI). The
committed view of the output must hold every committed input record exactly once.
`make sweep` runs every commit step (KILL_POINTS, RAISE_POINTS).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.crash_driver import FULL_SWEEP
from tests.java_oracle import assert_java_agrees
from tests.kafka_helpers import TxnWriter, create_topic
from tests.oracle import assert_no_open_transactions, committed_view

pytestmark = [pytest.mark.spark, pytest.mark.faults]

JOB = Path(__file__).with_name("pipeline_job.py")
ROOT = Path(__file__).parents[2]


def _input(bootstrap: str, topic: str, unique: str) -> Counter[bytes]:
    """Committed and aborted transactions over three partitions; returns what is committed."""
    create_topic(bootstrap, topic, partitions=3)
    with (TxnWriter(bootstrap, f"{unique}-feed-a") as a,
          TxnWriter(bootstrap, f"{unique}-feed-b") as b):
        for round_ in range(2):
            for p in range(3):
                a.committed(topic, [f"a{round_}-{p}-{i}".encode() for i in range(40)], partition=p)
                b.aborted(topic, [f"x{round_}-{p}-{i}".encode() for i in range(10)], partition=p)
    return _committed(bootstrap, topic)


def _committed(bootstrap: str, topic: str) -> Counter[bytes]:
    return Counter(v for pv in committed_view(bootstrap, topic).values()
                   for v in pv.committed_values)


def _restart(spark, bootstrap: str, src: str, out: str, ckpt: Path,  # noqa: ANN001
             sink_options: dict[str, str] | None = None) -> None:
    """The job (again) from its checkpoint, in this process's session; it must end cleanly."""
    from tests.spark.pipeline_job import start_pipeline

    query = start_pipeline(spark, bootstrap, src, out, str(ckpt), "150", sink_options)
    assert query.awaitTermination(480), "the restarted query did not end within 480 s"
    assert query.exception() is None


def _run(bootstrap: str, src: str, out: str, ckpt: Path, faults: str = "",
         sink_options: dict[str, str] | None = None) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "EOSKAFKA_TEST_SINK_OPTIONS": json.dumps(sink_options or {})}
    env.pop("EOSKAFKA_TEST_FAULTS_FILE", None)
    if faults:
        env["EOSKAFKA_TEST_FAULTS"] = faults
    proc = subprocess.run(
        [sys.executable, str(JOB), bootstrap, src, out, str(ckpt), "150"],
        env=env, start_new_session=True, capture_output=True, timeout=600,
    )
    if proc.returncode not in (0, -9) or os.environ.get("EOSKAFKA_TEST_VERBOSE"):
        print(proc.stdout.decode()[-3000:], proc.stderr.decode()[-6000:])
    return proc.returncode


#: With ``EOSKAFKA_SWEEP=full`` (``make sweep``) every commit step; otherwise the two that
#: send Spark's replay down different paths: an undecided batch (aborted, then written again)
#: and a decided one whose EndTxns were sent (rolled forward, the replay discarded). The other
#: steps are the second path again as far as Spark can tell, and the crash-point sweep
#: (tests/broker/test_crash_points.py, in `make test-kafka-faults`) kills a driver at every
#: one of them; each case here costs a Spark driver's start, about 30 s, 100-200 s in CI.
KILL_POINTS = ["commit.before_decision", "endtxn.commit.answered"] + (
    ["commit.after_decision", "commit.before_done", "commit.after_done"] if FULL_SWEEP else [])
RAISE_POINTS = ["commit.after_decision"] + (["commit.before_decision"] if FULL_SWEEP else [])


@pytest.mark.parametrize("point", KILL_POINTS)
def test_driver_killed_at_commit_step_then_restarted(spark, bootstrap, unique, tmp_path,
                                                     point) -> None:
    src, out = f"{unique}-in", f"{unique}-out"
    expected = _input(bootstrap, src, unique)
    create_topic(bootstrap, out, partitions=2)
    flag = tmp_path / "fired"
    killed = _run(bootstrap, src, out, tmp_path / "ckpt", f"{point}=killgroup@{flag}")
    assert flag.exists(), f"fault {point} never fired"
    assert killed == -9
    _restart(spark, bootstrap, src, out, tmp_path / "ckpt")
    assert _committed(bootstrap, out) == expected
    assert_java_agrees(bootstrap, out)
    assert_no_open_transactions(bootstrap, out)


@pytest.mark.parametrize("point", RAISE_POINTS)
def test_commit_raising_once_then_restart(spark, bootstrap, unique, tmp_path, point) -> None:
    src, out = f"{unique}-in", f"{unique}-out"
    expected = _input(bootstrap, src, unique)
    create_topic(bootstrap, out, partitions=2)
    flag = tmp_path / "fired"
    assert _run(bootstrap, src, out, tmp_path / "ckpt", f"{point}=raise@{flag}") != 0
    assert flag.exists()
    _restart(spark, bootstrap, src, out, tmp_path / "ckpt")
    assert _committed(bootstrap, out) == expected
    assert_java_agrees(bootstrap, out)
    assert_no_open_transactions(bootstrap, out)


def test_driver_killed_mid_write_leaves_nothing_open(spark, bootstrap, unique,
                                                     tmp_path) -> None:
    """Tasks have written and flushed (open transactions) when the whole driver dies."""
    src, out = f"{unique}-in", f"{unique}-out"
    expected = _input(bootstrap, src, unique)
    create_topic(bootstrap, out, partitions=2)
    flag = tmp_path / "fired"
    assert _run(bootstrap, src, out, tmp_path / "ckpt",
                f"write.after_flush/0=killgroup@{flag}") == -9
    _restart(spark, bootstrap, src, out, tmp_path / "ckpt")
    assert _committed(bootstrap, out) == expected
    assert_java_agrees(bootstrap, out)
    assert_no_open_transactions(bootstrap, out)


def test_at_least_once_end_to_end_through_a_failed_task(bootstrap, unique, tmp_path) -> None:
    """delivery.guarantee=at_least_once: no transactions; a task that fails after its
    records were written is retried, so rows may appear twice, never zero times."""
    src, out = f"{unique}-in", f"{unique}-out"
    expected = _input(bootstrap, src, unique)
    create_topic(bootstrap, out, partitions=2)
    flag = tmp_path / "fired"
    assert _run(bootstrap, src, out, tmp_path / "ckpt", f"write.after_flush/0=raise@{flag}",
                sink_options={"delivery.guarantee": "at_least_once"}) == 0
    assert flag.exists(), "the task failure never happened"
    got = _committed(bootstrap, out)
    assert set(got) == set(expected)  # nothing missing, nothing foreign
    assert all(got[v] >= n for v, n in expected.items())
    view = committed_view(bootstrap, out)
    assert not any(pv.open or pv.aborted for pv in view.values())  # no transactions at all
    assert_java_agrees(bootstrap, out)
    assert_no_open_transactions(bootstrap, out)
