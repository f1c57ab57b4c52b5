"""The chaos harness's bookkeeping (no cluster): aimed faults are counted, not silent."""

from __future__ import annotations

import json

from tests.chaos.faults import FaultLog
from tests.chaos.verdict import aim_summary


def test_aimed_faults_are_counted_and_fallbacks_reported(tmp_path, capsys) -> None:
    log = FaultLog(tmp_path / "faults.jsonl")
    log.add("executor_kill", "at a random moment")  # meant to be random: not aimed
    log.add("executor_kill", "killed at the point", "write.after_flush", True)
    log.add("driver_kill", "killed at random instead", "commit.after_done", False)
    log.add("zombie", "zombie at the point", "write.after_flush/1", True)
    printed = capsys.readouterr().out
    assert "[aimed at commit.after_done: FELL BACK]" in printed
    assert printed.count("FELL BACK") == 1
    assert aim_summary(log.records) == ("aimed at a moment 3: landed where aimed 2, "
                                        "fell back to a random moment 1")
    assert aim_summary(log.records, "executor_kill").startswith("aimed at a moment 1: "
                                                                "landed where aimed 1,")
    assert aim_summary(log.records, "driver_kill").endswith("fell back to a random moment 1")
    lines = [json.loads(x) for x in (tmp_path / "faults.jsonl").read_text().splitlines()]
    assert [(x["aimed"], x["landed"]) for x in lines] == [
        (None, None), ("write.after_flush", True), ("commit.after_done", False),
        ("write.after_flush/1", True)]
