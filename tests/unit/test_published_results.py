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
