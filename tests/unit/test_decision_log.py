"""The decision log's files, without a broker (sink/decisions/log.py).

The file-layer cases run twice: on the local disk and on S3 (a local ``moto_server``),
where pyarrow's S3 filesystem has no create-only-if-absent and no atomic rename.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eos_kafka_source.errors import DecisionLogConflictError, DecisionStoreError
from eos_kafka_source.sink.decisions.log import DecisionLog
from eos_kafka_source.sink.decisions.states import State
from eos_kafka_source.sink.handoff import TxnHandoff
from tests.waiting import until


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
    import eos_kafka_source.sink.decisions.log as dl

    monkeypatch.setattr(dl, "_KEEP_DONE", 3)
    monkeypatch.setattr(dl, "_KEEP_LINEAGES", 2)

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


# -- the file layer on the local disk and on S3 ------------------------------------------------


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A local S3 server (moto) for this module; pyarrow's S3 filesystem reads the env."""
    from tests.chaos.broker import BUCKET, s3_for_pyarrow

    with s3_for_pyarrow(tmp_path_factory.mktemp("s3")):
        yield f"s3://{BUCKET}"


@pytest.fixture(params=["local", "s3"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh decision log location: a local directory, or a fresh prefix on S3."""
    if request.param == "local":
        return str(tmp_path / "ckpt")
    bucket = request.getfixturevalue("s3_server")
    return f"{bucket}/{uuid.uuid4().hex}/ckpt"


def _in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _race(where: str, tmp_path: Path, faults: Callable[[str], None]) -> list[str]:
    """Drivers A and B create decision 1 at once: A pauses between its check and its write
    (``store.before_final``) while B creates; then A goes on. Returns who won."""
    pause = tmp_path / "pause"
    faults(f"store.before_final=block:{pause}@{tmp_path / 'once'}")
    a, b = DecisionLog(where, "q"), DecisionLog(where, "q")
    thread, out_a = _in_thread(lambda: a.decide(1, [_handoff("p-a")]))
    until(lambda: Path(f"{pause}.started").exists(), bool, what="driver A paused")
    thread_b, out_b = _in_thread(lambda: b.decide(1, [_handoff("p-b")]))
    thread_b.join(timeout=60)
    Path(f"{pause}.release").write_text("")
    thread.join(timeout=60)
    assert not thread.is_alive() and not thread_b.is_alive()
    for out in (out_a, out_b):
        assert "error" not in out or isinstance(out["error"], DecisionLogConflictError), out
    winners = [name for name, out in (("p-a", out_a), ("p-b", out_b)) if "error" not in out]
    stored = DecisionLog(where, "q").get(1)
    assert stored is not None and [h.transactional_id for h in stored.handoffs] == winners[:1]
    return winners


def test_two_drivers_creating_one_decision_at_once_exactly_one_wins(
        where: str, tmp_path: Path, faults: Callable[[str], None],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On S3 the create was check-then-write, so both drivers "created" decision
    1 and the second overwrote the first (failed before the claim protocol: two winners).
    B gives up after a second while A's claim is fresh; A's decision stands."""
    import eos_kafka_source.sink.decisions.files as files

    monkeypatch.setattr(files, "_WAIT_S", 1.0)
    assert len(_race(where, tmp_path, faults)) == 1


def test_a_zombie_void_leaves_the_replacements_decision(where: str) -> None:
    """A zombie driver that voids its own decision late must not delete the decision its
    replacement made since for the same batch (failed before tokens: it deleted it)."""
    zombie, driver = DecisionLog(where, "q"), DecisionLog(where, "q")
    zombie.decide(4, [_handoff("p-old")])
    assert driver.get(4).state is State.DECIDED  # rolled forward: nothing committed
    driver.void(4)
    driver.decide(4, [_handoff("p-new")])  # the replay's decision
    zombie.void(4)  # the zombie, late: not its decision any more
    assert DecisionLog(where, "q").get(4).handoffs == (_handoff("p-new"),)
    driver.void(4)
    assert DecisionLog(where, "q").get(4) is None


@pytest.mark.parametrize("call", ["decide", "mark_done", "save_pool", "bind"])
def test_a_store_that_fails_a_write_raises_by_name_and_writes_nothing(
        where: str, faults: Callable[[str], None], call: str) -> None:
    """An operator fault of the sweep (invariant 12): the store refuses a write (an OSError,
    as the OS or pyarrow raise one). The user reads the condition, the location and the
    fix, not a client's traceback."""
    log = DecisionLog(where, "q")
    faults("store.write=ioerror")
    do = {"decide": lambda: log.decide(2, [_handoff()]), "mark_done": lambda: log.mark_done(2),
          "save_pool": lambda: log.save_pool(log.pool()), "bind": lambda: log.bind("q", "c")}
    with pytest.raises(DecisionStoreError, match="EOSKAFKA_DECISION_STORE_FAILED") as err:
        do[call]()
    assert all(s in str(err.value) for s in (where, "could not be written", "restarted query"))
    faults("")
    assert log.get(2) is None and log.pool().size == 0
    assert DecisionLog(where).lineage == ""


def test_a_real_store_failure_is_named_too(tmp_path: Path) -> None:
    """Not injected: the location's parent is a file, so the OS refuses the directory."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(DecisionStoreError, match="Not a directory") as err:
        DecisionLog(str(blocker / "ckpt"), "q")
    assert str(blocker / "ckpt") in str(err.value)


@pytest.fixture
def s3_where(s3_server: str) -> str:
    """A fresh decision log location on S3 (candidates exist only on object stores)."""
    return f"{s3_server}/{uuid.uuid4().hex}/ckpt"


def test_a_crashed_drivers_candidate_is_broken_once_stale(
        s3_where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A driver killed between its candidate and its final leaves the candidate: the next
    driver waits for it to turn stale (store clock), breaks it and decides."""
    import eos_kafka_source.sink.decisions.files as files

    monkeypatch.setattr(files, "_STALE_S", 1.0)
    log = DecisionLog(s3_where, "q")
    left = log._path(f"{log._name(1, '.json')}.{'0' * 32}.claim")
    with log.fs.open_output_stream(left) as out:
        out.write(b"{}")
    log.decide(1, [_handoff()])
    assert log.get(1).handoffs == (_handoff(),)
    assert not [i for i in log._list(log._dir()) if i.base_name.endswith(".claim")]


def test_a_stalled_driver_whose_candidate_was_broken_does_not_write_its_decision(
        s3_where: str, tmp_path: Path, faults: Callable[[str], None],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A stalls past its deadline between its check and its write; B breaks A's stale
    candidate and decides; A, resumed, finds it past its deadline and does not overwrite."""
    import eos_kafka_source.sink.decisions.files as files

    monkeypatch.setattr(files, "_CLAIM_S", 0.2)
    monkeypatch.setattr(files, "_STALE_S", 1.0)
    assert _race(s3_where, tmp_path, faults) == ["p-b"]


def _rewrite(log: DecisionLog, name: str, **changes: Any) -> None:
    with log.fs.open_input_stream(log._path(name)) as src:
        data = {k: v for k, v in json.loads(src.read()).items() if k not in changes}
    data.update({k: v for k, v in changes.items() if v is not None})
    with log.fs.open_output_stream(log._path(name)) as out:
        out.write(json.dumps(data).encode())


_NEWER = {  # file -> how the driver comes to read it
    ".json": lambda log: log.get(1), ".done": lambda log: log.get(1),
    ".recovery": lambda log: log.get(1), "pool.json": lambda log: log.pool(),
    "lineage.json": lambda log: DecisionLog(log.location[:-len("/eoskafka")]).bind("q", "c"),
}


@pytest.mark.parametrize("file", list(_NEWER))
def test_a_file_of_a_newer_format_is_refused_naming_it_and_the_fix(where: str,
                                                                   file: str) -> None:
    from eos_kafka_source.errors import DecisionLogFormatError

    log = DecisionLog(where)
    log.bind("q", "c")
    log.decide(1, [_handoff()])
    log.mark_done(1)
    log.record_recovery(1, [_handoff("p-2")])
    log.save_pool(log.pool())
    name = file if not file.startswith(".") else log._name(1, file)
    _rewrite(log, name, format=4)
    with pytest.raises(DecisionLogFormatError, match="EOSKAFKA_DECISION_LOG_FORMAT") as err:
        _NEWER[file](log)
    assert all(s in str(err.value) for s in (
        name, "format 4", "formats up to 3", "Upgrade eoskafka", "decisionLogLocation"))


def test_files_carry_format_and_token_and_version_1_files_stay_readable(where: str) -> None:
    log = DecisionLog(where)
    log.bind("q", "c")
    log.decide(1, [_handoff()])
    log.mark_done(1)
    log.save_pool(log.pool())
    decision = log._read(log._name(1, ".json"))
    assert decision["format"] == 3 and decision["handoffs"][0]["format"] == 2
    assert decision["token"] == log.get(1).token != ""
    assert log._read(log._name(1, ".done"))["token"] == decision["token"]
    assert log._read("pool.json")["format"] == 3 and log._read("lineage.json")["format"] == 3
    for name in (log._name(1, ".json"), log._name(1, ".done"), "pool.json", "lineage.json"):
        _rewrite(log, name, format=None, token=None)  # as version 1 wrote them
    with log.fs.open_output_stream(log._path(log._name(1, ".json"))) as out:
        out.write(json.dumps({"batch_id": 1, "decided_at": 1.0, "handoffs": [
            {k: v for k, v in _handoff().to_json().items() if k != "format"}]}).encode())
    old = DecisionLog(where, "q")
    assert old.get(1).state is State.DONE and old.get(1).token == ""
    assert old.get(1).handoffs == (_handoff(),)
    assert old.void(1) and old.get(1) is None


def test_a_hand_off_of_a_newer_format_is_refused() -> None:
    from eos_kafka_source.errors import DecisionLogFormatError

    data = _handoff().to_json()
    assert data["format"] == 2 and TxnHandoff.from_json(data) == _handoff()
    assert TxnHandoff.from_json({**data, "added_later": 1}) == _handoff()  # skipped
    del data["format"]  # version 1
    assert TxnHandoff.from_json(data) == _handoff()
    with pytest.raises(DecisionLogFormatError, match="p-0 has format 3.*up to 2.*Upgrade"):
        TxnHandoff.from_json({**data, "format": 3})
