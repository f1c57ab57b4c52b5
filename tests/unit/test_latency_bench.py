"""The latency benchmark's arguments and its phase table, without Spark or a broker."""

from __future__ import annotations

import pytest

from benchmarks.latency.bench import triggers_named, variants_named
from benchmarks.latency.phases import phase_medians, phase_table


def test_triggers_by_name_with_or_without_spaces() -> None:
    assert triggers_named("default,1s,100 ms") == ["default", "1 s", "100 ms"]


def test_an_unknown_trigger_is_refused_not_run_as_the_default() -> None:
    with pytest.raises(SystemExit, match="unknown trigger '2s'.*'default', '1 s', '100 ms'"):
        triggers_named("default,2s")


def test_an_unknown_variant_is_refused_before_anything_starts() -> None:
    assert variants_named("built-in at-least-once,eoskafka exactly-once") == [
        "built-in at-least-once", "eoskafka exactly-once"]
    with pytest.raises(SystemExit, match="unknown variant"):
        variants_named("built-in at-least-once,eoskafka exactly once")


def test_phase_table_puts_each_variant_beside_the_floor() -> None:
    batch = {"rows": 400, "ms": {"triggerExecution": 200, "latestOffset": 5, "walCommit": 40,
                                 "queryPlanning": 9, "getBatch": 1, "addBatch": 100,
                                 "commitOffsets": 45}}
    hook = {"total": 0.05, "phases": {}}
    commit = {"total": 0.05, "phases": {"decision": 0.012, "endtxn": 0.004}}
    eos = phase_medians([batch, batch], [hook], [commit], [], [], [], [])
    floor = phase_medians([batch], [], [], [], [], [], [])
    assert eos["plan"] == 10 and eos["commit: decision write"] == pytest.approx(12)
    rows = [{"trigger": "default", "rate": 2000, "variant": "Python floor", "phase_ms": floor},
            {"trigger": "default", "rate": 2000, "variant": "eoskafka", "phase_ms": eos}]
    table = "\n".join(phase_table(rows))
    assert "| phase | Python floor | eoskafka |" in table
    assert "| commitOffsets | 45 | 45 |" in table
    assert "| commit: decision write |  | 12 |" in table
    assert "source latestOffset()" not in table  # no variant timed it: no line


def test_modelled_latency_of_back_to_back_batches() -> None:
    """Batches of 200 ms one after the other: a record waits for the next batch to start
    (0-200 ms) and for it to end (200 ms): p50 300 ms, p99 near 400 ms."""
    from benchmarks.latency.phases import modelled_latency

    batches = [{"start": 100.0 + 0.2 * i, "rows": 1, "ms": {"latestOffset": 10,
                                                            "addBatch": 190}}
               for i in range(20)]
    p50, p99 = modelled_latency(batches)
    assert 295 <= p50 <= 305 and 394 <= p99 <= 400
    assert modelled_latency(batches[:1]) == [pytest.approx(float("nan"), nan_ok=True)] * 2


def test_timeline_places_tasks_and_hooks_on_their_batch() -> None:
    """Milestones in ms from the batch's start, from the timing lines that ended in it; the
    floor's kinds count as eoskafka's, the commit worker's streamWriter() is not planning."""
    from benchmarks.latency.timeline import batch_milestones, timeline_medians, timeline_table

    batch = {"start": 1000.0, "rows": 1, "ms": {"triggerExecution": 250, "addBatch": 150,
                                                 "commitOffsets": 50}}
    lines = [
        {"kind": "floor_partitions", "end": 1000.055, "total": 0.0},
        {"kind": "stream_writer", "worker": "planning", "end": 1000.070, "total": 0.010},
        {"kind": "task", "end": 1000.170, "total": 0.080},
        {"kind": "floor_task", "end": 1000.160, "total": 0.060},
        {"kind": "source_read", "end": 1000.150, "total": 0.010},
        {"kind": "stream_writer", "end": 1000.180, "total": 0.001},  # the commit worker's
        {"kind": "commit_hook", "end": 1000.195, "total": 0.015},
        {"kind": "task", "end": 1000.400, "total": 0.080},  # the next batch's
    ]
    got = batch_milestones(batch, lines)
    assert got["addBatch starts"] == pytest.approx(50)
    assert got["source partitions() called"] == pytest.approx(55)
    assert got["sink streamWriter() (planning) starts"] == pytest.approx(60)
    assert got["sink streamWriter() (planning) ends"] == pytest.approx(70)
    assert got["first writing task starts"] == pytest.approx(90)
    assert got["first reading task starts"] == pytest.approx(140)
    assert got["last writing task ends"] == pytest.approx(170)
    assert got["sink commit() starts"] == pytest.approx(180)
    assert got["commitOffsets starts"] == 200 and got["batch ends"] == 250
    rows = [{"trigger": "default", "rate": 2000, "variant": "eoskafka",
             "timeline_ms": timeline_medians([batch], lines)}]
    table = "\n".join(timeline_table(rows))
    assert "| first reading task starts | 140 |" in table
