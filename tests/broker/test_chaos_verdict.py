"""The chaos verdict on a real broker, without Spark: it sees duplicates, losses, and
reports where aimed faults landed."""

from __future__ import annotations

import json

from tests.chaos.feeder import Ledger
from tests.chaos.verdict import judge
from tests.kafka_helpers import TxnWriter, create_topic


def _records(ids: list[int]) -> list[bytes]:
    return [json.dumps({"id": i}).encode() for i in ids]


def _judge(bootstrap: str, unique: str, out_ids: list[int]):
    cfg = {"input": f"{unique}-in", "output": f"{unique}-out", "input_partitions": 1}
    create_topic(bootstrap, cfg["input"])
    create_topic(bootstrap, cfg["output"])
    with TxnWriter(bootstrap, f"{unique}-feed") as w:
        w.committed(cfg["input"], _records([1, 2, 3]), partition=0)
    with TxnWriter(bootstrap, f"{unique}-sink") as w:
        w.committed(cfg["output"], _records(out_ids), partition=0)
    ledger = Ledger(committed={1, 2, 3}, transactions=1)
    faults = [{"n": 1, "kind": "zombie", "detail": "d", "aimed": "write.after_flush/0",
               "landed": False},
              {"n": 2, "kind": "driver_kill", "detail": "d", "aimed": None, "landed": None}]
    verdict = judge(bootstrap, cfg, ledger, faults, [], 1, {"starts": 1, "failed_runs": 0}, 1.0)
    return verdict, dict(verdict.rows)


def test_exactly_once_and_aimed_faults_counted(bootstrap: str, unique: str) -> None:
    verdict, rows = _judge(bootstrap, unique, [1, 2, 3])
    assert verdict.ok, verdict.problems
    assert rows["faults aimed at a moment"] == ("aimed at a moment 1: landed where aimed 0, "
                                                "fell back to a random moment 1")
    assert any("fault #1 zombie aimed at write.after_flush/0 fell back" in n
               for n in verdict.notes)


def test_a_duplicate_fails_the_verdict(bootstrap: str, unique: str) -> None:
    verdict, rows = _judge(bootstrap, unique, [1, 2, 2, 3])
    assert not verdict.ok and rows["duplicates"] == 1
    assert rows["records out (committed output)"] == 4 and rows["losses"] == 0
