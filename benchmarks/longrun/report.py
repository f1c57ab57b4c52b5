"""The long run's verdict, table, JSON and curves.

A series is flat when, after the warm-up (the first ``warmup`` share of batches), its
maximum stays within 10% of the mean of its first window (the first tenth of the
samples after warm-up). Times (driver commit, Spark's trigger) depend on the machine's
load, which comes and goes on a shared machine: their verdict compares the medians of
the first and last windows instead of the maximum, with the load of each window shown.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from ..common.charts import line_chart

SLACK = 0.10

#: series -> (label, unit, load-sensitive)
SERIES: dict[str, tuple[str, str, bool]] = {
    "driver_jvm_rss_mb": ("driver JVM RSS", "MB", False),
    "driver_jvm_heap_after_gc_mb": ("driver JVM heap after full GC", "MB", False),
    "driver_jvm_fds": ("driver JVM open files", "", False),
    "driver_jvm_threads": ("driver JVM threads", "", False),
    "source_runner_max_rss_mb": ("planning worker (streamReader) RSS", "MB", False),
    "source_runner_max_fds": ("planning worker open files", "", False),
    "writer_factory_max_rss_mb": ("streamWriter() worker RSS (largest)", "MB", False),
    "commit_worker_max_rss_mb": ("commit() worker RSS (largest)", "MB", False),
    "commit_worker_max_fds": ("commit() worker open files (most)", "", False),
    "task_worker_max_rss_mb": ("task worker RSS (largest)", "MB", False),
    "python_processes": ("Python processes under the driver", "", False),
    "python_rss_mb": ("Python processes RSS (sum)", "MB", False),
    "checkpoint_bytes": ("checkpoint (Spark's part) bytes", "B", False),
    "checkpoint_files": ("checkpoint (Spark's part) files", "", False),
    "decision_log_bytes": ("decision log bytes", "B", False),
    "decision_log_files": ("decision log files", "", False),
    "transactional_ids": ("transactional ids on the broker", "", False),
    "output_producer_ids": ("producer ids on the output partitions", "", False),
    "broker_rss_mb": ("broker RSS", "MB", False),
    "broker_rss_anon_mb": ("broker RSS: heap and native (RssAnon)", "MB", False),
    "broker_rss_file_mb": ("broker RSS: mapped files (RssFile: log indexes, jars)", "MB", False),
    "broker_heap_after_gc_mb": ("broker JVM heap after full GC", "MB", False),
    "broker_fds": ("broker open files", "", False),
    "commit_s_median": ("driver commit (decision → done), median", "s", True),
    "trigger_s_median": ("Spark micro-batch (triggerExecution), median", "s", True),
}

CHARTS: dict[str, tuple[str, list[str]]] = {
    "memory": ("Memory (MB)", ["driver_jvm_rss_mb", "driver_jvm_heap_after_gc_mb",
                               "source_runner_max_rss_mb", "writer_factory_max_rss_mb",
                               "commit_worker_max_rss_mb", "task_worker_max_rss_mb",
                               "broker_rss_mb", "broker_heap_after_gc_mb"]),
    "files": ("Files", ["checkpoint_files", "decision_log_files", "driver_jvm_fds",
                        "source_runner_max_fds", "commit_worker_max_fds",
                        "broker_fds"]),
    "broker": ("Ids on the broker", ["transactional_ids", "output_producer_ids"]),
    "time": ("Seconds (median over the sample's batches)", ["commit_s_median",
                                                             "trigger_s_median"]),
}


def verdicts(samples: list[dict[str, Any]], batches: int, warmup: float
             ) -> list[dict[str, Any]]:
    after = [s for s in samples if s["batch"] >= warmup * batches]
    if len(after) < 2:
        return []
    window = max(1, math.ceil(len(after) / 10))
    first, last = after[:window], after[-window:]
    out = []
    for key, (label, unit, timed) in SERIES.items():
        values = [s[key] for s in after if s.get(key) is not None]
        f = [s[key] for s in first if s.get(key) is not None]
        la = [s[key] for s in last if s.get(key) is not None]
        if not values or not f or not la:
            continue
        pick = statistics.median if timed else statistics.fmean
        base, end, top = pick(f), pick(la), max(values)
        probe = end if timed else top
        flat = probe <= base * (1 + SLACK) if base > 0 else probe == 0
        out.append({"series": key, "label": label, "unit": unit, "first": base, "last": end,
                    "max": top, "flat": flat, "load_first": statistics.fmean(
                        s["load"] for s in first), "load_last": statistics.fmean(
                        s["load"] for s in last), "timed": timed})
    return out


def _fmt(value: float, unit: str) -> str:
    if unit == "B":
        return f"{value / 1024:,.0f} KiB"
    if unit == "s":
        return f"{value * 1000:,.0f} ms"
    return f"{value:,.1f}{' ' + unit if unit else ''}"


def table(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| series | first window | last window | max after warm-up | verdict |",
             "|---|---:|---:|---:|---|"]
    for r in rows:
        verdict = "flat" if r["flat"] else "**grows**"
        if r["timed"]:
            verdict += f" (medians; load {r['load_first']:.1f} → {r['load_last']:.1f})"
        lines.append(f"| {r['label']} | {_fmt(r['first'], r['unit'])} | "
                     f"{_fmt(r['last'], r['unit'])} | {_fmt(r['max'], r['unit'])} | {verdict} |")
    return lines


def save(out: Path, samples: list[dict[str, Any]], batches: dict[int, dict[str, float]],
         commits: dict[int, float], env: dict[str, Any], warmup: float) -> bool:
    """Write ``out`` (.md), its .json and the charts; True when every series is flat."""
    out.parent.mkdir(parents=True, exist_ok=True)
    n = env["batches"]
    rows = verdicts(samples, n, warmup)
    for name, (ylabel, keys) in CHARTS.items():
        series = {SERIES[k][0]: [(s["batch"], s[k]) for s in samples if s.get(k) is not None]
                  for k in keys}
        line_chart(out.with_name(f"{out.stem}-{name}.png"), f"Long run: {ylabel}",
                   "micro-batch", ylabel, series)
    check = env["check"]
    asked = env.get("batches_asked", n)
    title = f"{n:,} micro-batches" + (f" (of {asked:,} asked: stopped at its deadline)"
                                      if n < asked else "")
    lines = [f"# Long run: {title}", "",
             f"{env['finished_at']}; {env['cpus']} cores; trigger {env['trigger_ms']} ms, "
             f"maxOffsetsPerTrigger {env['max_offsets']}, {env['partitions']} partitions, "
             f"{env['wall_s']:,.0f} s ({n / env['wall_s']:.2f} batches/s). Warm-up: the "
             f"first {warmup:.0%} of batches; flat = within {SLACK:.0%}.", "",
             *([f"The query was restarted after batches {env['restarts']} (Spark's Python "
                "worker missed its 10 s connect-back on the loaded machine): worker processes "
                "started afresh there.", ""] if env.get("restarts") else []),
             *table(rows), "",
             f"Exactly once: {check['output_records']:,} output records for "
             f"{check['input_records']:,} input records; {check['duplicates']} duplicates, "
             f"{check['missing']} missing, {check['unexpected']} unexpected; "
             f"{check['open_transactions']} open transactions at the end.", ""]
    lines += [f"![{name}]({out.stem}-{name}.png)" for name in CHARTS]
    out.write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps(
        {"env": env, "verdicts": rows, "samples": samples,
         "batches": {str(k): v for k, v in sorted(batches.items())},
         "commit_s": {str(k): v for k, v in sorted(commits.items())}}, indent=1))
    return all(r["flat"] for r in rows)
