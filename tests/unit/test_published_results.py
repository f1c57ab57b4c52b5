"""docs/performance.md's tables are what each benchmark's published run renders."""

from __future__ import annotations

import json

from benchmarks import published


def test_performance_page_is_the_published_runs() -> None:
    page = published.PAGE.read_text()
    assert page == published.replaced(page), (
        "docs/performance.md's tables are stale: python -m benchmarks.published --write")


def test_other_pages_are_their_published_runs() -> None:
    for page in published.pages():
        text = page.read_text()
        assert text == published.replaced(text, page), (
            f"{page.name}'s tables are stale: python -m benchmarks.published --write")


def test_every_published_run_says_when_where_and_with_what() -> None:
    for name, folder in published.TABLES.items():
        run = json.loads((published.ROOT / "benchmarks" / folder / "current.json").read_text())
        for key in ("date", "command", "machine", "versions", "workload", "columns", "rows"):
            assert run.get(key), f"{folder}/current.json lacks {key}"
        assert all(len(row) == len(run["columns"]) for row in run["rows"]), name
        assert (published.ROOT / "benchmarks" / folder / "RESULTS.md").exists(), folder


def test_history_pages_link_to_what_exists() -> None:
    """The RESULTS.md histories and CONTRIBUTING.md sit outside docs/: their links too."""
    from tests import doc_blocks as docs

    root = docs.ROOT
    pages = [root / "CONTRIBUTING.md", root / "tests" / "chaos" / "RESULTS.md",
             *sorted(root.glob("benchmarks/*/RESULTS.md"))]
    assert len(pages) >= 6
    broken = []
    for page in pages:
        for n, target in docs.links(page):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists() or (anchor and dest.suffix == ".md"
                                     and anchor not in docs.anchors(dest)):
                broken.append(f"{page.relative_to(root)}:{n}: {target}")
    assert not broken, broken


def test_latency_table_from_the_benchmarks_own_json() -> None:
    """``python -m benchmarks.published latency RUN.json`` reads report.py's JSON: a row per
    trigger, each variant's p99 over the connector's, the floor's modelled latency, and the
    target with the floor that prevents it."""
    def row(trigger: str, variant: str, p50: float, p99: float, **more: object
            ) -> dict[str, object]:
        return {"trigger": trigger, "rate": 2000, "load": "8.2–8.5", "variant": variant,
                "p50": p50, "p99": p99, **more}

    env = {"when": "2026-11-28 20:40 UTC", "job": "Kafka -> Spark -> Kafka",
           "steps": "40 s per rate", "Spark": "pyspark 4.3.0, local[2]",
           "connector": "spark-sql-kafka 4.2.0", "broker": "Apache Kafka 4.4.0",
           "cores": 2, "eoskafka maxPartitions": "not set", "eoskafka waves": 1,
           "command": "python -m benchmarks.latency --triggers default,1s --publish"}
    nan = float("nan")
    table = published.latency_run([{"env": env, "rows": [
        row("default", published.CONNECTOR, 200.0, 400.0),
        row("default", published.EXACTLY, 500.0, 900.0),
        row("default", published.MIXED, 450.0, 800.0),
        row("default", published.FLOOR, nan, nan, modelled_p50_p99=[330.0, 640.0]),
        row("1 s", published.CONNECTOR, 600.0, 1200.0),
        row("1 s", published.EXACTLY, 650.0, 1100.0)]}])
    assert table["columns"] == published.LATENCY_COLUMNS
    assert table["rows"] == [
        ["default", "200 / 400 ms", "500 / 900 ms (2.25×)", "450 / 800 ms (2.00×)",
         "330 / 640 ms (1.60×)", "≤ 1.5×: missed (the floor alone is 1.60×)"],
        ["1 s", "600 / 1,200 ms", "650 / 1,100 ms (0.92×)", "not run", "not run",
         "≤ 1×: met"]]
    assert table["command"] == env["command"]
    assert "2,000 records/s" in table["workload"]
    assert table["machine"] == "2 cores, load 8.2 to 8.5 (1 min)"


def test_scale_table_shows_the_commit_beside_the_brokers_floor() -> None:
    """``python -m benchmarks.published scale RUN.json`` reads benchmarks/scale.py's JSON:
    eoskafka's 1,000 × 8 commit phase by phase, warm and first, the brokers' floor from the
    same run (its repetitions pooled), and what eoskafka adds over it."""
    def cell(cold: bool, visible: float, floor: list[dict[str, float]]) -> dict[str, object]:
        run = {"lookup": 0.03 if cold else 0.0, "liveness": 0.02, "decision": 0.04,
               "endtxn": 1.0, "confirm": 1.5, "mark_done": 0.002, "cleanup": 0.001,
               "commit": visible - 0.01, "markers": 0.01, "visible": visible,
               "confirm_passes": 12, "marker_scans": 0}
        return {"tasks": 1000, "partitions": 8, "lanes": 16, "cold": cold,
                "runs": [run, run, run], "loads": [3.0, 4.5], "floor": floor}

    floor = [{"endtxn": 0.9, "markers": 1.6, "visible": 2.5, "load": 3.5},
             {"endtxn": 1.1, "markers": 1.4, "visible": 2.5, "load": 4.0, "lanes": 16},
             {"endtxn": 1.2, "markers": 1.5, "visible": 2.7, "load": 4.1, "lanes": 48}]
    env = {"when": "2026-11-29 00:10 UTC", "command": "python -m benchmarks.scale --floor",
           "broker": "Apache Kafka 4.4.0, 3 nodes", "cores": 2,
           "records": "2 × 100 B per task per partition",
           "uptime at start": "load average: 0.5", "uptime at end": "load average: 3.0"}
    table = published.scale_run({"env": env, "cells": [
        cell(False, 2.6, floor[:1] + floor[2:]), cell(True, 2.7, floor[1:2]),
        {**cell(False, 9.9, []), "lanes": 1}]})  # one connection per broker: not shown
    assert table["columns"] == published.SCALE_COLUMNS
    assert table["rows"] == [
        ["eoskafka, a later batch (connections kept)", "0", "20", "40", "1,000",
         "1,500 (12 passes, 0 scans)", "3", "**2,590**", "10", "**2,600**", "3.0–4.5"],
        ["eoskafka, a query's first batch", "30", "20", "40", "1,000",
         "1,500 (12 passes, 0 scans)", "3", "**2,690**", "10", "**2,700**", "3.0–4.5"],
        ["the brokers' floor: the bare EndTxn round, no eoskafka protocol, ≤ 16 connections "
         "per broker as eoskafka (2 repetitions)", "–", "–", "–",
         "1,000", "–", "–", "**1,000**", "1,500", "**2,500**", "3.5–4.0"],
        ["the brokers' floor over ≤ 48 connections per broker (1 repetitions)", "–", "–",
         "–", "1,200", "–", "–", "**1,200**", "1,500", "**2,700**", "4.1–4.1"],
        ["eoskafka over the floor (a later batch)", "0", "20", "40", "+0",
         "+0 (against the floor's markers)", "3", "", "", "**+100** (1.04×)", ""]]
    assert all(len(row) == len(table["columns"]) for row in table["rows"])
    assert table["command"] == env["command"] and "(2 repetitions)" in table["workload"]
    assert table["machine"].startswith("2 cores, load 3.0–4.5 (1 min) at the commits")
