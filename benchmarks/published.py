"""The tables of docs/performance.md and docs/availability.md, rendered from each benchmark's
published run.

Each question has one current table: ``benchmarks/<question>/current.json`` holds the run's
date, command, machine, versions, workload and rows; this module renders them between the
page's ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` markers. A new run replaces the
JSON (its figures, from ``bench-results/``) and the old table moves, dated, to that
benchmark's ``RESULTS.md``. ``tests/unit/test_published_results.py`` fails when the page
differs.

    python -m benchmarks.published            # print the tables
    python -m benchmarks.published --write    # rewrite them in docs/performance.md (and
                                              # availability.md's, longrun.md's)
    python -m benchmarks.published latency bench-results/latency.json [more runs' .json]
        # benchmarks/latency/current.json from ``make bench-latency`` runs' own JSON
    python -m benchmarks.published formats bench-results/formats.json
        # benchmarks/formats/current.json from a ``make bench-formats`` run's JSON
    python -m benchmarks.published scale bench-results/scale.json
        # benchmarks/scale/current.json from a ``benchmarks.scale --floor`` run's JSON
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "performance.md"
#: marker name -> the benchmark directory whose current.json fills it
TABLES = {"throughput": "throughput", "latency": "latency", "scale": "scale",
          "formats": "formats", "availability": "availability", "longrun": "longrun"}
#: marker name -> the page it is on, when not docs/performance.md
ELSEWHERE = {"availability": ROOT / "docs" / "availability.md",
             "longrun": ROOT / "docs" / "longrun.md"}


def pages() -> list[Path]:
    return [PAGE, *sorted(set(ELSEWHERE.values()))]


def render(name: str) -> list[str]:
    run = json.loads((ROOT / "benchmarks" / TABLES[name] / "current.json").read_text())
    cols = run["columns"]
    lines = [f"Measured {run['date']} with `{run['command']}` on {run['machine']}; "
             f"{run['versions']}. {run['workload']}.", "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(row) + " |" for row in run["rows"]]
    return lines


def replaced(text: str, page: Path = PAGE) -> str:
    """``text`` (of ``page``) with each of its tables rendered again."""
    for name in (n for n in TABLES if ELSEWHERE.get(n, PAGE) == page):
        begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
        head, sep, rest = text.partition(begin)
        assert sep and end in rest, f"{page.name} has no {begin} ... {end}"
        tail = rest.split(end, 1)[1]
        text = head + begin + "\n" + "\n".join(render(name)) + "\n" + end + tail
    return text


LATENCY_COLUMNS = ["trigger", "Spark's `kafka` p50 / p99", "eoskafka exactly-once p50 / p99",
                   "Spark's source + eoskafka's sink p50 / p99",
                   "Python floor p50 / p99 (modelled)", "target (eoskafka p99)"]
#: the variants of a latency run's rows (benchmarks/latency/bench.py)
CONNECTOR = "built-in at-least-once"
EXACTLY = "eoskafka exactly-once"
MIXED = "built-in source + eoskafka exactly-once sink"
FLOOR = "Python floor: 2 partitions (one wave)"


def _ms(value: float) -> str:
    return f"{value:,.0f}"


def _vs(row: dict[str, Any] | None, spark: dict[str, Any], p50: str = "p50",
        p99: str = "p99") -> str:
    if row is None or row.get(p99) != row.get(p99):
        return "not run"
    return (f"{_ms(row[p50])} / {_ms(row[p99])} ms ({row[p99] / spark['p99']:.2f}×)"
            if spark.get("p99") else f"{_ms(row[p50])} / {_ms(row[p99])} ms")


def _target(trigger: str, eos: dict[str, Any], spark: dict[str, Any],
            floor: dict[str, Any] | None) -> str:
    from .latency.report import TARGET_RATIOS

    want = TARGET_RATIOS.get(trigger)
    if want is None or not spark.get("p99"):
        return ""
    got = eos["p99"] / spark["p99"]
    said = f"≤ {want:g}×: {'met' if got <= want else 'missed'}"
    if got > want and floor is not None and floor.get("p99") == floor.get("p99"):
        floor_ratio = floor["p99"] / spark["p99"]
        if floor_ratio > want:
            said += f" (the floor alone is {floor_ratio:.2f}×)"
    return said


def latency_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The published latency table from ``make bench-latency`` runs' JSON
    (``benchmarks/latency/report.py``): a row per run and (trigger, rate), eoskafka
    exactly-once and the mixed pipeline beside Spark's connector in the same run, with each
    one's p99 over the connector's, and the floor of Spark's Python data source (no Kafka:
    the latency its batches alone give, ``modelled_p50_p99``)."""
    rows: list[list[str]] = []
    loads: list[float] = []
    points = {(r["trigger"], r["rate"]) for run in runs for r in run["rows"]}
    for run in runs:
        by = {(r["trigger"], r["rate"], r["variant"]): r for r in run["rows"]}
        for trigger, rate in sorted({(t, r) for t, r, _ in by},
                                    key=lambda p: (p[0] != "default", p)):
            eos = by.get((trigger, rate, EXACTLY))
            spark = by.get((trigger, rate, CONNECTOR))
            if eos is None or spark is None:
                continue
            floor = by.get((trigger, rate, FLOOR))
            modelled = None
            if floor is not None and floor.get("modelled_p50_p99"):
                p50, p99 = floor["modelled_p50_p99"][:2]
                modelled = {"p50": p50, "p99": p99}
            label = trigger if len(points) == len({p[0] for p in points}) \
                else f"{trigger}, {rate:,}/s"
            rows.append([label, f"{_ms(spark['p50'])} / {_ms(spark['p99'])} ms",
                         _vs(eos, spark), _vs(by.get((trigger, rate, MIXED)), spark),
                         _vs(modelled, spark), _target(trigger, eos, spark, modelled)])
            loads += [float(x) for r in (eos, spark)
                      for x in re.findall(r"\d+(?:\.\d+)?", str(r.get("load", "")))]
    first = runs[0]["env"]
    workload = first["job"]
    rates = {rate for _, rate in points}
    if len(rates) == 1:
        workload += f", {next(iter(rates)):,} records/s"
    packing = str(first.get("eoskafka maxPartitions", "?"))
    return {
        "question": "end-to-end latency with the defaults",
        "date": ", ".join(sorted({str(run["env"]["when"]) for run in runs})),
        "command": first.get("command", "make bench-latency"),
        "machine": f"{first['cores']} cores, load {min(loads):g} to {max(loads):g} (1 min)"
                   if loads else f"{first['cores']} cores",
        "versions": f"{first['Spark']}; Spark's connector {first['connector']}; "
                    f"{first['broker']}",
        "workload": f"{workload}; eoskafka's maxPartitions {packing}; {first['steps']}; "
                    "produce-to-visible time (read_committed); the variants take turns in "
                    "one run; ratios are p99 over Spark's connector's; the floor is a Python "
                    "source into a Python sink with no Kafka (benchmarks/latency/floor.py), "
                    "its latency modelled from its batches (benchmarks/latency/phases.py)",
        "columns": LATENCY_COLUMNS,
        "rows": rows,
    }


def formats_run(run: dict[str, Any]) -> dict[str, Any]:
    """The published Avro table from a ``make bench-formats`` run's JSON
    (``benchmarks/formats/endtoend.py``): its rows as they are, its env as the header."""
    env = run["env"]
    loads = [x for m in run["measures"] for x in m["loads"]]
    machine = f"{env['cores']} cores"
    if loads:
        machine += f", load {min(loads):.1f} to {max(loads):.1f} (1 min) during the runs"
    return {
        "question": "Avro end to end beside Spark's connector with spark-avro",
        "date": env["when"],
        "command": "make bench-formats",
        "machine": machine,
        "versions": f"{env['Spark']}; Spark's {env['connector']}; {env['broker']}; "
                    f"{env['registry']}",
        "workload": f"{env['records']}; medians of {env['runs']} interleaved runs, "
                    "min–max in brackets",
        "columns": run["columns"],
        "rows": run["rows"],
    }


SCALE_COLUMNS = ["1,000 × 8", "lookup", "liveness check", "decision", "EndTxn round",
                 "confirm", "done + cleanup", "commit", "markers landed after the commit",
                 "visible from the commit's start", "load (1 min)"]


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _loads(values: list[float]) -> str:
    return f"{min(values):.1f}–{max(values):.1f}" if values else "?"


def scale_run(run: dict[str, Any], tasks: int = 1000, partitions: int = 8) -> dict[str, Any]:
    """The published scale table from a ``benchmarks.scale --floor`` run's JSON: for
    ``tasks`` × ``partitions``, eoskafka's commit phase by phase (a later batch and a
    query's first), the brokers' floor in the same run (the same number of transactions
    committed by the bare EndTxn round: no decision, no liveness check, no confirmation),
    and what eoskafka adds to it."""
    cells = [c for c in run["cells"] if (c["tasks"], c["partitions"]) == (tasks, partitions)
             and c["lanes"] > 1]
    warm = next(c for c in cells if not c["cold"])
    first = next((c for c in cells if c["cold"]), None)
    every_floor = [f for c in cells for f in c.get("floor", [])]
    floor = [f for f in every_floor if f.get("lanes", warm["lanes"]) == warm["lanes"]]

    def med(cell: dict[str, Any], key: str) -> float:
        """Milliseconds (a count for ``*_passes`` and ``*_scans``)."""
        scale = 1 if key.endswith(("_passes", "_scans")) else 1000
        return _median([r.get(key, 0.0) for r in cell["runs"]]) * scale

    def eos_row(label: str, cell: dict[str, Any]) -> list[str]:
        return [label, _ms(med(cell, "lookup")), _ms(med(cell, "liveness")),
                _ms(med(cell, "decision")), _ms(med(cell, "endtxn")),
                f"{_ms(med(cell, 'confirm'))} ({med(cell, 'confirm_passes'):.0f} "
                f"passes, {med(cell, 'marker_scans'):.0f} scans)",
                _ms(med(cell, "mark_done") + med(cell, "cleanup")),
                f"**{_ms(med(cell, 'commit'))}**", _ms(med(cell, "markers")),
                f"**{_ms(med(cell, 'visible'))}**", _loads(cell["loads"])]

    def floor_row(label: str, runs: list[dict[str, float]]) -> list[str]:
        endtxn = _ms(_median([f["endtxn"] for f in runs]) * 1000)
        return [label, "–", "–", "–", endtxn, "–", "–", f"**{endtxn}**",
                _ms(_median([f["markers"] for f in runs]) * 1000),
                f"**{_ms(_median([f['visible'] for f in runs]) * 1000)}**",
                _loads([f["load"] for f in runs])]

    rows = [eos_row("eoskafka, a later batch (connections kept)", warm)]
    if first is not None:
        rows.append(eos_row("eoskafka, a query's first batch", first))
    if floor:
        rows.append(floor_row("the brokers' floor: the bare EndTxn round, no eoskafka "
                              f"protocol, ≤ {warm['lanes']} connections per broker as "
                              f"eoskafka ({len(floor)} repetitions)", floor))
    for cap in sorted({f["lanes"] for f in every_floor if f not in floor}):
        other = [f for f in every_floor if f.get("lanes") == cap]
        rows.append(floor_row(f"the brokers' floor over ≤ {cap} connections per broker "
                              f"({len(other)} repetitions)", other))
    if floor:
        f_endtxn = _median([f["endtxn"] for f in floor]) * 1000
        f_markers = _median([f["markers"] for f in floor]) * 1000
        f_visible = _median([f["visible"] for f in floor]) * 1000
        own = med(warm, "visible") - f_visible
        rows.append(["eoskafka over the floor (a later batch)",
                     _ms(med(warm, "lookup")), _ms(med(warm, "liveness")),
                     _ms(med(warm, "decision")), f"{med(warm, 'endtxn') - f_endtxn:+,.0f}",
                     f"{med(warm, 'confirm') - f_markers:+,.0f} (against the floor's markers)",
                     _ms(med(warm, "mark_done") + med(warm, "cleanup")), "", "",
                     f"**{own:+,.0f}** ({med(warm, 'visible') / f_visible:.2f}×)", ""])
    env = run["env"]
    reps = len(warm["runs"])
    return {
        "question": "the driver's commit at scale, beside the brokers' floor",
        "date": env["when"],
        "command": env.get("command", "python -m benchmarks.scale --floor"),
        "machine": f"{env['cores']} cores, load {_loads(warm['loads'] + (first or warm)['loads'])} "
                   "(1 min) at the commits; uptime at start: "
                   f"{env.get('uptime at start', '?')}; at end: {env.get('uptime at end', '?')}",
        "versions": env["broker"],
        "workload": f"{tasks:,} tasks, each one transaction over all {partitions} output "
                    f"partitions, {env['records']} ({tasks * partitions:,} COMMIT "
                    f"markers); ms, medians of {reps} repetitions each: the driver's commit "
                    "phases and the whole commit (its start to its return), then how long "
                    "after it returned the last marker was readable, and visible, the two "
                    "together (medians each, so they add up only roughly). The floor: after "
                    "each repetition, as many transactions again, prepared the same way, "
                    "committed by the bare EndTxn round of the same wire (coordinators known "
                    "and connections open beforehand, spread over the same connections per "
                    "broker), then until every partition's last stable offset reached its "
                    f"high watermark ({len(floor)} repetitions)",
        "columns": SCALE_COLUMNS,
        "rows": rows,
    }


def main(argv: list[str]) -> None:
    one_run = {"formats": formats_run, "scale": scale_run}
    if argv[:1] and argv[0] in one_run:
        out = ROOT / "benchmarks" / argv[0] / "current.json"
        table = one_run[argv[0]](json.loads(Path(argv[1]).read_text()))
        out.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n")
        print(f"written: {out}; now python -m benchmarks.published --write")
        return
    if argv[:1] == ["latency"]:
        runs = [json.loads(Path(a).read_text()) for a in argv[1:]]
        out = ROOT / "benchmarks" / "latency" / "current.json"
        out.write_text(json.dumps(latency_run(runs), indent=1, ensure_ascii=False) + "\n")
        print(f"written: {out}; now python -m benchmarks.published --write")
        return
    if "--write" in argv:
        for page in pages():
            page.write_text(replaced(page.read_text(), page))
        return
    for name in TABLES:
        print("\n".join(render(name)), end="\n\n")


if __name__ == "__main__":
    main(sys.argv[1:])
