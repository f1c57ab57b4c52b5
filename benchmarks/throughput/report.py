"""Printing and saving results: a markdown table (``latest.md``), the raw rows (``.json``)."""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..common import Row, Sizes

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


#: A section of free markdown after the row tables: (title, lines).
Section = tuple[str, list[str]]


def measured(row: Row) -> str:
    """A row's figure as the summary shows it: rate (and ratio), or latency."""
    if not row.show_rate:
        return f"{row.seconds * 1000:.0f} ms"
    text = f"{_rate(row.rate)} records/s"
    if row.ratio is not None:
        text += f", {row.ratio:.2f} × {row.reference} ({_rate(row.reference_rate)})"
    return text


def summary(rows: list[Row], extra: list[tuple[str, str, str, bool | None]]) -> list[str]:
    """Every targeted measure in one table: measure, target, measured, result.

    ``extra`` adds (measure, target, measured, ok) lines for measures that are not rows.
    """
    lines = ["| measure | target | measured | result |", "|---|---|---|---|"]
    items = [(r.measure, r.target, measured(r), r.ok) for r in rows if r.target] + extra
    for name, target, value, ok in items:
        verdict = {True: "pass", False: "**miss**", None: "—"}[ok]
        lines.append(f"| {name} | {target} | {value} | {verdict} |")
    return lines


def markdown(rows: list[Row], env: dict[str, Any], seconds: float,
             sections: list[Section] | None = None) -> str:
    lines = [
        "# eoskafka benchmark",
        "",
        f"{env['date']} · Python {env['python']} · {env['cpus']} CPUs · load average at start "
        f"{env['load_average']}, at end {env.get('load_average_end')} · pyspark "
        f"{env['pyspark']} · whole run {seconds:.0f} s · sizes {env['sizes']}",
        "",
        "Median of the timed runs (after one warm-up, except Spark in --quick); references are "
        "measured in the same run on the same data, interleaved with the measure. 100-byte "
        "values, no keys, unless a row says otherwise. The broker is the embedded Tansu (in "
        "memory) on the same machine, so it shares the CPUs; each section starts a fresh "
        "broker.",
        "",
    ]
    if env.get("note"):
        lines += [f"**{env['note']}.**", ""]
    sections = sections or []
    for title, body in sections[:1]:  # the summary comes first
        lines += [f"## {title}", "", *body, ""]
    for section in dict.fromkeys(r.section for r in rows):
        lines += [f"## {section}", "", "| " + " | ".join(COLUMNS) + " |",
                  "|" + "---|" * len(COLUMNS)]
        lines += ["| " + " | ".join(_cells(r)) + " |" for r in rows if r.section == section]
        lines.append("")
    for title, body in sections[1:]:
        lines += [f"## {title}", "", *body, ""]
    return "\n".join(lines)


def to_json(rows: list[Row], env: dict[str, Any], seconds: float,
            data: dict[str, Any] | None = None) -> str:
    payload = {
        "environment": env,
        "seconds": round(seconds, 1),
        **(data or {}),
        "rows": [{**asdict(r), "records_per_s": round(r.rate, 1),
                  "ratio": None if r.ratio is None else round(r.ratio, 4)} for r in rows],
    }
    return json.dumps(payload, indent=2, ensure_ascii=False)


def print_row(row: Row) -> None:
    ratio = "" if row.ratio is None else f"  ratio {row.ratio:.2f} vs {row.reference}"
    verdict = "" if row.ok is None else f"  [{'pass' if row.ok else 'MISS'}: {row.target}]"
    print(f"  {row.measure}: {row.records:,} records in {row.seconds:.3f} s = "
          f"{_rate(row.rate)} records/s{ratio}{verdict}", flush=True)


def save(out: Path, rows: list[Row], env: dict[str, Any], seconds: float,
         sections: list[Section] | None = None, data: dict[str, Any] | None = None) -> None:
    """Write the markdown report and the JSON beside it; ``sections[0]`` (the summary)
    goes before the row tables, the others after."""
    out.parent.mkdir(parents=True, exist_ok=True)
    env = {**env, "load_average_end": [round(x, 2) for x in os.getloadavg()]}
    text = markdown(rows, env, seconds, sections)
    out.write_text(text + "\n")
    out.with_suffix(".json").write_text(to_json(rows, env, seconds, data) + "\n")
    print()
    print(text)
    print(f"written: {out} and {out.with_suffix('.json')}")
