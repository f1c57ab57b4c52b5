"""A batch phase by phase, each variant beside the floor of Spark's Python data source.

Median milliseconds per batch of each phase Spark times (StreamingQueryProgress
``durationMs``) and of each step eoskafka times itself (``EOSKAFKA_TIMINGS``), one column per
variant at a trigger and rate, the floors (no Kafka: :mod:`.floor`) among them. Spark's
phases, in the order a batch runs them:

- ``latestOffset``: the source's ``latestOffset`` (eoskafka: one Metadata and one Fetch per
  leader; the floor: arithmetic);
- ``walCommit``: Spark writes ``offsets/N`` to the checkpoint (the previous batch's source
  ``commit()`` runs after the batch, untimed by Spark);
- ``plan``: getBatch + queryPlanning + setOffsetRange (eoskafka's ``partitions()`` and the
  sink's ``streamWriter()`` in the planning worker happen here and at the start of
  addBatch);
- ``addBatch``: the tasks (read, hand-off through the JVM, write) and then the sink's
  ``commit()`` on the driver (eoskafka: verify, decision write, EndTxn, confirmation, mark
  done);
- ``commitOffsets``: Spark writes ``commits/N``.

Medians of a phase do not add up to the median batch; they say which phase grew.
"""

from __future__ import annotations

import statistics
from typing import Any

#: Spark's phases of a batch (durationMs keys, ``plan`` summed).
SPARK_PHASES = ("triggerExecution", "latestOffset", "walCommit", "plan", "addBatch",
                "commitOffsets")
#: The phases of a batch up to its sink's commit (addBatch's end), in the order they run.
_TO_VISIBLE = ("latestOffset", "walCommit", "getBatch", "queryPlanning", "setOffsetRange",
               "addBatch")
#: eoskafka's own steps: (label, timing kind, phase or "total").
EOS_STEPS = (
    ("source latestOffset()", "source_latest", "total"),
    ("sink streamWriter() (planning)", "stream_writer", "total"),
    ("reading task: read (Metadata, Fetch, decode)", "source_read", "read"),
    ("reading task: handing batches to Spark", "source_read", "handed"),
    ("writing task: InitProducerId", "task", "open"),
    ("writing task: abort-mark check", "task", "abort_check"),
    ("writing task: write (input and Produce)", "task", "write"),
    ("writing task: hand-off (flush)", "task", "handoff"),
    ("driver commit() hook", "commit_hook", "total"),
    ("commit: verify", "commit", "verify"),
    ("commit: decision write", "commit", "decision"),
    ("commit: EndTxn", "commit", "endtxn"),
    ("commit: confirm from the log", "commit", "confirm"),
    ("commit: mark done", "commit", "mark_done"),
    ("commit: clean-up", "commit", "cleanup"),
)


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def phase_medians(batches: list[dict[str, Any]], hooks: list[dict[str, Any]],
                  commits: list[dict[str, Any]], tasks: list[dict[str, Any]],
                  reads: list[dict[str, Any]], latest: list[dict[str, Any]],
                  planning: list[dict[str, Any]]) -> dict[str, float]:
    """Median ms of every phase of one step's batches (Spark's and eoskafka's)."""
    out: dict[str, float] = {}
    for key in SPARK_PHASES:
        if key == "plan":
            vals = [sum(b["ms"].get(k, 0) for k in ("getBatch", "queryPlanning",
                                                    "setOffsetRange")) for b in batches]
        else:
            vals = [b["ms"].get(key, 0) for b in batches]
        out[key] = _median([float(v) for v in vals])
    kinds = {"source_latest": latest, "stream_writer": planning, "source_read": reads,
             "task": tasks, "commit_hook": hooks, "commit": commits}
    for label, kind, phase in EOS_STEPS:
        lines = kinds[kind]
        out[label] = _median([(t["total"] if phase == "total" else t["phases"].get(phase, 0.0))
                              * 1000 for t in lines])
    out["writing task: of which waiting for input"] = _median(
        [t["input_wait"] * 1000 for t in tasks if "input_wait" in t])
    out["rows a batch"] = _median([float(b["rows"]) for b in batches])
    return out


def _cell(x: float | None) -> str:
    return "" if x is None or x != x else f"{x:,.0f}"


def phase_table(rows: list[dict[str, Any]]) -> list[str]:
    """Per trigger and rate: a line per phase, a column per variant (floors included)."""
    out: list[str] = []
    points = dict.fromkeys((r["trigger"], r["rate"]) for r in rows if r["trigger"] != "(none)")
    for trigger, rate in points:
        here = [r for r in rows if (r["trigger"], r["rate"]) == (trigger, rate)
                and r.get("phase_ms")]
        if not here:
            continue
        if not out:
            out = ["## A batch phase by phase, beside the floor", "",
                   "Median ms per batch of each phase (Spark's durationMs, then eoskafka's "
                   "own timing lines); the floors read and write no Kafka. See "
                   "benchmarks/latency/phases.py for what each phase holds.", ""]
        out += [f"### {trigger} trigger, {rate:,}/s", "",
                "| phase | " + " | ".join(r["variant"] for r in here) + " |",
                "|---|" + "---|" * len(here)]
        labels = ["rows a batch", *SPARK_PHASES,
                  *(label for label, _, _ in EOS_STEPS[:7]),
                  "writing task: of which waiting for input",
                  *(label for label, _, _ in EOS_STEPS[7:])]
        for label in labels:
            cells = [r["phase_ms"].get(label) for r in here]
            if all(c is None or c != c for c in cells):
                continue
            out.append(f"| {label} | " + " | ".join(_cell(c) for c in cells) + " |")
        out.append("")
    return out


def modelled_latency(batches: list[dict[str, Any]], qs: tuple[float, ...] = (0.5, 0.99)
                     ) -> list[float]:
    """Produce-to-visible percentiles a query with these batches gives records that arrive
    evenly, if reading, writing and committing them cost nothing beyond the batches: a
    record arriving at ``t`` is planned by the first batch that starts after ``t`` and
    visible when that batch ends. For a floor query (no Kafka) that is the latency floor of
    its path through Spark; for the connector's batches it bounds its measured latency from
    above (its records become visible as they are written, before the batch ends).
    "Visible" is the end of addBatch (the sink's commit; Spark's commit log comes after)."""
    spans = sorted((b["start"], b["start"] + sum(b["ms"].get(k, 0) for k in _TO_VISIBLE) / 1000)
                   for b in batches)
    samples: list[float] = []
    for (prev, _), (start, end) in zip(spans, spans[1:], strict=False):
        # arrivals every millisecond between the two batches' starts
        n = max(int((start - prev) * 1000), 1)
        samples += [(end - (prev + (start - prev) * (i + 0.5) / n)) * 1000 for i in range(n)]
    if not samples:
        return [float("nan")] * len(qs)
    samples.sort()
    return [samples[min(len(samples) - 1, int(q * len(samples)))] for q in qs]
