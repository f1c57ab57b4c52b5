"""Pure parts of the operator-chaos round (tests/chaos/operator_faults.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.chaos.operator_faults import committed_end_offsets


def _batch(ckpt: Path, n: int, offsets: dict, committed: bool) -> None:
    (ckpt / "offsets").mkdir(parents=True, exist_ok=True)
    (ckpt / "commits").mkdir(parents=True, exist_ok=True)
    (ckpt / "offsets" / str(n)).write_text(
        "v1\n" + json.dumps({"batchWatermarkMs": 0}) + "\n" + json.dumps(offsets) + "\n")
    if committed:
        (ckpt / "commits" / str(n)).write_text("v1\n{}\n")


def test_a_reset_starts_after_the_last_batch_spark_committed_or_the_sink_decided(
        tmp_path: Path) -> None:
    _batch(tmp_path, 0, {"in": {"0": 10}}, committed=True)
    _batch(tmp_path, 1, {"in": {"0": 20}}, committed=True)
    _batch(tmp_path, 2, {"in": {"0": 30}}, committed=False)  # planned, not run
    assert json.loads(committed_end_offsets(tmp_path, set())) == {"in": {"0": 20}}
    # The sink decided batch 2 before Spark recorded it: its output exists (or will, once
    # the next start rolls the decision forward), so the new query starts after it.
    assert json.loads(committed_end_offsets(tmp_path, {2})) == {"in": {"0": 30}}


def test_no_batch_yet_starts_from_the_options(tmp_path: Path) -> None:
    assert committed_end_offsets(tmp_path, set()) is None
