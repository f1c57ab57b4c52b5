"""docs/performance.md's tables are what each benchmark's published run renders."""

from __future__ import annotations

import json

from benchmarks import published


def test_performance_page_is_the_published_runs() -> None:
    page = published.PAGE.read_text()
    assert page == published.replaced(page), (
        "docs/performance.md's tables are stale: python -m benchmarks.published --write")


def test_every_published_run_says_when_where_and_with_what() -> None:
    for name, folder in published.TABLES.items():
        run = json.loads((published.ROOT / "benchmarks" / folder / "current.json").read_text())
        for key in ("date", "command", "machine", "versions", "workload", "columns", "rows"):
            assert run.get(key), f"{folder}/current.json lacks {key}"
        assert all(len(row) == len(run["columns"]) for row in run["rows"]), name
        assert (published.ROOT / "benchmarks" / folder / "RESULTS.md").exists(), folder
