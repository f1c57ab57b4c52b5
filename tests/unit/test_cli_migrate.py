"""``eoskafka migrate`` on checkpoints written by hand: which batch it takes, what it refuses.

No broker: without ``-b`` the command only reads the checkpoint. The end-to-end case
(Spark's connector, then eoskafka, on Apache Kafka) is tests/spark/test_migrate.py.
"""

from __future__ import annotations

from pathlib import Path

from eos_kafka_source.cli import main

META = '{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{}}'


def test_migrate_reports_a_batch_planned_but_not_committed(tmp_path: Path, capsys) -> None:
    """A checkpoint whose newest batch has offsets/N but no commits/N (stopped mid-batch):
    the offsets are those of the last COMMITTED batch, with a warning; no broker needed."""
    chk = tmp_path / "chk"
    (chk / "offsets").mkdir(parents=True)
    (chk / "commits").mkdir()

    (chk / "offsets" / "0").write_text(f'v1\n{META}\n{{"t":{{"1":4,"0":3}}}}')
    (chk / "offsets" / "1").write_text(f'v1\n{META}\n{{"t":{{"0":9,"1":8}}}}')
    (chk / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    code = main(["migrate", "--checkpoint", str(chk)])
    text = capsys.readouterr().out
    assert code == 0 and '{"t":{"0":3,"1":4}}' in text
    assert "batch 1 was planned" in text and "WARNING" in text
    (chk / "commits" / "0").unlink()
    assert main(["migrate", "--checkpoint", str(chk)]) == 2
    assert "no committed batch" in capsys.readouterr().err


def test_migrate_needs_one_kafka_source(tmp_path: Path, capsys) -> None:
    chk = tmp_path / "chk"
    (chk / "offsets").mkdir(parents=True)
    (chk / "commits").mkdir()
    (chk / "offsets" / "0").write_text(f'v1\n{META}\n{{"a":{{"0":1}}}}\n{{"b":{{"0":2}}}}')
    (chk / "commits" / "0").write_text("v1\n{}")
    assert main(["migrate", "--checkpoint", str(chk)]) == 2
    assert "--source N" in capsys.readouterr().err
    assert main(["migrate", "--checkpoint", str(chk), "--source", "1"]) == 0
    assert '{"b":{"0":2}}' in capsys.readouterr().out
    (chk / "offsets" / "0").write_text(f'v1\n{META}\n{{"logOffset":3}}')
    assert main(["migrate", "--checkpoint", str(chk)]) == 2
    assert "no Kafka source offsets" in capsys.readouterr().err


def test_migrate_prints_the_steps_before_the_offsets_they_use(tmp_path: Path, capsys) -> None:
    """Steps first, then the startingOffsets JSON: no step points at text printed before it."""
    chk = tmp_path / "chk"
    (chk / "offsets").mkdir(parents=True)
    (chk / "commits").mkdir()
    (chk / "offsets" / "0").write_text(f'v1\n{META}\n{{"t":{{"0":3}}}}')
    (chk / "commits" / "0").write_text("v1\n{}")
    assert main(["migrate", "--checkpoint", str(chk)]) == 0
    text = capsys.readouterr().out
    assert text.index("steps:") < text.index("startingOffsets:") < text.rindex('{"t":{"0":3}}')
    assert "below" not in text and "above" not in text
