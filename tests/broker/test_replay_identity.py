"""A replay must be the batch it replays (invariant 13).

Deleting ``<checkpoint>/offsets/N`` and ``commits/N`` makes Spark plan batch N again over
another range. Measured on Kafka 4.3.1 before the fix: the DONE decision for N made the
driver abort every new transaction and report success; the 100 rows that had arrived since
never appeared. TaskWriter plays the tasks, DriverProtocol the driver; the offsets files
are written as Spark writes them (tests/unit/test_batch_identity.py).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from eos_kafka_source.errors import CheckpointUnreadableError, ReplayMismatchError
from tests.kafka_helpers import create_topic
from tests.oracle import committed_view
from tests.sink_harness import Harness, assert_once_on_kafka, vals
from tests.unit.test_batch_identity import write_offsets


def _sink(bootstrap: str, unique: str, checkpoint: Path) -> Harness:
    create_topic(bootstrap, unique, partitions=2)
    h = Harness(bootstrap, unique, unique, checkpoint, checkpoint=checkpoint, claim=True)
    h.driver.prepare(new_run=True)
    return h


def _open_records(h: Harness) -> int:
    return sum(len(pv.open) for pv in committed_view(h.bootstrap, h.topic).values())


def test_rewound_checkpoint_is_refused_before_anything_is_aborted(
        bootstrap: str, unique: str, tmp_path: Path) -> None:
    """Before the fix: commit() took the rewound batch 0 for a replay, aborted its
    transactions and returned; the 100 new rows were never written."""
    ckpt = tmp_path / "ckpt"
    h = _sink(bootstrap, unique, ckpt)
    write_offsets(ckpt, 0, {"in": {"0": 100}})
    h.driver.commit(0, [h.task(0, vals("old", 100))], tasks=1)
    # 100 more rows arrive; the operator deletes offsets/0 and commits/0 to reprocess:
    write_offsets(ckpt, 0, {"in": {"0": 200}})  # Spark plans batch 0 again, over [0, 200)
    h.driver.prepare(new_run=True)
    rewound = [h.task(0, vals("old", 100) + vals("new", 100))]
    with pytest.raises(ReplayMismatchError) as refused:
        h.driver.commit(0, rewound, tasks=1)
    message = str(refused.value)
    assert '{"in": {"0": 100}}' in message and '{"in": {"0": 200}}' in message
    assert "restore" in message and "startingOffsets" in message
    assert _open_records(h) > 0, "commit() aborted the rewound batch's transaction"
    h.driver.abort(0, rewound, tasks=1)  # Spark aborts after commit() raised
    assert_once_on_kafka(h, Counter(vals("old", 100)))  # nothing lost, nothing twice
    # The operator restores offsets/0 (and commits/0): batch 1 takes the new rows.
    write_offsets(ckpt, 0, {"in": {"0": 100}})
    write_offsets(ckpt, 1, {"in": {"0": 200}})
    h.driver.prepare(new_run=True)
    h.driver.commit(1, [h.task(0, vals("new", 100))], tasks=1)
    assert_once_on_kafka(h, Counter(vals("old", 100) + vals("new", 100)))


def test_same_offsets_other_rows_is_still_a_replay(
        bootstrap: str, unique: str, tmp_path: Path) -> None:
    """A non-deterministic query replayed (the driver died after commit, before Spark's
    commits/N): the same offsets, other rows and another count. Still a replay: its
    transactions are aborted, the batch's first commit stands."""
    ckpt = tmp_path / "ckpt"
    h = _sink(bootstrap, unique, ckpt)
    write_offsets(ckpt, 0, {"in": {"0": 100}})
    h.driver.commit(0, [h.task(p, vals(f"first{p}", 30)) for p in range(2)], tasks=2)
    write_offsets(ckpt, 0, {"in": {"0": 100}}, conf="replanned")  # same offsets
    h.driver.prepare(new_run=True)
    h.driver.commit(0, [h.task(p, vals(f"other{p}", 20 + p)) for p in range(2)], tasks=2)
    assert_once_on_kafka(h, Counter(vals("first0") + vals("first1")))


def test_unknown_offsets_and_an_equal_count_are_refused_not_taken_for_a_replay(
        bootstrap: str, unique: str, tmp_path: Path) -> None:
    """Where offsets/N could not be read, the record count stood for the
    batch. The default read bound splits a cap over partitions by backlog, so a rewound
    batch 0 re-planned as p0:75/p1:25 instead of 50/50 has the same total: before the fix
    it was aborted as a replay and success reported (25 rows of p0 never written). Now it is
    refused by name before anything is aborted."""
    ckpt = tmp_path / "ckpt"
    h = _sink(bootstrap, unique, ckpt)  # offsets/0 never written: unknown
    h.driver.commit(0, [h.task(p, vals(f"old{p}", 50)) for p in range(2)], tasks=2)
    h.driver.prepare(new_run=True)
    rewound = [h.task(0, vals("old0", 50) + vals("new0", 25)), h.task(1, vals("new1", 25))]
    with pytest.raises(CheckpointUnreadableError, match="cannot tell") as refused:
        h.driver.commit(0, rewound, tasks=2)
    assert "100 then, 100 now" in str(refused.value)
    assert _open_records(h) > 0, "commit() aborted the rewound batch's transactions"
    h.driver.abort(0, rewound, tasks=2)  # Spark aborts after commit() raised
    assert_once_on_kafka(h, Counter(vals("old0", 50) + vals("old1", 50)))
