"""A commit whose marker is late past the hanging judge's mark is waited for, never aborted
(3-node Apache Kafka of its own).

The shape: a transaction older than the maximum transaction timeout (Kafka's 15 minutes by
default) whose commit meets a paused partition leader. Its coordinator wrote PrepareCommit
and answered EndTxn; its COMMIT marker reaches the partition only once the coordinator
retries it at the new leader. Meanwhile the new leader lists the transaction open, and
the driver, finding no marker, asks whether it hangs. Kafka's ``kafka-transactions.sh
find-hanging`` would not call it hanging (its coordinator still lists the partition), so
eoskafka must not either: it says once that it waits on the coordinator, writes no ABORT,
and every row lands once, in the order written; ``eoskafka txns``, asked meanwhile (the
same judge), reports no hanging transaction, so advises no ABORT either.

How the 15 minutes are shortened rather than waited for: the brokers'
``transaction.max.timeout.ms`` is :data:`MAX_TIMEOUT_MS` (2 s; Kafka accepts any value of
at least 1 ms), which the judge reads by DescribeConfigs, and the sink's
``kafka.transaction.timeout.ms`` is the same (a producer's timeout may not exceed the
brokers' maximum). The transaction's last write is then older than the mark by the time
the driver first asks (the paused leader is fenced after 4 s). Kafka's own check for
timed-out transactions runs every 10 minutes here instead of every second, so the short
timeout cannot abort the transaction while the test holds the driver before its EndTxn
on a loaded machine: what is under test is the judge, not the timeout.

How the marker is made late: the transaction log has one partition with one replica, so
the coordinator's node alone holds it and writing PrepareCommit waits on no other node;
the output partition's replicas are the other two nodes first (its leader) and the
coordinator's node last. The leader is paused (SIGSTOP) while the driver is held just
before its EndTxn, so the coordinator's marker request to it goes unanswered; the
controller fences the paused node after 4 s and the next replica leads, answering
DescribeProducers and Fetch with the transaction open and no marker. Once the driver has
said it waits, the node resumes, no longer the leader, and the coordinator's retry writes
the marker at the new leader. Failing on the old judge (c9d0ca8, its 900,000 ms mark set
to the brokers' 2,000): it wrote ABORT to the new leader at the first check and copied the
rows back.
"""

from __future__ import annotations

import json
import logging
import os
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from eos_kafka_source.apache_kafka import KafkaCluster
from eos_kafka_source.cli import main
from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.wire import create_topic, fetch_bounds, fetch_metadata, find_coordinator
from tests.kafka_clusters import kafka_for_tests
from tests.oracle import committed_view
from tests.sink_harness import Background, Harness, assert_once_on_kafka, await_path, vals
from tests.waiting import until

pytestmark = [pytest.mark.kafka_only, pytest.mark.faults]

#: The brokers' ``transaction.max.timeout.ms`` and the sink's transaction timeout: the
#: "15-minute mark", shortened.
MAX_TIMEOUT_MS = 2000

WAITING = "Waiting on its coordinator's retries"
LISTED = "its coordinator still lists this partition (state PrepareCommit)"
OWN_ABORT = "ended it with an ABORT marker"


@pytest.fixture(scope="module")
def kafka() -> Iterator[KafkaCluster]:
    """Three nodes; the transaction log on one of them only (module docstring)."""
    with kafka_for_tests(3, {
        "transaction.state.log.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.max.timeout.ms": str(MAX_TIMEOUT_MS),
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "600000",
    }) as cluster:
        yield cluster


def _place(kafka: KafkaCluster, h: Harness) -> tuple[int, int]:
    """Create the output topic (one partition) led away from the coordinator of the sink's
    transactions: (the coordinator's node, the partition's leader)."""
    with h.wire() as wire:
        coordinator = find_coordinator(wire, h.ids.for_task(0), deadline=60)
        assert find_coordinator(wire, h.ids.for_task(1), deadline=60) == coordinator
        leader, follower = sorted(n.node_id for n in kafka.nodes if n.node_id != coordinator)
        create_topic(wire, h.topic, replicas=[[leader, follower, coordinator]])
        until(lambda: fetch_metadata(wire, [h.topic])[h.topic].leaders.get(0),
              lambda node: node == leader, what=f"node {leader} leading {h.topic}-0")
        until(lambda: _serves(wire, h.topic, leader), bool, what=f"node {leader} serving")
    return coordinator, leader


def _serves(wire, topic: str, leader: int) -> bool:  # noqa: ANN001
    try:
        fetch_bounds(wire, {(topic, 0): leader})
    except Exception:  # noqa: BLE001 - not leading yet (NOT_LEADER_OR_FOLLOWER): asked again
        return False
    return True


def _txns(h: Harness, checkpoint: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    """``eoskafka txns --json`` on the sink's checkpoint and topic (its requests to the
    paused node fail after 5 s, as the driver's do)."""
    main(["txns", "--checkpoint", str(checkpoint), "-b", h.bootstrap, "--topic", h.topic,
          "--json", "-c", "kafka.request.timeout.ms=5000"])
    return json.loads(capsys.readouterr().out)


def _lines(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def test_a_late_marker_past_the_mark_is_waited_for_not_aborted(
        kafka: KafkaCluster, unique: str, tmp_path: Path, faults,  # noqa: ANN001
        caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    """Before the judge read Kafka's way, eoskafka counted this transaction hanging (open
    longer than the mark since it started, its coordinator's PrepareCommit notwithstanding)
    2 s after the marker went missing, wrote ABORT to the new leader and copied the rows
    back from the log."""
    caplog.set_level(logging.INFO, logger="eos_kafka_source")
    h = Harness(kafka.bootstrap_servers, unique, unique, tmp_path / "ckpt",
                timeout_ms=MAX_TIMEOUT_MS)
    # A request to the paused node fails after 5 s instead of 30 (the driver then reads
    # the log at the next leader); the commit's deadline, by default the transaction
    # timeout plus 15 s, is sized for production timeouts, not this shortened one.
    h.cfg = ClientConfig.from_options({"kafka.bootstrap.servers": kafka.bootstrap_servers,
                                       "kafka.request.timeout.ms": "5000"})
    h.driver.commit_deadline_s = 180.0
    coordinator, leader = _place(kafka, h)
    h.driver.prepare(new_run=True)
    handoffs = [h.task(p, vals(f"late{p}")) for p in range(2)]  # both into partition 0
    gate = tmp_path / "gate"
    faults(f"commit.before_endtxn=block:{gate}@{tmp_path / 'once'}")
    committing = Background(lambda: h.driver.commit(0, handoffs, tasks=2))
    await_path(gate.with_suffix(".started"), 60)
    paused = kafka.node(leader).proc
    assert paused is not None
    os.kill(paused.pid, signal.SIGSTOP)
    try:
        gate.with_suffix(".release").touch()
        # The driver finds no marker at the next leader and asks whether it hangs.
        until(lambda: (_lines(caplog, WAITING), _lines(caplog, OWN_ABORT)),
              lambda said: any(said) or not committing.thread.is_alive(), timeout_s=120,
              what="the driver judging the missing marker")
        # While the driver waits, the operator's check (the same judge) is asked too.
        during = _txns(h, tmp_path / "ckpt", capsys) if _lines(caplog, WAITING) else None
    finally:
        os.kill(paused.pid, signal.SIGCONT)
    error = committing.outcome(180)
    faults("")

    view = committed_view(h.bootstrap, h.topic)[0]
    aborts = [m for m in view.markers if not m.commit]
    assert aborts == [], (f"eoskafka wrote ABORT to {h.topic}-0 at {aborts} while its "
                          f"coordinator ({coordinator}) held the commit: "
                          f"{_lines(caplog, OWN_ABORT)}")
    assert error is None, error
    # eoskafka txns, asked while the marker was late: the transaction open past the mark,
    # every partition asked, and no hanging transaction (no ABORT advised).
    assert during is not None and during["unasked"] == [], during
    opened = [o for p in during["partitions"] for o in p["open"]]
    assert opened and opened[0]["first_offset"] == 0, opened
    assert opened[0]["age_s"] > MAX_TIMEOUT_MS / 1000, opened
    assert during["hanging"] == [], during["hanging"]
    decision = h.log.get(0) if h.log else None
    assert decision is not None and decision.done and not decision.lost
    waits = _lines(caplog, WAITING)
    assert waits, "the driver never said it waits on the coordinator"
    assert all(LISTED in line for line in waits), waits
    said = Counter(x.transactional_id for line in waits for x in handoffs
                   if x.transactional_id in line and f"{h.topic}-0" in line)
    assert handoffs[0].transactional_id in said, waits
    assert set(said.values()) == {1} and sum(said.values()) == len(waits), (
        f"once per transaction and partition: {waits}")
    assert view.committed_values == vals("late0") + vals("late1")  # once, in the order written
    assert_once_on_kafka(h, Counter(vals("late0") + vals("late1")))
