"""Tables, targets and CDF charts of ``benchmarks/latency/bench.py``'s measurements.

Where the time goes: each batch's StreamingQueryProgress ``durationMs`` splits it into
plan (latestOffset + getBatch + queryPlanning), addBatch (the tasks' read and write, then
the sink's commit on the driver), the offset and commit logs (walCommit + commitOffsets)
and the rest; eoskafka's own timing lines (``EOSKAFKA_TIMINGS``) take the driver commit out
of addBatch and split it (verify liveness, decision write, EndTxn, confirming each
commit from the log, mark done, clean-up).
"Markers landing" is from EndTxn answered to the watcher's next Fetch that brought records:
the coordinator writing the markers, the LSO moving, one Fetch (≤ 10 ms wait).
"""

from __future__ import annotations

import itertools
import json
import statistics
from bisect import bisect_left
from collections import Counter
from pathlib import Path
from typing import Any

from ..common import charts
from . import floor
from .phases import modelled_latency, phase_medians, phase_table
from .probe import percentiles
from .timeline import timeline_medians, timeline_table

BASE = "built-in at-least-once"
EXACTLY = "eoskafka exactly-once"
#: exactly-once p99 / the connector's, by trigger (other triggers: no target)
TARGET_RATIOS = {"default": 1.5, "1 s": 1.0}
TARGET_P99_MS = 1000.0  # at 20k records/s, default trigger
TARGET_FLOOR_RATIO = 1.15  # exactly-once batch time / the Python floor run the same way
FLOOR_TARGET_RATE = 20_000
COMMIT_PHASES = ("connect", "read_log", "verify", "decision", "endtxn", "confirm",
                 "mark_done", "cleanup")


def _mean(xs: list[float]) -> float:
    return statistics.fmean(xs) if xs else float("nan")


def summarise(run: dict[str, Any], step: dict[str, Any], timings: list[dict[str, Any]]
              ) -> dict[str, Any]:
    hist = Counter({int(k): v for k, v in step["hist"].items()})
    p50, p99, top = percentiles(hist)
    batches = step["batches"]
    total = {k: sum(b["ms"].get(k, 0) for b in batches) for k in
             ("triggerExecution", "latestOffset", "getBatch", "queryPlanning", "setOffsetRange",
              "addBatch", "walCommit", "commitOffsets")}
    lo, hi = step["from_wall"], step["to_wall"]
    mine = [t for t in timings if lo <= t["end"] < hi]
    hooks = [t for t in mine if t["kind"] == "commit_hook"]
    commits = [t for t in mine if t["kind"] == "commit"]
    planning = [t for t in mine if t["kind"] == "stream_writer" and t.get("worker") == "planning"]
    src_latest = [t for t in mine if t["kind"] == "source_latest"]
    src_parts = [t for t in mine if t["kind"] == "source_partitions"]
    tasks = [t for t in mine if t["kind"] == "task"]
    reads = [t for t in mine if t["kind"] == "source_read"]
    starts = sorted(b["start"] for b in batches)
    commit_ms = sum(t["total"] for t in hooks) * 1000
    trig = total["triggerExecution"] or float("nan")
    plan = total["latestOffset"] + total["getBatch"] + total["queryPlanning"] + \
        total["setOffsetRange"]
    wal = total["walCommit"] + total["commitOffsets"]
    visible = sorted(step["visible_at"])
    landing = []
    for c in commits:
        i = bisect_left(visible, c["endtxn_end"])
        if i < len(visible):
            landing.append((visible[i] - c["endtxn_end"]) * 1000)
    wall_ms = (hi - lo) * 1000
    return {
        "trigger": run["trigger"], "rate": step["rate"], "variant": run["variant"],
        "records": sum(hist.values()), "p50": p50, "p99": p99, "max": top,
        "batches": len(batches),
        "batch_ms": trig / len(batches) if batches else float("nan"),
        "batch_median_ms": statistics.median(b["ms"].get("triggerExecution", 0)
                                             for b in batches) if batches else float("nan"),
        "rows_per_batch": _mean([b["rows"] for b in batches]),
        "share": {"plan": plan / trig, "read + write (tasks)": (total["addBatch"] - commit_ms)
                  / trig, "driver commit": commit_ms / trig, "WAL + commit log": wal / trig,
                  "other": (trig - plan - total["addBatch"] - wal) / trig},
        "idle": max(wall_ms - total["triggerExecution"], 0.0) / wall_ms,
        "commit_ms": {p: _mean([t["phases"].get(p, 0.0) * 1000 for t in commits])
                      for p in COMMIT_PHASES},
        "commit_hook_ms": _mean([t["total"] * 1000 for t in hooks]),
        "commit_protocol_ms": _mean([t["total"] * 1000 for t in commits]),
        "planning_ms": _mean([t["total"] * 1000 for t in planning]),
        "prepare_ms": _mean([t["phases"].get("prepare", 0.0) * 1000 for t in planning]),
        "markers_ms": statistics.median(landing) if landing else float("nan"),
        "source_latest_ms": _mean([t["total"] * 1000 for t in src_latest]),
        "source_partitions_ms": _mean([t["total"] * 1000 for t in src_parts]),
        "source_tasks": _mean([t.get("tasks", 0) for t in src_parts]),
        "interval_ms": _median([(b - a) * 1000 for a, b in itertools.pairwise(starts)]),
        "task_write_ms": _median([t["phases"].get("write", 0.0) * 1000 for t in tasks]),
        "task_handoff_ms": _median([t["phases"].get("handoff", 0.0) * 1000 for t in tasks]),
        "task_input_wait_ms": _median([t.get("input_wait", float("nan")) * 1000 for t in tasks
                                       if "input_wait" in t]),
        "latest_calls": len(src_latest) / len(batches) if batches else float("nan"),
        "source_read_ms": _median([t["phases"].get("read", 0.0) * 1000 for t in reads]),
        "source_first_ms": _median([t["first_batch_s"] * 1000 for t in reads
                                    if t.get("first_batch_s") is not None]),
        "load": f"{min(step['load']):.1f}–{max(step['load']):.1f}",
        "modelled_p50_p99": modelled_latency(batches),
        "phase_ms": phase_medians(batches, hooks, commits, tasks, reads, src_latest,
                                  planning),
        "timeline_ms": timeline_medians(batches, mine),
    }


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _ms(x: float) -> str:
    return "–" if x != x else f"{x:,.0f}"


def floor_table(rows: list[dict[str, Any]], waves: int) -> list[str]:
    """Median batch time of every variant beside the floors, per trigger and rate."""
    shown = [v for v in (*floor.FLOORS, BASE, EXACTLY, "eoskafka at-least-once")
             if any(r["variant"] == v for r in rows)]
    if not any(v in floor.FLOORS for v in shown):
        return []
    same = floor.PYTHON_ONE_WAVE if waves == 1 else floor.PYTHON
    cells = {(r["trigger"], r["rate"], r["variant"]): r for r in rows}
    out = ["## Batch time beside the floor of Spark's Python data source", "",
           f"Median ms per micro-batch (triggerExecution). The floors read no Kafka (see "
           f"benchmarks/latency/floor.py); eoskafka ran {waves} wave(s) of tasks a batch, so "
           f"its ratio is to \"{same}\"; target ≤ {TARGET_FLOOR_RATIO}× at "
           f"{FLOOR_TARGET_RATE:,}/s.", "",
           "| trigger | rate | " + " | ".join(shown) + " | exactly-once / floor | met |",
           "|---|---|" + "---|" * len(shown) + "---|---|"]
    for trigger, rate in dict.fromkeys((r["trigger"], r["rate"]) for r in rows
                                       if r["trigger"] != "(none)"):
        got = [cells.get((trigger, rate, v)) for v in shown]
        eo, fl = cells.get((trigger, rate, EXACTLY)), cells.get((trigger, rate, same))
        ratio = (eo["batch_median_ms"] / fl["batch_median_ms"]
                 if eo and fl and fl["batch_median_ms"] else float("nan"))
        met = "" if rate != FLOOR_TARGET_RATE or ratio != ratio else \
            ("yes" if ratio <= TARGET_FLOOR_RATIO else "no")
        out.append(f"| {trigger} | {rate:,}/s | " + " | ".join(
            _ms(r["batch_median_ms"]) if r else "" for r in got)
            + f" | {'' if ratio != ratio else f'{ratio:.2f}×'} | {met} |")
    return out + [""]


def tables(rows: list[dict[str, Any]], waves: int = 2) -> list[str]:
    base = {(r["trigger"], r["rate"]): r for r in rows if r["variant"] == BASE}
    floors = floor_table(rows, waves)
    rows_by_floor = rows
    rows = [r for r in rows if r["variant"] not in floor.FLOORS]
    out = ["## Latency, produce to visible (read_committed)", "",
           "| trigger | rate | variant | records | batches | p50 ms | p99 ms | max ms | "
           "p99 / built-in | target | met | load (1 min) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b = base.get((r["trigger"], r["rate"]))
        ratio = r["p99"] / b["p99"] if b and b["p99"] else float("nan")
        target, met = "", ""
        want = TARGET_RATIOS.get(r["trigger"])
        if r["variant"] == EXACTLY and want is not None:
            target = f"≤ {want:g}× built-in"
            ok = ratio <= want
            if r["trigger"] == "default" and r["rate"] == 20_000:
                target += f", < {TARGET_P99_MS:,.0f} ms"
                ok = ok and r["p99"] < TARGET_P99_MS
            met = "yes" if ok else "no"
        out.append(f"| {r['trigger']} | {r['rate']:,}/s | {r['variant']} | {r['records']:,} | "
                   f"{r['batches']} | {_ms(r['p50'])} | {_ms(r['p99'])} | {_ms(r['max'])} | "
                   f"{'' if ratio != ratio else f'{ratio:.2f}×'} | {target} | {met} | "
                   f"{r['load']} |")
    out += ["", *floors, *phase_table(rows_by_floor), *timeline_table(rows_by_floor),
            "## Where the time goes", "",
            "Share of the batches' time (triggerExecution) by phase; idle: share of the "
            "step's wall time with no batch running (waiting for the trigger).", "",
            "| trigger | rate | variant | batch ms | rows/batch | plan | read + write (tasks) | "
            "driver commit | WAL + commit log | other | idle |", "|---|---|---|---|---|---|---|"
            "---|---|---|---|"]
    for r in rows_by_floor:
        s = r["share"]
        out.append(f"| {r['trigger']} | {r['rate']:,}/s | {r['variant']} | "
                   f"{_ms(r['batch_ms'])} | {_ms(r['rows_per_batch'])} | " + " | ".join(
                       _pct(s[k]) for k in ("plan", "read + write (tasks)", "driver commit",
                                            "WAL + commit log", "other"))
                   + f" | {_pct(r['idle'])} |")
    out += ["", "## eoskafka exactly-once: the driver commit, per batch (mean ms)", "",
            "| trigger | rate | commit() hook | of which: verify | decision write | EndTxn | "
            "confirm from log | mark done | clean-up | other | markers landing (median) | "
            "streamWriter() planning | of which prepare | source latestOffset | source "
            "partitions() | input tasks |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["variant"] != EXACTLY:
            continue
        c = r["commit_ms"]
        other = r["commit_hook_ms"] - sum(c[p] for p in ("verify", "decision", "endtxn",
                                                         "confirm", "mark_done", "cleanup"))
        out.append(f"| {r['trigger']} | {r['rate']:,}/s | {r['commit_hook_ms']:.1f} | "
                   f"{c['verify']:.1f} | {c['decision']:.1f} | {c['endtxn']:.1f} | "
                   f"{c['confirm']:.1f} | {c['mark_done']:.1f} | {c['cleanup']:.1f} | "
                   f"{other:.1f} | "
                   f"{r['markers_ms']:.1f} | {r['planning_ms']:.1f} | {r['prepare_ms']:.1f} | "
                   f"{r.get('source_latest_ms', 0.0):.1f} | "
                   f"{r.get('source_partitions_ms', 0.0):.1f} | "
                   f"{r.get('source_tasks', 0.0):.1f} |")
    out += ["", "## eoskafka per batch: interval, tasks and the source's calls", "",
            "Median time from one batch's start to the next's; the writing tasks' median "
            "`write` (reading the input and producing; of which waiting for the input, "
            "the source's read) and `handoff` (flush, the last acknowledgements) phases; "
            "the reading tasks' median time in the source's own code (Metadata, Fetch, "
            "decode; Spark taking the batches not counted); the source's `latestOffset` calls "
            "per batch.", "",
            "| trigger | rate | variant | p50 ms | p99 ms | batch every (ms) | input tasks | "
            "task write ms | of which input | task handoff ms | source read ms | "
            "latestOffset calls / batch |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["variant"] == "probe only (no Spark)":
            continue
        eo = r["variant"].startswith("eoskafka")
        out.append(f"| {r['trigger']} | {r['rate']:,}/s | {r['variant']} | {_ms(r['p50'])} | "
                   f"{_ms(r['p99'])} | {_ms(r.get('interval_ms', float('nan')))} | "
                   + (f"{r.get('source_tasks', 0.0):.1f} | "
                      f"{_ms(r.get('task_write_ms', float('nan')))} | "
                      f"{_ms(r.get('task_input_wait_ms', float('nan')))} | "
                      f"{_ms(r.get('task_handoff_ms', float('nan')))} | "
                      f"{_ms(r.get('source_read_ms', float('nan')))} | "
                      f"{r.get('latest_calls', float('nan')):.1f} |" if eo
                      else "| | | | | |"))
    return out


def _pct(x: float) -> str:
    return "–" if x != x else f"{x:.0%}"


def _slug(trigger: str) -> str:
    return trigger.replace(" ", "")


def draw(out_dir: Path, runs: list[dict[str, Any]]) -> list[Path]:
    """One CDF chart per (trigger, rate), a line per variant."""
    if not charts.available():
        print("matplotlib not installed (pip install -e '.[bench]'): no charts", flush=True)
        return []
    groups: dict[tuple[str, int], dict[str, dict[float, int]]] = {}
    for run in runs:
        if run.get("floor"):
            continue  # no records watched: batch times only (the floor table)
        for step in run["steps"]:
            hist = {float(k): v for k, v in step["hist"].items()}
            groups.setdefault((run["trigger"], step["rate"]), {})[run["variant"]] = hist
    probe = {rate: s for (trigger, rate), s in groups.items() if trigger == "(none)"}
    paths = []
    for (trigger, rate), samples in groups.items():
        if trigger == "(none)":
            continue
        samples = {**samples, **probe.get(rate, {})}  # the probe's floor on every chart
        paths.append(charts.cdf_chart(
            out_dir / f"latency-cdf-{_slug(trigger)}-{rate // 1000}k.png",
            f"Produce to visible, {rate:,} rec/s, trigger {trigger}", "latency (ms, log)",
            dict(sorted(samples.items())), logx=True))
    return paths


def draw_phases(path: Path, rows: list[dict[str, Any]]) -> Path | None:
    """Mean ms per batch by phase, each variant at each rate of the default trigger."""
    picked = [r for r in rows if r["trigger"] == "default" and r["batches"]]
    if not picked or not charts.available():
        return None
    groups: dict[str, dict[str, float]] = {}
    for r in picked:
        label = f"{r['variant']}, {r['rate'] // 1000}k/s"
        groups[label] = {k: v * r["batch_ms"] for k, v in r["share"].items()
                         if v == v and k != "other"}
    return charts.bar_chart(path, "Where a micro-batch's time goes (default trigger)",
                            "ms per batch (mean)", groups)


def save(out: Path, runs: list[dict[str, Any]], timings: list[dict[str, Any]],
         env: dict[str, Any]) -> list[dict[str, Any]]:
    rows = [summarise(run, step, timings) for run in runs for step in run["steps"]]
    order = {"(none)": -1, "default": 0, "1 s": 1, "100 ms": 2}
    rows.sort(key=lambda r: (order.get(r["trigger"], 9), r["rate"], r["variant"] != BASE,
                             r["variant"]))
    waves = int(env.get("eoskafka waves", 2))
    notes = [f"- {run['variant']} @ {run['trigger']}: sent {run['sent']:,}, visible "
             f"{run['received']:,}{'' if run['drained'] else ' (NOT all drained)'}, aborted "
             f"seen {run['aborted']}, feeder behind its schedule at most "
             f"{run['feeder_behind_max_s'] * 1000:.0f} ms" for run in runs
             if not run.get("floor")]
    head = [f"# Latency: eoskafka vs Spark's Kafka connector ({env['when']})", "",
            *[f"- {k}: {v}" for k, v in env.items() if k != "when"], ""]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(head + tables(rows, waves) + ["", "## Runs", "", *notes]) + "\n")
    out.with_suffix(".json").write_text(json.dumps(
        {"env": env, "rows": rows, "runs": runs, "timings": timings}, indent=1))
    for path in [*draw(out.parent, runs), draw_phases(out.parent / "latency-phases.png", rows)]:
        if path is not None:
            print(f"chart: {path}", flush=True)
    print("\n".join(tables(rows, waves)), flush=True)
    return rows
