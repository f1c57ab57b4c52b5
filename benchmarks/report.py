"""Printing and saving results: a markdown table (``latest.md``), the raw rows (``.json``)."""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .common import Row, Sizes

COLUMNS = ("measure", "records", "seconds", "records/s", "reference (same run)",
           "reference records/s", "ratio", "target", "result")


def _rate(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    return f"{value / 1e3:.0f}k"


def _cells(row: Row) -> list[str]:
    verdict = {True: "pass", False: "**miss**", None: "—"}[row.ok]
    ratio = row.ratio
    measure = row.measure + (f" ({row.note})" if row.note else "")
    return [
        measure,
        f"{row.records:,}",
        f"{row.seconds:.3f}" if row.seconds >= 0.1 else f"{row.seconds * 1000:.1f} ms",
        _rate(row.rate) if row.show_rate else "—",
        row.reference or "—",
        _rate(row.reference_rate),
        "—" if ratio is None else f"{ratio:.2f}",
        row.target or "—",
        verdict if row.target else "—",
    ]


def environment(sizes: Sizes) -> dict[str, Any]:
    import pyarrow
    import pyspark

    info: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "pyspark": pyspark.__version__,
        "pyarrow": pyarrow.__version__,
        "sizes": asdict(sizes),
    }
    try:
        import confluent_kafka

        info["confluent_kafka"] = confluent_kafka.version()[0]
    except ImportError:
        info["confluent_kafka"] = None
    return info


def markdown(rows: list[Row], env: dict[str, Any], seconds: float) -> str:
    lines = [
        "# eoskafka benchmark",
        "",
        f"{env['date']} · Python {env['python']} · {env['cpus']} CPUs · load average at start "
        f"{env['load_average']}, at end {env.get('load_average_end')} · pyspark "
        f"{env['pyspark']} · whole run {seconds:.0f} s · sizes {env['sizes']}",
        "",
        "Median of the timed runs (after one warm-up, except Spark in --quick); references are "
        "measured in the same run on the same data, interleaved with the measure. 100-byte "
        "values, no keys. The broker is the embedded Tansu (in memory) on the same machine, so "
        "it shares the CPUs.",
        "",
    ]
    for section in dict.fromkeys(r.section for r in rows):
        lines += [f"## {section}", "", "| " + " | ".join(COLUMNS) + " |",
                  "|" + "---|" * len(COLUMNS)]
        lines += ["| " + " | ".join(_cells(r)) + " |" for r in rows if r.section == section]
        lines.append("")
    return "\n".join(lines)


def to_json(rows: list[Row], env: dict[str, Any], seconds: float) -> str:
    payload = {
        "environment": env,
        "seconds": round(seconds, 1),
        "rows": [{**asdict(r), "records_per_s": round(r.rate, 1),
                  "ratio": None if r.ratio is None else round(r.ratio, 4)} for r in rows],
    }
    return json.dumps(payload, indent=2, ensure_ascii=False)


def print_row(row: Row) -> None:
    ratio = "" if row.ratio is None else f"  ratio {row.ratio:.2f} vs {row.reference}"
    verdict = "" if row.ok is None else f"  [{'pass' if row.ok else 'MISS'}: {row.target}]"
    print(f"  {row.measure}: {row.records:,} records in {row.seconds:.3f} s = "
          f"{_rate(row.rate)} records/s{ratio}{verdict}", flush=True)


def save(out: Path, rows: list[Row], env: dict[str, Any], seconds: float) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    env = {**env, "load_average_end": [round(x, 2) for x in os.getloadavg()]}
    text = markdown(rows, env, seconds)
    out.write_text(text + "\n")
    out.with_suffix(".json").write_text(to_json(rows, env, seconds) + "\n")
    print()
    print(text)
    print(f"written: {out} and {out.with_suffix('.json')}")
