"""A batch as a timeline: when each step starts and ends, in ms from the batch's start.

Spark's ``durationMs`` says how long each phase took; eoskafka's timing lines (and the
Python floor's, :mod:`.floor`) say when a task or hook ran (``end`` wall-clock, ``total``
seconds). Placed on the batch they ran in, their medians show where a batch waits: for the
writing task to start, for the reading task to start after it (Spark starts the reader's
Python worker once the writer takes input), for the commit hook after the last task.
"""

from __future__ import annotations

import statistics
from typing import Any

#: The floor's timing kinds, as eoskafka's (benchmarks/latency/floor.py).
_SAME_AS = {"floor_task": "task", "floor_read": "source_read", "floor_commit": "commit_hook",
            "floor_stream_writer": "stream_writer", "floor_partitions": "source_partitions"}
#: (label, what): ``what`` is (kind, "start" | "end", min | max) or a Spark phase boundary.
MILESTONES: tuple[str, ...] = (
    "addBatch starts", "source partitions() called", "sink streamWriter() (planning) starts",
    "sink streamWriter() (planning) ends", "first writing task starts",
    "first reading task starts", "last reading task ends", "last writing task ends",
    "sink commit() starts", "sink commit() ends", "commitOffsets starts", "batch ends")


def _spans(lines: list[dict[str, Any]], start: float, end: float
           ) -> dict[str, list[tuple[float, float]]]:
    """Each timing kind's (start, end) ms from ``start`` among lines that ended in the batch."""
    out: dict[str, list[tuple[float, float]]] = {}
    for t in lines:
        if start <= t["end"] <= end:
            kind = _SAME_AS.get(t["kind"], t["kind"])
            if kind == "stream_writer" and t.get("worker") != "planning":
                continue  # the commit worker's streamWriter(), just before commit()
            out.setdefault(kind, []).append(((t["end"] - t["total"] - start) * 1000,
                                             (t["end"] - start) * 1000))
    return out


def batch_milestones(batch: dict[str, Any], lines: list[dict[str, Any]]
                     ) -> dict[str, float]:
    """One batch's milestones (ms from its start) that its timing lines and phases give."""
    ms, start = batch["ms"], batch["start"]
    total = ms.get("triggerExecution", 0)
    co_start = total - ms.get("commitOffsets", 0)
    spans = _spans(lines, start, start + total / 1000 + 0.005)
    got = {"addBatch starts": co_start - ms.get("addBatch", 0),
           "commitOffsets starts": co_start, "batch ends": total}

    def put(label: str, kind: str, edge: int, pick: Any) -> None:
        if spans.get(kind):
            got[label] = pick(s[edge] for s in spans[kind])

    put("source partitions() called", "source_partitions", 0, min)
    put("sink streamWriter() (planning) starts", "stream_writer", 0, min)
    put("sink streamWriter() (planning) ends", "stream_writer", 1, min)
    put("first writing task starts", "task", 0, min)
    put("first reading task starts", "source_read", 0, min)
    put("last reading task ends", "source_read", 1, max)
    put("last writing task ends", "task", 1, max)
    put("sink commit() starts", "commit_hook", 0, min)
    put("sink commit() ends", "commit_hook", 1, max)
    return got


def timeline_medians(batches: list[dict[str, Any]], lines: list[dict[str, Any]]
                     ) -> dict[str, float]:
    """Median ms from a batch's start of each milestone, over the batches that have it."""
    seen: dict[str, list[float]] = {}
    for b in batches:
        for label, v in batch_milestones(b, lines).items():
            seen.setdefault(label, []).append(v)
    return {label: statistics.median(seen[label]) for label in MILESTONES if label in seen}


def timeline_table(rows: list[dict[str, Any]]) -> list[str]:
    """Per trigger and rate: a line per milestone, a column per variant that timed any."""
    out: list[str] = []
    points = dict.fromkeys((r["trigger"], r["rate"]) for r in rows if r["trigger"] != "(none)")
    for trigger, rate in points:
        here = [r for r in rows if (r["trigger"], r["rate"]) == (trigger, rate)
                and len(r.get("timeline_ms") or {}) > 3]  # more than Spark's own three
        if not here:
            continue
        if not out:
            out = ["## A batch as a timeline", "",
                   "Median ms from a batch's start to each step (Spark's phases, eoskafka's "
                   "and the Python floor's timing lines; benchmarks/latency/timeline.py).", ""]
        out += [f"### {trigger} trigger, {rate:,}/s", "",
                "| from the batch's start to | " + " | ".join(r["variant"] for r in here)
                + " |", "|---|" + "---|" * len(here)]
        for label in MILESTONES:
            cells = [r["timeline_ms"].get(label) for r in here]
            if all(c is None for c in cells):
                continue
            out.append(f"| {label} | " + " | ".join("" if c is None else f"{c:,.0f}"
                                                    for c in cells) + " |")
        out.append("")
    return out
