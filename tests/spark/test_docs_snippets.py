"""The snippets README.md, docs/walkthrough.md and docs/scale.md show, run as written.

The text comes from the pages themselves (tests/doc_blocks.py); only the broker address,
topic names, the transactional id and checkpoint paths are replaced, so two runs in one
session do not meet. Output is judged from the raw log (tests/oracle.py).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests import doc_blocks as docs
from tests.kafka_helpers import TxnWriter, create_topic
from tests.oracle import assert_no_open_transactions, await_markers, committed_values
from tests.spark.test_source_stream import process_all

pytestmark = pytest.mark.spark


def _text(page: str, first_line: str, swaps: dict[str, str]) -> str:
    text = docs.block(page, first_line).text
    for old, new in swaps.items():
        assert old in text, f"{page}: the snippet no longer contains {old!r}"
        text = text.replace(old, new)
    return text


def _run(page: str, first_line: str, swaps: dict[str, str], namespace: dict) -> None:
    code = _text(page, first_line, swaps)
    exec(compile(code, f"{page}: {first_line}", "exec"), namespace)  # noqa: S102 - our docs


@pytest.mark.smoke
def test_readme_read_and_write(spark, bootstrap: str, unique: str, tmp_path: Path) -> None:
    """README's "30 seconds" read, register-and-read and write blocks, in that order."""
    events, clean, out = f"{unique}-events", f"{unique}-events-clean", f"{unique}-out"
    for topic in (events, clean, out):
        create_topic(bootstrap, topic, partitions=2)
    with TxnWriter(bootstrap, f"{unique}-w") as w:
        w.committed(events, [b"a", b"b", b"c"])
        w.aborted(events, [b"never"])
    swaps = {'"localhost:9092"': repr(bootstrap), '"events"': repr(events)}
    ns: dict = {"spark": spark}
    _run("README.md", 'df = (spark.readStream.format("eoskafka")', swaps, ns)
    assert ns["df"].isStreaming
    _run("README.md", "import eos_kafka_source", swaps, ns)
    assert sorted(r.value for r in ns["batch"].collect()) == [b"a", b"b", b"c"]
    _run("README.md", 'query = (df.selectExpr("key", "upper(CAST(value AS STRING)) AS value")',
         {'"localhost:9092"': repr(bootstrap), '"events-clean"': repr(clean),
          '"/checkpoints/events-clean"': repr(str(tmp_path / "chk")), '"out"': repr(out),
          '"/checkpoints/out-writes"': repr(str(tmp_path / "writes"))}, ns)
    query = ns["query"]
    try:
        process_all(query)
    finally:
        query.stop()
    await_markers(bootstrap, clean)
    assert sorted(committed_values(bootstrap, clean)) == [b"A", b"B", b"C"]
    assert sorted(committed_values(bootstrap, out)) == [b"v1", b"v2"]
    for topic in (clean, out):
        assert_no_open_transactions(bootstrap, topic)


def test_walkthrough(spark, bootstrap: str, unique: str, tmp_path: Path) -> None:
    """docs/walkthrough.md's cells 1-4 in one go, then its terminal commands (step 5)."""
    orders, clean = f"{unique}-orders", f"{unique}-orders-clean"
    chk = str(tmp_path / "chk")
    common = {'"localhost:9092"': repr(bootstrap), '"orders-clean"': repr(clean),
              '"orders"': repr(orders)}
    ns: dict = {}
    _run("docs/walkthrough.md", "# 1. a session whose Python workers can import eoskafka",
         {**common, '"nb-feeder"': repr(f"{unique}-feeder"),
          '"/tmp/chk/orders-clean"': repr(chk)}, ns)
    ns["p"].close()
    assert ns["spark"] is spark  # getOrCreate() found the session's own
    assert ns["orders"].count() == 100
    await_markers(bootstrap, clean)
    assert sorted(committed_values(bootstrap, clean)) == sorted(
        f'{{"ID": {i}}}'.encode() for i in range(100))
    assert_no_open_transactions(bootstrap, clean)

    shell = _text("docs/walkthrough.md", "# 5. inspect from a terminal",
                  {"localhost:9092": bootstrap, "/tmp/chk/orders-clean": chk,
                   "orders-clean": clean})
    commands = [shlex.split(line, comments=True) for line in shell.splitlines()]
    commands = [c for c in commands if c]
    assert [c[:2] for c in commands] == [["eoskafka", "txns"], ["eoskafka", "audit"],
                                         ["eoskafka", "lag"]]
    for argv in commands:
        done = subprocess.run([sys.executable, "-m", "eos_kafka_source.cli", *argv[1:]],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{' '.join(argv)}:\n{done.stdout}\n{done.stderr}"


def test_scale_routing_recipe(spark) -> None:
    """docs/scale.md's routing: every output partition's rows in exactly one task (what cuts
    the markers), though not task i for partition i; the page's "34 tasks had rows" for
    P = 50 is what Spark's hash gives."""
    from pyspark.sql import functions as F

    df = spark.range(20_000).selectExpr("CAST(id AS STRING) AS key", "'v' AS value")
    namespace: dict = {"df": df}
    _run("docs/scale.md", "from pyspark.sql import functions as F", {}, namespace)
    pairs = (namespace["aligned"].select(F.spark_partition_id().alias("task"), "partition")
             .distinct().collect())
    tasks: dict[int, set[int]] = {}
    for row in pairs:
        tasks.setdefault(row.partition, set()).add(row.task)
    assert sorted(tasks) == list(range(namespace["P"]))
    assert all(len(t) == 1 for t in tasks.values()), tasks
    used = {t for ts in tasks.values() for t in ts}
    assert len(used) == 34 and any(tasks[p] != {p} for p in tasks)
