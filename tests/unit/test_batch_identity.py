"""Which batch a batch id stands for (invariant 13), without Spark or a broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eos_kafka_source.errors import ReplayMismatchError
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


def test_unreadable_offsets_fall_back_to_the_record_count(tmp_path: Path) -> None:
    assert read_offsets(str(tmp_path), 3) is None  # no file
    assert read_offsets(None, 3) is None
    assert read_offsets("dbfs:/mnt/ckpt", 3) is None  # a scheme pyarrow has no filesystem for
    assert parse_offsets("not an offsets file") is None
    assert identity_of(str(tmp_path), 3, [handoff(7), handoff(5)]) == BatchIdentity(None, 12)


@pytest.mark.parametrize(("recorded", "now", "same"), [
    (BatchIdentity(({"t": {"0": 100}},), 100), BatchIdentity(({"t": {"0": 100}},), 37), True),
    (BatchIdentity(({"t": {"0": 100}},), 100), BatchIdentity(({"t": {"0": 200}},), 100), False),
    (BatchIdentity(None, 100), BatchIdentity(None, 100), True),
    (BatchIdentity(None, 100), BatchIdentity(None, 150), False),
    (BatchIdentity(({"t": {"0": 100}},), 100), BatchIdentity(None, 150), False),
    (None, BatchIdentity(({"t": {"0": 200}},), 5), True),  # decided before identities
])
def test_same_batch(recorded: BatchIdentity | None, now: BatchIdentity, same: bool) -> None:
    """Equal offsets are a replay whatever the rows (a non-deterministic query); the
    record count decides only where the offsets of either side are unknown."""
    assert same_batch(recorded, now) is same
    assert BatchIdentity.from_json(None if recorded is None else recorded.to_json()) == recorded


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
