"""Which batch a batch id stands for (invariant 13), without Spark or a broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eos_kafka_source.errors import CheckpointUnreadableError, ReplayMismatchError
from eos_kafka_source.sink.decisions.log import Decision, DecisionLog
from eos_kafka_source.sink.driver.batch_identity import (
    BatchIdentity,
    identity_of,
    parse_offsets,
    read_offsets,
    refuse_other_batch,
    same_batch,
)
from eos_kafka_source.sink.handoff import TxnHandoff


def write_offsets(checkpoint: Path, batch: int, *sources: object, conf: str = "a") -> None:
    """An offsets file as Spark writes it: version, batch metadata, one line per source."""
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1700000000000, "conf": {"x": conf}}
    lines = ["v1", json.dumps(meta)] + [s if isinstance(s, str) else json.dumps(s)
                                         for s in sources]
    (checkpoint / "offsets" / str(batch)).write_text("\n".join(lines))


def handoff(records: int) -> TxnHandoff:
    return TxnHandoff("p-0", 1, 0, 2, True, (("t", 0, records),), records)


def test_offsets_are_the_source_lines_metadata_is_not(tmp_path: Path) -> None:
    write_offsets(tmp_path, 0, {"in": {"0": 100, "1": 50}}, "-", conf="a")
    first = read_offsets(str(tmp_path), 0)
    assert first == ({"in": {"0": 100, "1": 50}}, "-")
    write_offsets(tmp_path, 0, {"in": {"1": 50, "0": 100}}, "-", conf="b")  # re-planned
    assert read_offsets(str(tmp_path), 0) == first  # other timestamps, conf, key order


def test_offsets_not_written_are_unknown_not_guessed(tmp_path: Path) -> None:
    assert read_offsets(str(tmp_path), 3) is None  # no file
    assert read_offsets(None, 3) is None
    assert parse_offsets("not an offsets file") is None
    assert identity_of(str(tmp_path), 3, [handoff(7), handoff(5)]) == BatchIdentity(None, 12)


def test_offsets_that_cannot_be_read_are_refused_by_name(tmp_path: Path) -> None:
    """Where offsets/N could not be read (a scheme pyarrow lacks, a
    store error), the batch was identified by its record count; now it fails by name."""
    with pytest.raises(CheckpointUnreadableError, match="no filesystem for dbfs") as no_fs:
        identity_of("dbfs:/mnt/ckpt", 3, [handoff(7)])
    assert str(no_fs.value).startswith("[EOSKAFKA_CHECKPOINT_UNREADABLE]")
    assert "s3://" in str(no_fs.value)  # what to give instead
    (tmp_path / "offsets" / "3").mkdir(parents=True)  # a read error: not "no such file"
    with pytest.raises(CheckpointUnreadableError, match="could not be read") as failed:
        identity_of(str(tmp_path), 3, [handoff(7)])
    assert "replays it" in str(failed.value)


def test_an_equal_record_count_is_not_the_same_batch() -> None:
    """The default read bound splits maxOffsetsPerTrigger over partitions by backlog: a
    rewound batch re-planned as p0:7,500/p1:2,500 instead of 5,000/5,000 has the same total.
    Before the fix it was aborted as a replay (success reported, part of p0 lost)."""
    recorded = BatchIdentity(None, 10_000)  # decided where offsets/0 could not be read
    previous = Decision(0, (handoff(10_000),), True, lineage="query-A",
                        identity=recorded.to_json())
    for now in (BatchIdentity(None, 10_000),
                BatchIdentity(({"in": {"0": 7_500, "1": 2_500}},), 10_000)):
        assert same_batch(recorded, now) is None
        with pytest.raises(CheckpointUnreadableError, match="cannot tell") as refused:
            refuse_other_batch(previous, now, "/ck")
        assert "10000 then, 10000 now" in str(refused.value)
        assert "startingOffsets" in str(refused.value)
    known = BatchIdentity(({"in": {"0": 5_000, "1": 5_000}},), 10_000)
    previous = Decision(0, (handoff(10_000),), True, lineage="query-A",
                        identity=known.to_json())
    with pytest.raises(CheckpointUnreadableError, match="/ck/offsets/0 is not there"):
        refuse_other_batch(previous, BatchIdentity(None, 10_000), "/ck")


def test_the_identity_round_trips_through_the_decision_log(tmp_path: Path) -> None:
    log = DecisionLog(str(tmp_path), "query-A")
    identity = BatchIdentity(({"in": {"0": 100}},), 100)
    log.decide(0, [handoff(100)], identity.to_json())
    log.decide(1, [handoff(100)])
    assert BatchIdentity.from_json(log.get(0).identity) == identity
    assert log.get(1).identity is None


def test_the_refusal_names_the_batch_both_ranges_and_the_fixes() -> None:
    recorded = BatchIdentity(({"in": {"0": 100}},), 100)
    previous = Decision(0, (handoff(100),), True, lineage="query-A",
                        identity=recorded.to_json())
    refuse_other_batch(previous, BatchIdentity(({"in": {"0": 100}},), 3), "/ck")  # a replay
    with pytest.raises(ReplayMismatchError) as raised:
        refuse_other_batch(previous, BatchIdentity(({"in": {"0": 200}},), 200), "/ck")
    message = str(raised.value)
    assert message.startswith("[EOSKAFKA_REPLAY_MISMATCH] batch 0 of query query-A")
    for part in ['{"in": {"0": 100}}', '{"in": {"0": 200}}', "/ck/offsets/0", "commits/0",
                 "restore", "startingOffsets", "does not skip", "written twice"]:
        assert part in message, part
