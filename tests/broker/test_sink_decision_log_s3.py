"""The decision log on an object store (``s3://`` on a local moto S3 server) through a
driver kill: the decision written there before the first EndTxn is what the restarted
driver rolls forward, and through a store that fails a write (an
operator fault, invariant 12). Checkpoints are often on S3; pyarrow's S3 filesystem is
what the decision log uses for them. The file layer's own cases on S3 (create-only-if-
absent between two drivers, tokens, format): tests/unit/test_decision_log.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from eos_kafka_source.errors import DecisionStoreError
from tests.chaos.broker import BUCKET, S3Server, s3_for_pyarrow
from tests.java_oracle import assert_java_agrees
from tests.kafka_helpers import create_topic
from tests.oracle import assert_no_open_transactions
from tests.sink_harness import Background, Harness, assert_once_on_kafka, await_path, vals
from tests.waiting import until

pytestmark = pytest.mark.faults

ROOT = Path(__file__).parents[2]

#: The first driver: three tasks, then a commit that SIGKILLs its own process between
#: the first EndTxn and the others (the decision is on S3, one transaction committed).
_DRIVER = """
import os, signal, sys
from tests.sink_harness import Harness, crash_between_endtxns, vals
bootstrap, topic, prefix, location = sys.argv[1:5]
h = Harness(bootstrap, topic, prefix, location)
h.driver.prepare(new_run=True)
handoffs = [h.task(p, vals(f"t{p}")) for p in range(3)]
with crash_between_endtxns():
    try:
        h.driver.commit(0, handoffs, tasks=3)
    finally:
        os.kill(os.getpid(), signal.SIGKILL)  # the driver dies after the first EndTxn
"""


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_for_pyarrow(tmp_path_factory.mktemp("s3")) as server:  # read here and in the child
        yield server


def test_decision_log_on_s3_rolls_forward_after_driver_kill(bootstrap, unique, s3) -> None:
    create_topic(bootstrap, unique, partitions=2)
    location = f"s3://{BUCKET}/{unique}/checkpoint"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("EOSKAFKA_TEST_FAULTS", None)
    env.pop("EOSKAFKA_TEST_FAULTS_FILE", None)
    killed = subprocess.run([sys.executable, "-c", _DRIVER, bootstrap, unique, unique, location],
                            env=env, capture_output=True, timeout=300)
    assert killed.returncode == -9, killed.stderr.decode()[-3000:]
    h = Harness(bootstrap, unique, unique, location)
    decision = h.log.get(0)
    assert decision is not None and not decision.done and len(decision.handoffs) == 3
    until(lambda: len(h.committed(settle=False)), lambda n: n == 30,
          what="the first of three transactions committed before the kill")
    h.driver.prepare(new_run=True)  # the restarted driver, before any task of the replay
    assert h.log.get(0).done and not h.log.get(0).lost
    h.driver.commit(0, [h.task(p, vals(f"t{p}")) for p in range(3)], tasks=3)  # the replay
    expected = Counter(vals("t0") + vals("t1") + vals("t2"))
    assert h.committed() == expected
    assert assert_java_agrees(bootstrap, unique) in (-1, sum(expected.values()))
    assert_no_open_transactions(bootstrap, unique)


@pytest.mark.parametrize("write", ["decision", "done"])
def test_a_store_that_fails_a_write_fails_the_batch_and_the_replay_writes_once(
        bootstrap, unique, s3, faults, tmp_path: Path, write: str) -> None:
    """The store refuses the decision (nothing may commit: Spark's abort aborts all) or the
    done mark after every EndTxn (the batch committed: abort rolls the decision forward,
    the replay aborts its new transactions). Either way each row is written once."""
    create_topic(bootstrap, unique, partitions=2)
    h = Harness(bootstrap, unique, unique, f"s3://{BUCKET}/{unique}/checkpoint")
    h.driver.prepare(new_run=True)
    handoffs = [h.task(p, vals(f"t{p}")) for p in range(2)]
    if write == "decision":
        faults("store.write=ioerror")
        with pytest.raises(DecisionStoreError, match="store.write"):
            h.driver.commit(0, handoffs, tasks=2)
        assert h.log.get(0) is None
    else:  # let the decision through, then fail the next write (the done mark)
        pause = tmp_path / "after_decision"
        faults(f"commit.after_decision=block:{pause}@{tmp_path / 'once'}")
        commit = Background(lambda: h.driver.commit(0, handoffs, tasks=2))
        await_path(Path(f"{pause}.started"))
        faults("store.write=ioerror")
        Path(f"{pause}.release").write_text("")
        assert isinstance(commit.outcome(), DecisionStoreError)
        assert not h.log.get(0).done
    faults("")
    h.driver.abort(0, handoffs, tasks=2)  # what Spark calls after commit() raised
    h.driver.prepare(new_run=False)  # the replay of batch 0
    h.driver.commit(0, [h.task(p, vals(f"t{p}")) for p in range(2)], tasks=2)
    assert h.log.get(0).done and not h.log.get(0).lost
    assert_once_on_kafka(h, Counter(vals("t0") + vals("t1")))
