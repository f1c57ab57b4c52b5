"""``eoskafka lag`` on checkpoints written by hand, where no broker is needed.

The lag itself, against a broker, is tests/broker/test_cli.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eos_kafka_source.cli import main


@pytest.mark.parametrize("offsets_dir", [True, False])
def test_lag_on_a_query_with_no_batch_yet_is_a_state(tmp_path: Path, capsys,
                                                      offsets_dir: bool) -> None:
    """A query that has started (Spark wrote <checkpoint>/metadata) and planned no batch:
    exit 0 with what it means, even under --max-lag, so an alert does not fire at every
    fresh start. No broker is contacted (127.0.0.1:1 would refuse)."""
    (tmp_path / "metadata").write_text('{"id":"5b6a2f1e-0000-4000-8000-000000000000"}')
    if offsets_dir:
        (tmp_path / "offsets").mkdir()
    chk = str(tmp_path)
    assert main(["lag", "-b", "127.0.0.1:1", "--checkpoint", chk, "--max-lag", "0"]) == 0
    assert "no batch planned yet" in capsys.readouterr().out
    assert main(["lag", "-b", "127.0.0.1:1", "--checkpoint", chk, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["batch_id"] is None and doc["total_lag"] is None and doc["ok"]


def test_lag_on_a_folder_that_is_no_query_checkpoint_is_a_usage_error(tmp_path: Path,
                                                                       capsys) -> None:
    """No Spark metadata and no offsets: a wrong path, not a fresh query (exit 2)."""
    assert main(["lag", "-b", "127.0.0.1:1", "--checkpoint", str(tmp_path / "nope")]) == 2
    assert "no eoskafka source offsets" in capsys.readouterr().err
