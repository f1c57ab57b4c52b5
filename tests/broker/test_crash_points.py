"""The crash-point sweep on Apache Kafka (docs/design.md, invariants 12 and 14).

For every registered crash point (eos_kafka_source/sink/driver/crash_points.py) a real driver
process (tests/crash_driver.py) is SIGKILLed at that point, in a scenario that reaches it;
the test asserts it died there (a renamed point cannot pass vacuously). Then, optionally,
an operator acts in the pause; then the query restarts in this process (a new planning
worker: ``prepare(new_run=True)``), replays the batch with new task transactions writing
the same rows, as Spark's replay does, commits, and runs one more batch. The verdict is
read from the outside: every row exactly once and nothing open in the raw log
(tests/oracle.py), per cell; then, for every cell that held, Kafka's Java read_committed
consumer agrees record for record and ``kafka-transactions`` lists nothing open under the
sweep's prefixes (tests/sink_harness.py's checks, run once for all cells: each JVM run costs
seconds, and a cell's topic and prefix are its own, so one run judges every cell).

The fast half (every point, no operator action) is in ``make test-kafka-faults``. The
operator actions (``EOSKAFKA_SWEEP=full``, ``make sweep``: the matrix as a table in
bench-results/sweep.md): Kafka's own ``kafka-transactions abort`` on a decided open
transaction, ``eoskafka fence`` on the prefix, a checkpoint rewound (``offsets/N`` and
``commits/N`` deleted: the batch id comes back over another range), a changed prefix, and a
decision store whose first write on restart fails.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from eos_kafka_source.sink.decisions.log import DecisionLog
from eos_kafka_source.sink.driver import crash_points
from tests.crash_driver import (
    FULL_SWEEP,
    HANGING_PARTITIONS,
    Query,
    batch_rows,
    partition_verification,
    record,
    run_crash,
    stray_rows,
)
from tests.kafka_helpers import create_topic
from tests.operator_actions import close_leftovers, eoskafka_fence, judge, kafka_abort
from tests.oracle import committed_view
from tests.sink_harness import Harness, open_transactions_of

pytestmark = [pytest.mark.kafka_only, pytest.mark.faults]

RESULTS = os.environ.get("EOSKAFKA_SWEEP_RESULTS")

#: The scenario of tests/crash_driver.py that reaches each point.
SCENARIO = {
    "prepare.before_fence": "restart",
    "prepare.after_clear_mark": "restart",
    "commit.after_claim": "claim",
    "commit.before_decision": "commit",
    "store.write": "commit",
    "store.before_final": "commit",
    "commit.after_decision": "commit",
    "commit.before_endtxn": "commit",
    "endtxn.commit.answered": "commit",
    "commit.before_done": "commit",
    "commit.after_done": "commit",
    "commit.cleanup": "commit",
    "hanging.after_abort": "hanging",
    "recover.after_write": "lost",
    "recover.after_record": "lost",
    "recover.after_part": "lost_big",
    "recover.before_done": "lost",
    "endtxn.abort.answered": "abort",
    "abort.after_mark": "abort",
    "abort.after_fence": "abort",
}
#: Further cells: the same point met elsewhere (``kill#N``: its Nth passage).
EXTRA = [
    ("store.write", "restart", "kill"),
    ("store.write", "commit", "kill#2"),
    ("commit.before_endtxn", "lost", "kill"),
    ("endtxn.commit.answered", "lost", "kill"),
    ("recover.after_write", "lost_big", "kill#2"),  # the second recovery transaction's
    ("recover.after_record", "lost_big", "kill#2"),
    # The copy after eoskafka's own ABORT of a hanging partition.
    ("recover.after_write", "hanging", "kill"),
    ("recover.after_record", "hanging", "kill"),
    ("recover.before_done", "hanging", "kill"),
]
#: Cells whose batch 1 is decided when the driver dies (a rewound checkpoint is then refused).
LOST = ("lost", "lost_big", "hanging")
DECIDED = {p for p, s in SCENARIO.items() if s in LOST} | {
    "commit.after_decision", "commit.before_endtxn", "endtxn.commit.answered",
    "commit.before_done", "commit.after_done", "commit.cleanup"}
ACTIONS = ("none", "kafka_abort", "fence", "rewind", "prefix", "store_fail")
#: Every topic and prefix of this module's cells starts with it.
SWEEP = f"sweep{uuid.uuid4().hex[:6]}"


def test_every_registered_point_has_a_scenario() -> None:
    assert set(SCENARIO) == set(crash_points.names())


@dataclass(frozen=True)
class Cell:
    point: str
    scenario: str
    kill: str = "kill"
    action: str = "none"

    @property
    def fault(self) -> str:
        return f"{self.point}={self.kill}"

    @property
    def id(self) -> str:
        kill = "" if self.kill == "kill" else f"-{self.kill.replace('#', '')}"
        return f"{self.point}{kill}-in-{self.scenario}-{self.action}"


def _cells() -> list[pytest.param]:
    base = [Cell(p, SCENARIO[p]) for p in crash_points.names()]
    base += [Cell(p, s, k) for p, s, k in EXTRA]
    actions = ACTIONS if FULL_SWEEP else ("none",)
    out = []
    for action in actions:
        for cell in base:
            if cell.scenario == "claim" and action != "none":
                continue  # nothing is decided yet: the actions add nothing to the kill
            if cell.scenario == "hanging" and action != "none":
                continue  # its stray partition is the sweep's own act: one is enough
            cell = Cell(cell.point, cell.scenario, cell.kill, action)
            out.append(pytest.param(cell, id=cell.id))
    return out


def _decided(cell: Cell) -> bool:
    return cell.point in DECIDED or cell.scenario in LOST or (
        cell.point == "store.write" and cell.kill != "kill")


#: Topic -> expected rows of each cell that held, for the final check by Kafka's own tools.
HELD: dict[str, Counter[bytes]] = {}


@pytest.mark.parametrize("cell", _cells())
def test_crash_point(cell: Cell, bootstrap: str, unique: str, tmp_path: Path,
                     faults) -> None:  # noqa: ANN001
    started = time.monotonic()
    verdict = "failed"
    topic = f"{SWEEP}-{unique}"
    try:
        verdict, expected = _sweep(cell, bootstrap, topic, tmp_path, faults)
        HELD[topic] = expected
    except BaseException as exc:
        verdict = f"FAIL: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        close_leftovers(bootstrap, [topic, f"{topic}-renamed"])
        raise
    finally:
        record(RESULTS, point=cell.point if cell.kill == "kill" else f"{cell.point} {cell.kill}",
               scenario=cell.scenario, action=cell.action, verdict=verdict,
               seconds=time.monotonic() - started, expected=None)


def _sweep(cell: Cell, bootstrap: str, topic: str, tmp_path: Path,
           faults) -> tuple[str, Counter[bytes]]:  # noqa: ANN001
    hanging = cell.scenario == "hanging"
    create_topic(bootstrap, topic, partitions=HANGING_PARTITIONS if hanging else 2)
    column = cell.scenario == "claim"
    query = Query(bootstrap, topic, topic, tmp_path / "ckpt", lineage=f"query-{topic}",
                  topic_column=column)
    if hanging:
        partition_verification(bootstrap, on=False)
    try:
        run_crash(query, cell.scenario, cell.fault, tmp_path / "gate")
    finally:
        if hanging:
            partition_verification(bootstrap, on=True)
    decided = DecisionLog(str(query.checkpoint), query.lineage).get(1) is not None
    assert decided == _decided(cell), f"batch 1 {'' if decided else 'not '}decided at the kill"
    expected = batch_rows(topic, "q", 0) + batch_rows(topic, "q", 1)
    if hanging:
        expected += Counter(stray_rows(topic))
    note = _act(cell.action, query, decided)
    restarted = Query(bootstrap, topic, f"{topic}-renamed" if cell.action == "prefix" else topic,
                      query.checkpoint, query.lineage, topic_column=column)
    if column:  # killed in batch 0's commit, before its decision: batch 0 replays first
        expected = restarted.run_batch(0, "q", new_run=True)
        expected += restarted.run_batch(1, "q")
        expected += restarted.run_batch(2, "q")
        judge(bootstrap, topic, expected)
        return "once", expected
    if cell.action == "store_fail":
        faults(f"store.write=ioerror@{tmp_path / 'store-failed-once'}")
        with pytest.raises(Exception, match="EOSKAFKA_DECISION_STORE_FAILED") as refused:
            restarted.run_batch(1, "q", new_run=True)
        faults("")
        note = f"restart refused ({type(refused.value).__name__}), next restart ran"
    if cell.action == "rewind":
        if decided:
            try:
                restarted.run_batch(1, "r", new_run=True, shift=5)
            except Exception as exc:  # noqa: BLE001 - which refusal, asserted below
                assert "EOSKAFKA_REPLAY_MISMATCH" in str(exc), exc
            else:
                got = Harness(bootstrap, topic, topic, None).committed()
                rewound = sum(n for v, n in got.items() if b"/r" in v)
                pytest.fail(f"the rewound batch 1 (other input offsets, a decided batch id) "
                            f"was accepted, not refused: {rewound} of its "
                            f"{sum(batch_rows(topic, 'r', 1).values())} rows committed")
            note = "refused loudly (EOSKAFKA_REPLAY_MISMATCH)"
        else:
            expected = batch_rows(topic, "q", 0) + restarted.run_batch(1, "r", new_run=True,
                                                                       shift=5)
            expected += restarted.run_batch(2, "r")
    else:
        restarted.run_batch(1, "q", new_run=True)
        expected += restarted.run_batch(2, "q")
    judge(bootstrap, topic, expected)
    verdict = "refused loudly, nothing lost or doubled" if note.startswith("refused") else "once"
    return f"{verdict}{f' ({note})' if note and not note.startswith('refused') else ''}", \
        expected


def _act(action: str, query: Query, decided: bool) -> str:
    """The operator's action between the kill and the restart; what it did."""
    if action == "kafka_abort":
        return kafka_abort(query)
    if action == "fence":
        return eoskafka_fence(query)
    if action == "rewind":
        query.rewind(1)
        return "rewound" + (" a decided batch" if decided else "")
    return ""


def test_kafka_tools_agree_for_every_cell_that_held(bootstrap: str) -> None:
    """After the cells (pytest runs a module's tests in order): Kafka's Java read_committed
    consumer returns, topic by topic, exactly what the oracle calls committed, and
    ``kafka-transactions list`` shows no open transaction of the sweep's ids (what
    tests/sink_harness.py's assert_once_on_kafka checks, for every cell at once)."""
    from eos_kafka_source.apache_kafka import KafkaTools

    held = dict(HELD)
    if not held:
        return  # no cell ran (deselected) or none held: those fail on their own

    ours = {t: sorted((p, r.offset, r.value or b"") for p, view in
                      committed_view(bootstrap, t).items() for r in view.committed)
            for t in held}
    for topic, expected in held.items():
        assert Counter(v for _, _, v in ours[topic]) == expected, topic
    total = sum(len(rows) for rows in ours.values())
    pattern = "|".join(re.escape(t) for t in sorted(held))  # not the cells that failed
    tools = KafkaTools(bootstrap)
    java = tools.consume(pattern, include=True, idle_timeout_ms=3000, max_messages=total + 1)
    if len(java) < total:  # the group join on a loaded machine: once more, patiently
        java = tools.consume(pattern, include=True, idle_timeout_ms=30000,
                             max_messages=total + 1)
    theirs: dict[str, list[tuple[int, int, bytes]]] = {}
    for r in java:
        theirs.setdefault(r.value.split(b"/", 1)[0].decode(errors="replace"), []).append(
            (r.partition, r.offset, r.value))
    for topic in sorted(set(theirs) | set(ours)):
        assert sorted(theirs.get(topic, [])) == ours.get(topic, []), (
            f"{topic}: Kafka's Java read_committed consumer and the marker oracle disagree: "
            f"{len(theirs.get(topic, []))} against {len(ours.get(topic, []))} records")
    still_open = [row for row in open_transactions_of(bootstrap, SWEEP)
                  if any(row["TransactionalId"].startswith(t) for t in held)]
    assert still_open == [], "transactions left open by cells that held"
