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
    """``python -m benchmarks.published latency RUN.json`` reads report.py's JSON."""
    def run(packing: str, waves: int, eos: tuple[float, float], spark: tuple[float, float]
            ) -> dict[str, object]:
        row = {"trigger": "default", "rate": 2000, "load": "8.2–8.5"}
        return {"env": {"when": "2026-11-27 18:32 UTC", "job": "Kafka -> Spark -> Kafka",
                        "steps": "40 s per rate", "Spark": "pyspark 4.3.0, local[2]",
                        "connector": "spark-sql-kafka 4.2.0", "broker": "Apache Kafka 4.4.0",
                        "cores": 2, "eoskafka maxPartitions": packing,
                        "eoskafka waves": waves},
                "rows": [{**row, "variant": "built-in at-least-once", "p50": spark[0],
                          "p99": spark[1], "interval_ms": 555.5},
                         {**row, "variant": "eoskafka exactly-once", "p50": eos[0],
                          "p99": eos[1], "interval_ms": 1005.5, "source_tasks": 2.0}]}

    table = published.latency_run([run("not set (the default: the 2 task slots)", 1,
                                       (1099.0, 2021.0), (805.0, 2200.0)),
                                   run("4", 2, (3405.0, 5701.0), (907.0, 2329.0))])
    assert table["columns"] == published.LATENCY_COLUMNS
    assert table["rows"] == [
        ["`maxPartitions` not set (the default: the 2 task slots)", "2 (1 wave)",
         "1,099 / 2,021 ms", "805 / 2,200 ms", "1,006 ms"],
        ["`maxPartitions=4`", "2 (2 waves)", "3,405 / 5,701 ms", "907 / 2,329 ms",
         "1,006 ms"]]
    assert "2,000 records/s, default trigger" in table["workload"]
    assert table["machine"] == "2 cores, load 8.2 to 8.5 (1 min)"


def test_formats_table_from_the_benchmarks_own_json() -> None:
    """``python -m benchmarks.published formats RUN.json`` reads endtoend.py's JSON."""
    row = ["read: batch -> noop, every field", "8k rec/s (8–8k)", "28k rec/s (27–29k)",
           "3.46×", "yes"]
    run = {"env": {"when": "2026-11-27 19:12 UTC", "runs": 3, "cores": 2,
                   "records": "20,000 Avro records (10 fields) in 4 partitions",
                   "Spark": "pyspark 4.3.0, local[2]",
                   "connector": "spark-sql-kafka-0-10_2.13 + spark-avro_2.13 4.2.0",
                   "broker": "Apache Kafka 4.4.0, 1 node (KRaft)",
                   "registry": "Apicurio Registry 3.3.3"},
           "columns": ["measure", "Spark's", "eoskafka", "ratio", "≥ 1×"], "rows": [row],
           "measures": [{"name": "read", "records": 20000, "loads": [8.3, 5.25],
                         "times": {}, "target": ""}]}
    table = published.formats_run(run)
    assert table["rows"] == [row] and table["columns"] == run["columns"]
    assert table["machine"] == "2 cores, load 5.2 to 8.3 (1 min) during the runs"
    assert table["versions"].endswith("Apicurio Registry 3.3.3")
    assert table["command"] == "make bench-formats"
    assert "medians of 3 interleaved runs" in table["workload"]
