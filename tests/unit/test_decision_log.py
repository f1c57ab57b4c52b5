"""The decision log's files, without a broker (sink/decision_log.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eos_kafka_source.errors import DecisionLogConflictError
from eos_kafka_source.sink.decision_log import DecisionLog
from eos_kafka_source.sink.decision_states import State
from eos_kafka_source.sink.handoff import TxnHandoff


def _handoff(tid: str = "p-0") -> TxnHandoff:
    return TxnHandoff(tid, 7, 1, 1, True, (("out", 0, 5),), records=5)


def test_reset_checkpoint_binds_a_new_lineage_and_keeps_the_old_decisions(
        tmp_path: Path) -> None:
    log = DecisionLog(str(tmp_path))
    assert log.bind("query-A", "ckpt") is None
    a = log.for_lineage("query-A")
    a.decide(0, [_handoff()])
    a.mark_done(0)
    assert DecisionLog(str(tmp_path)).bind("query-B", "ckpt") == "query-A"
    b = DecisionLog(str(tmp_path), "query-B")
    assert b.get(0) is None  # batch 0 of the new query is not a replay
    assert a.get(0) is not None and a.get(0).state is State.DONE
    assert DecisionLog(str(tmp_path)).lineage == "query-B"


@pytest.mark.parametrize(("lineage", "checkpoint", "match"), [
    ("query-C", "other-ckpt", "belongs to query query-B"),
    ("query-A", "ckpt", "superseded"),
])
def test_bind_refuses_another_checkpoint_and_a_replaced_query(
        tmp_path: Path, lineage: str, checkpoint: str, match: str) -> None:
    log = DecisionLog(str(tmp_path))
    log.bind("query-A", "ckpt")
    log.bind("query-B", "ckpt")  # reset
    with pytest.raises(DecisionLogConflictError, match=match):
        DecisionLog(str(tmp_path)).bind(lineage, checkpoint)


def test_a_log_from_before_lineages_belongs_to_the_first_query_that_binds(
        tmp_path: Path) -> None:
    """Upgrading a running query: its decisions (flat files) stay its own, so the replay of
    its pending batch after the upgrade is still recognised."""
    legacy = tmp_path / "eoskafka" / "decisions"
    legacy.mkdir(parents=True)
    (legacy / f"{3:020d}.json").write_text(json.dumps(
        {"batch_id": 3, "handoffs": [_handoff().to_json()], "decided_at": 1.0}))
    (legacy / f"{3:020d}.done").write_text(json.dumps({"batch_id": 3, "lost": []}))
    log = DecisionLog(str(tmp_path))
    log.bind("query-A", "ckpt")
    assert DecisionLog(str(tmp_path), "query-A").get(3).state is State.DONE
    assert DecisionLog(str(tmp_path), "query-B").get(3) is None


def test_decision_and_recovery_are_created_once(tmp_path: Path) -> None:
    log = DecisionLog(str(tmp_path), "q")
    log.decide(1, [_handoff()])
    with pytest.raises(DecisionLogConflictError, match="another driver already decided"):
        log.decide(1, [_handoff("p-1")])
    assert log.get(1).handoffs == (_handoff(),)  # the first decision stands
    log.record_recovery(1, [_handoff("p-9")])
    with pytest.raises(DecisionLogConflictError):
        log.record_recovery(1, [_handoff("p-8")])
    assert not list((tmp_path / "eoskafka" / "decisions" / "q").glob("*.tmp"))


def test_states_from_files(tmp_path: Path) -> None:
    log = DecisionLog(str(tmp_path), "q")
    log.decide(1, [_handoff()])
    assert log.get(1).state is State.DECIDED
    log.mark_done(1, ["lost one"], [_handoff()])
    assert log.get(1).state is State.LOST
    log.record_recovery(1, [_handoff("p-2")])
    assert log.get(1).state is State.RECOVERING
    assert [d.batch_id for d in log.unfinished()] == [1]
    log.mark_done(1, ["lost one"], [])
    log.clear_recovery(1)
    assert log.get(1).state is State.DONE and log.get(1).lost == ("lost one",)
    log.void(1)
    assert log.get(1) is None


def test_unfinished_spans_lineages_with_one_listing(tmp_path: Path, monkeypatch) -> None:
    """Object stores: one LIST, then reads only of unfinished decisions (before: a HEAD per
    decision kept, ~100 per micro-batch on S3)."""
    for lineage in ("a", "b"):
        log = DecisionLog(str(tmp_path), lineage)
        for batch in range(30):
            log.decide(batch, [_handoff()])
            if batch != 29:
                log.mark_done(batch)
    log = DecisionLog(str(tmp_path))
    calls = {"info": 0, "read": 0}
    fs = log.fs

    class Counting:
        def __getattr__(self, name: str):  # noqa: ANN204
            return getattr(fs, name)

        def get_file_info(self, what):  # noqa: ANN001, ANN202
            calls["info"] += 1
            return fs.get_file_info(what)

        def open_input_stream(self, path):  # noqa: ANN001, ANN202
            calls["read"] += 1
            return fs.open_input_stream(path)

    monkeypatch.setattr(log, "fs", Counting())
    assert sorted((d.lineage, d.batch_id) for d in log.unfinished()) == [("a", 29), ("b", 29)]
    assert calls["info"] == 1
    assert calls["read"] == 2 * 3  # .json, .done, .recovery of each unfinished decision


def test_a_replaced_file_lost_between_delete_and_rename_is_read_from_its_new_copy(
        tmp_path: Path) -> None:
    """HDFS's rename over an existing file is delete-then-rename: a crash in between leaves
    only the complete temporary copy."""
    log = DecisionLog(str(tmp_path))
    root = tmp_path / "eoskafka"
    (root / "pool.json.0123.tmp").write_text(json.dumps({"size": 7, "clean": True}))
    (root / "pool.json.0456.tmp").write_text('{"size": 9')  # a write that never finished
    assert log.pool().size == 7


def test_prune_keeps_growth_bounded(tmp_path: Path, monkeypatch) -> None:
    import eos_kafka_source.sink.decision_log as dl

    monkeypatch.setattr(dl, "_KEEP_DONE", 3)
    monkeypatch.setattr(dl, "_KEEP_LINEAGES", 2)
    import os

    for age, lineage in enumerate(("w1", "w2", "w3", "w4")):  # four finished batch writes
        other = DecisionLog(str(tmp_path), lineage)
        other.decide(0, [])
        other.mark_done(0)
        for f in (tmp_path / "eoskafka" / "decisions" / lineage).iterdir():
            os.utime(f, (1000 + age, 1000 + age))
    log = DecisionLog(str(tmp_path), "q")
    for batch in range(6):
        log.decide(batch, [])
        log.mark_done(batch)
    log.decide(6, [])  # unfinished: never pruned
    log.prune()
    assert log.batch_ids() == [4, 5, 6]  # the newest 3, of which one unfinished
    dirs = sorted(p.name for p in (tmp_path / "eoskafka" / "decisions").iterdir())
    assert dirs == ["q", "w3", "w4"]


def test_query_id_from_the_checkpoint_metadata(tmp_path: Path) -> None:
    from eos_kafka_source.sink.lineage import pyarrow_uri, query_id_at

    (tmp_path / "ckpt").mkdir()
    assert query_id_at(str(tmp_path / "ckpt")) is None  # not written yet: from the tasks
    (tmp_path / "ckpt" / "metadata").write_text('{"id":"2ccb9404-b880"}\n')
    assert query_id_at(str(tmp_path / "ckpt")) == "2ccb9404-b880"
    assert query_id_at(None) is None
    assert query_id_at("dbfs:/no/such/scheme") is None  # pyarrow has no filesystem for it
    assert pyarrow_uri("s3a://bucket/ck") == "s3://bucket/ck"
