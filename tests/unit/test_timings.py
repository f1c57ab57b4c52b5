"""Phase timings (timings.py), and what the sink's driver side imports."""

from __future__ import annotations

import json
import subprocess
import sys

from eos_kafka_source.timings import ENV, Phases


def test_inert_unless_asked(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV, raising=False)
    timed = Phases("commit")
    timed.mark("decision")
    timed.write(batch=1)
    assert timed.path is None
    assert not list(tmp_path.iterdir())


def test_one_line_per_step_with_phases(monkeypatch, tmp_path):
    out = tmp_path / "t.jsonl"
    monkeypatch.setenv(ENV, str(out))
    for batch in (1, 2):
        timed = Phases("commit")
        timed.mark("decision")
        timed.mark("endtxn")
        timed.mark("endtxn")
        timed.write(batch=batch)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["batch"] for line in lines] == [1, 2]
    assert set(lines[0]["phases"]) == {"decision", "endtxn"}
    assert lines[0]["total"] >= sum(lines[0]["phases"].values())


def test_driver_side_sink_leaves_the_codec_unimported():
    """Spark starts new Python processes for streamWriter() and commit() every micro-batch:
    the sink's driver side must not import the task side's codec (pandas through
    pyarrow.compute, aiokafka), half of its import time."""
    code = ("import sys, eos_kafka_source.sink.spark_writer, "
            "eos_kafka_source.sink.driver.protocol; "
            "print(sorted(m for m in ('pandas', 'aiokafka', 'pyarrow.compute', "
            "'eos_kafka_source.sink.task.writer') if m in sys.modules))")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.strip()
    assert found == "[]"


def test_codec_still_reachable_from_the_package():
    import eos_kafka_source.records as records

    batch = records.encode_batch([None], [b"v"], 0)
    assert [h.record_count for h, _ in records.iter_batches(batch)] == [1]
    assert records.ColumnBuilder is not None


def test_a_step_is_timed_by_its_with_block_even_when_it_raises(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    timed = Phases("commit")
    with timed.step("decision"):
        pass
    try:
        with timed.step("endtxn"):
            raise RuntimeError("unknown outcome")
    except RuntimeError:
        pass
    assert set(timed.seconds) == {"decision", "endtxn"}
    assert all(s >= 0 for s in timed.seconds.values())
