"""The tables of docs/performance.md, rendered from each benchmark's published run.

Each question has one current table: ``benchmarks/<question>/current.json`` holds the run's
date, command, machine, versions, workload and rows; this module renders them between the
page's ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` markers. A new run replaces the
JSON (its figures, from ``bench-results/``) and the old table moves, dated, to that
benchmark's ``RESULTS.md``. ``tests/unit/test_published_results.py`` fails when the page
differs.

    python -m benchmarks.published            # print the tables
    python -m benchmarks.published --write    # rewrite them in docs/performance.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "performance.md"
#: marker name -> the benchmark directory whose current.json fills it
TABLES = {"throughput": "throughput", "latency": "latency", "scale": "scale"}


def render(name: str) -> list[str]:
    run = json.loads((ROOT / "benchmarks" / TABLES[name] / "current.json").read_text())
    cols = run["columns"]
    lines = [f"Measured {run['date']} with `{run['command']}` on {run['machine']}; "
             f"{run['versions']}. {run['workload']}.", "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(row) + " |" for row in run["rows"]]
    return lines


def replaced(text: str) -> str:
    for name in TABLES:
        begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
        head, sep, rest = text.partition(begin)
        assert sep and end in rest, f"{PAGE.name} has no {begin} ... {end}"
        tail = rest.split(end, 1)[1]
        text = head + begin + "\n" + "\n".join(render(name)) + "\n" + end + tail
    return text


def main(argv: list[str]) -> None:
    if "--write" in argv:
        PAGE.write_text(replaced(PAGE.read_text()))
        return
    for name in TABLES:
        print("\n".join(render(name)), end="\n\n")


if __name__ == "__main__":
    main(sys.argv[1:])
