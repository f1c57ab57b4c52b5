"""A real driver for the crash-point sweep (tests/broker/test_crash_points.py).

Plays Spark around the sink's own Spark-facing writer (``EosKafkaStreamWriter``): it
writes ``<checkpoint>/offsets/N`` before a batch (as Spark's offset log does), builds the
writer as the planning worker does (its ``prepare``), runs the tasks through
``writer.write`` (with the task context Spark would give), then ``commit``, or ``abort``
when ``commit`` raised, and writes ``commits/N``. Run as a process
(``python -m tests.crash_driver crash ...``) it arms one fault point at the moment its
scenario reaches the step under test, so ``<point>=kill`` SIGKILLs it there: a real crash,
no abort hook, no ``finally``. The test process then restarts the query in process with
:class:`Query` and checks the outcome from the outside.

``python -m tests.crash_driver report RESULTS.jsonl [OUT.md]`` prints the sweep's matrix.

Scenarios (which step each arms; batch 0 always runs cleanly first):

- ``commit``: batch 1 planned and written, the fault armed for its ``commit``;
- ``restart``: the query restarts before batch 1: its planning (a new run: roll forward,
  fence, clear the abort mark) is armed;
- ``abort``: batch 1's commit raises before its decision; Spark's ``abort`` is armed;
- ``lost``: batch 1 is decided, then a zombie fences task 1's transaction before its
  EndTxn; armed from that commit on (recovered there, or at the restart that follows).
- ``lost_big``: ``lost`` with batches of 3 records and at most 4 records a recovery
  transaction: the copy takes two recovery transactions (``recover.after_part``).
- ``hanging``: batch 1's task 0 transaction also holds :func:`stray_rows` on a partition its
  coordinator never heard of (:func:`strand`), stamped long ago: once the coordinator
  commits the rest, that partition hangs as find-hanging judges, and the commit's
  confirmation ends it with eoskafka's own ABORT (``hanging.after_abort``), then copies it
  (``recover.*``). The topic has :data:`HANGING_PARTITIONS` partitions, and partition
  verification must be off (:func:`partition_verification`, set by the caller).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from eos_kafka_source import faults
from eos_kafka_source.sink.task.context import WriterContext

SCHEMA = StructType([StructField("value", BinaryType())])
#: A query that names its topic per row (no ``topic`` option): its prefix is claimed at its
#: first commit (scenario ``claim``).
SCHEMA_TOPIC = StructType([StructField("topic", StringType()),
                           StructField("value", BinaryType())])
TASKS = 2
ROWS = 10
#: Rows each batch reads from the (imaginary) input: its end offset is (batch + 1) * this.
INPUT_PER_BATCH = TASKS * ROWS
SCENARIOS = ("commit", "restart", "abort", "lost", "lost_big", "claim", "hanging")
#: ``hanging``: partitions of the topic (one more than two tasks can write to).
HANGING_PARTITIONS = 3
#: ``hanging``: the stray records' timestamps are this old, so the producer's last write
#: there (Kafka's lastTimestamp) is older than the maximum transaction timeout at once.
IDLE_MS = 20 * 60_000
#: ``lost_big``: task 1's rows in batches of 3 over both partitions, copied in recovery
#: transactions of at most 4 records (eos_kafka_source/sink/driver/copy_stream.py).
BIG_BATCH_RECORDS = 3
BIG_LIMITS = "txn_records=4"
#: ``EOSKAFKA_SWEEP=full`` (``make sweep``): the whole matrix, and the Spark driver killed at
#: every commit step (tests/spark/test_sink_recovery.py); otherwise CI's fast half.
FULL_SWEEP = os.environ.get("EOSKAFKA_SWEEP") == "full"


def rows(topic: str, tag: str, batch: int, task: int) -> list[bytes]:
    """Task ``task``'s rows in ``batch``; each names its topic (one Java consumer run reads
    every topic of the sweep and tells them apart by it)."""
    return [f"{topic}/{tag}b{batch}t{task}-{i}".encode() for i in range(ROWS)]


def batch_rows(topic: str, tag: str, batch: int) -> Counter[bytes]:
    return Counter(v for p in range(TASKS) for v in rows(topic, tag, batch, p))


def stray_rows(topic: str) -> list[bytes]:
    """The rows scenario ``hanging`` strands on a partition (batch 1, task 0's)."""
    return [f"{topic}/stray-{i}".encode() for i in range(3)]


def partition_verification(bootstrap: str, on: bool) -> None:
    """Kafka's ``transaction.partition.verification.enable`` as a cluster-wide dynamic
    setting (on: back to the default). Off, a transactional Produce to a partition the
    coordinator never heard of is taken: what a hanging transaction needs."""
    from kafka.protocol.admin.configs import IncrementalAlterConfigsRequest

    from eos_kafka_source.client.config import ClientConfig
    from eos_kafka_source.wire import KafkaWire

    with KafkaWire(ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap})) as wire:
        version = int(wire.client.api_version(IncrementalAlterConfigsRequest, max_version=1))
        Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
        config = Resource.AlterableConfig(name="transaction.partition.verification.enable",
                                          config_operation=1 if on else 0,
                                          value=None if on else "false")
        answer = wire.request_any(IncrementalAlterConfigsRequest[version](
            resources=[Resource(resource_type=4, resource_name="", configs=[config])],
            validate_only=False), "IncrementalAlterConfigs verification")
        assert [r.error_code for r in answer.responses] == [0], answer


def strand(query: Query, handoff: Any, values: list[bytes] | None = None) -> Any:
    """``handoff``'s transaction with ``values`` (default :func:`stray_rows`) appended to a
    partition it did not write (no AddPartitionsToTxn: its coordinator never hears of it),
    stamped :data:`IDLE_MS` ago; the returned hand-off lists that partition too."""
    import dataclasses

    from eos_kafka_source.client.config import ClientConfig
    from eos_kafka_source.records import encode_batch
    from eos_kafka_source.wire import KafkaWire, fetch_metadata, produce_errors, produce_request
    from eos_kafka_source.wire.txn import produce_offsets

    values = values or stray_rows(query.topic)
    batch = encode_batch([None] * len(values), values, int(time.time() * 1000) - IDLE_MS,
                         producer_id=handoff.producer_id, producer_epoch=handoff.epoch,
                         base_sequence=0, transactional=True)
    config = ClientConfig.from_options({"kafka.bootstrap.servers": query.bootstrap})
    deadline = time.monotonic() + 60
    with KafkaWire(config) as wire:
        partitions = set(fetch_metadata(wire, [query.topic])[query.topic].leaders)
        tp = (query.topic, min(partitions - {p for _, p, _ in handoff.partitions}))
        while True:  # the dynamic setting reaches every broker within moments
            request = produce_request(wire, handoff.transactional_id, {tp: batch}, 30000)
            leader = fetch_metadata(wire, [tp[0]])[tp[0]].leaders[tp[1]]
            answer = wire.request(leader, request, "Produce (stray)")
            if not produce_errors(answer):
                break
            assert time.monotonic() < deadline, produce_errors(answer)
            time.sleep(0.2)
        first = produce_offsets(answer)[tp]
    return dataclasses.replace(
        handoff, partitions=(*handoff.partitions, (*tp, len(values))),
        first_offsets=(*handoff.first_offsets, (*tp, first)),
        records=handoff.records + len(values))


@dataclass
class Query:
    """One streaming query into ``topic``, as Spark would drive the sink's hooks."""

    bootstrap: str
    topic: str
    prefix: str
    checkpoint: Path
    lineage: str = "query-0"
    #: Rows name their topic in a ``topic`` column instead of the ``topic`` option.
    topic_column: bool = False
    #: Rows keyed by their value less the topic: Kafka's partitioner spreads each task's
    #: transaction over every partition, the same way for every topic (the explorer's: a
    #: recovery then copies several partitions).
    keyed: bool = False
    #: Whatever Spark's hooks raised, in order (the restart's refusals are checked from it).
    errors: list[BaseException] = field(default_factory=list)
    #: ``producer.batchRecords`` (None: the default).
    batch_records: int | None = None

    def __post_init__(self) -> None:
        self.checkpoint = Path(self.checkpoint)
        (self.checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
        (self.checkpoint / "commits").mkdir(exist_ok=True)
        meta = self.checkpoint / "metadata"
        if not meta.exists():
            meta.write_text(json.dumps({"id": self.lineage}) + "\n")

    def options(self) -> dict[str, str]:
        topic = {} if self.topic_column else {"topic": self.topic}
        if self.batch_records is not None:
            topic["producer.batchRecords"] = str(self.batch_records)
        return {"kafka.bootstrap.servers": self.bootstrap, **topic,
                "checkpointLocation": str(self.checkpoint),
                "transactionalIdPrefix": self.prefix}

    # -- Spark's offset log ----------------------------------------------------------------

    def write_offsets(self, batch: int, *, shift: int = 0) -> None:
        """``offsets/<batch>`` as Spark writes it before running the batch (``shift``: a
        rewound checkpoint plans the batch id over another range)."""
        end = (batch + 1) * INPUT_PER_BATCH + shift
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": int(time.time() * 1000),
                "conf": {}}
        (self.checkpoint / "offsets" / str(batch)).write_text(
            f"v1\n{json.dumps(meta)}\n{json.dumps({'input': {'0': end}})}")

    def rewind(self, batch: int) -> None:
        """What an operator does to reprocess: delete ``offsets/N`` and ``commits/N``."""
        for kind in ("offsets", "commits"):
            (self.checkpoint / kind / str(batch)).unlink(missing_ok=True)

    # -- the hooks ---------------------------------------------------------------------------

    def plan(self, batch: int, *, new_run: bool, shift: int = 0) -> Any:
        """The planning worker's ``streamWriter()`` for ``batch`` (its ``prepare``)."""
        import eos_kafka_source.sink.spark_writer as sw

        if not (self.checkpoint / "offsets" / str(batch)).exists():
            self.write_offsets(batch, shift=shift)
        if new_run:
            sw._PREPARED_IN_PROCESS.clear()  # a new planning worker remembers no run
        schema = SCHEMA_TOPIC if self.topic_column else SCHEMA
        if self.keyed:
            schema = StructType([StructField("key", BinaryType()), *schema.fields])
        return sw.EosKafkaStreamWriter(self.options(), schema)

    def task(self, writer: Any, batch: int, task: int, values: list[bytes]) -> Any:
        """``writer.write`` as task ``task`` of ``batch`` (the TaskContext Spark gives)."""
        import eos_kafka_source.sink.spark_writer as sw

        real = sw._task_context
        sw._task_context = lambda: WriterContext(task_partition=task, batch_id=batch,
                                                 lineage=self.lineage)
        try:
            columns = {"topic": [self.topic] * len(values)} if self.topic_column else {}
            if self.keyed:
                columns["key"] = [v.split(b"/", 1)[-1] for v in values]
            return writer.write(iter([pa.RecordBatch.from_pydict({**columns, "value": values})]))
        finally:
            sw._task_context = real

    def tasks(self, writer: Any, batch: int, tag: str) -> list[Any]:
        return [self.task(writer, batch, p, rows(self.topic, tag, batch, p))
                for p in range(TASKS)]

    def commit(self, writer: Any, handoffs: list[Any], batch: int) -> None:
        """Spark's commit; when it raises, Spark's abort with the same messages, then the
        query fails with the commit's error."""
        try:
            writer.commit(handoffs, batch)
        except Exception as exc:
            self.errors.append(exc)
            try:
                writer.abort(handoffs, batch)
            except Exception as second:  # noqa: BLE001 - Spark logs it; the query fails
                self.errors.append(second)
            raise
        (self.checkpoint / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')

    def run_batch(self, batch: int, tag: str, *, new_run: bool = False,
                  shift: int = 0) -> Counter[bytes]:
        """Plan, write and commit ``batch``; returns the rows it wrote."""
        writer = self.plan(batch, new_run=new_run, shift=shift)
        self.commit(writer, self.tasks(writer, batch, tag), batch)
        return batch_rows(self.topic, tag, batch)


# -- the crashing process ----------------------------------------------------------------------


def arm(spec: str) -> None:
    """Arm fault points in this process from now on (a spec of eos_kafka_source.faults)."""
    os.environ.pop(faults.ENV_FILE, None)
    os.environ[faults.ENV] = spec


def _nth_kill() -> None:
    """``kill#N``: SIGKILL at the Nth passage of the point (the store's later writes)."""
    real, seen = faults._act, Counter()

    def act(action: str, name: str) -> None:
        if not action.startswith("kill#"):
            return real(action, name)
        seen[name] += 1
        if seen[name] == int(action.split("#", 1)[1]):
            os.kill(os.getpid(), signal.SIGKILL)
        return None

    faults._act = act


def crash(query: Query, scenario: str, fault: str, gate: Path) -> None:
    """Run ``scenario`` with ``fault`` armed at its step; returns only if it never fired."""
    _nth_kill()
    if scenario == "claim":  # a topic column: the first commit claims the prefix
        arm(fault)
        query.run_batch(0, "q", new_run=True)
        return
    query.run_batch(0, "q", new_run=True)
    if scenario == "restart":
        arm(fault)
        query.run_batch(1, "q", new_run=True)
    elif scenario == "commit":
        writer = query.plan(1, new_run=False)
        handoffs = query.tasks(writer, 1, "q")
        arm(fault)
        query.commit(writer, handoffs, 1)
    elif scenario == "abort":
        writer = query.plan(1, new_run=False)
        handoffs = query.tasks(writer, 1, "q")
        arm("commit.before_decision=raise")
        try:
            writer.commit(handoffs, 1)
        except faults.InjectedFault:
            arm(fault)
            writer.abort(handoffs, 1)
    elif scenario in ("lost", "lost_big"):
        if scenario == "lost_big":
            from eos_kafka_source.sink.driver.copy_stream import LIMITS_ENV

            os.environ[LIMITS_ENV] = BIG_LIMITS
        lose_task_1(query, 1, gate, fault)
        query.run_batch(1, "q", new_run=True)  # the restart that finds the loss
    elif scenario == "hanging":
        writer = query.plan(1, new_run=False)
        handoffs = query.tasks(writer, 1, "q")
        handoffs[0] = strand(query, handoffs[0])
        arm(fault)
        query.commit(writer, handoffs, 1)
    else:
        raise ValueError(f"unknown scenario {scenario!r}")


def lose_task_1(query: Query, batch: int, gate: Path, fault: str, *, tag: str = "q",
                writer: Any = None) -> None:
    """``batch`` is decided, then a zombie re-initialises task 1's id before its EndTxn:
    Kafka aborts that transaction. ``fault`` is armed from the commit on: a driver that
    recovers the loss at once (copying it from the log) meets its recovery points there;
    one that reports it (commit raises, Spark aborts) meets them at the next restart."""
    writer = writer or query.plan(batch, new_run=False)
    handoffs = query.tasks(writer, batch, tag)
    arm(f"commit.after_decision=block:{gate},{fault}")

    def committing() -> None:
        try:
            query.commit(writer, handoffs, batch)
        except Exception:  # noqa: BLE001 - in query.errors; Spark's abort has run
            pass

    thread = threading.Thread(target=committing, daemon=True)
    thread.start()
    _await(gate.with_suffix(".started"))
    arm(fault)
    # The zombie: its InitProducerId on task 1's id aborts that task's decided transaction.
    query.task(writer, batch, 1, [f"{query.topic}/zombie".encode()])
    gate.with_suffix(".release").touch()
    thread.join(120)
    assert not thread.is_alive(), "the commit did not end"


def _await(path: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.01)


# -- the sweep's matrix ------------------------------------------------------------------------


def record(path: str | None, **cell: Any) -> None:
    """Append one cell of the matrix to ``path`` (JSON lines), if the sweep asked for it."""
    if path:
        with open(path, "a") as out:
            out.write(json.dumps(cell) + "\n")


def report(results: Path, out: Path | None) -> str:
    """The matrix (point x action) as a Markdown table, from the cells' JSON lines."""
    text = results.read_text() if results.exists() else ""
    cells = [json.loads(line) for line in text.splitlines() if line.strip()]
    lines = ["| point | scenario | action | verdict | seconds | expected |",
             "|---|---|---|---|---:|---|"]
    for c in cells:
        lines.append(f"| {c['point']} | {c['scenario']} | {c['action']} | {c['verdict']} | "
                     f"{c['seconds']:.1f} | {c.get('expected') or 'pass'} |")
    failed = [c for c in cells if not c["verdict"].startswith(("once", "refused"))]
    unexpected = [c for c in failed if not c.get("expected")]
    summary = (f"{len(cells)} cells: {len(cells) - len(failed)} held, {len(failed)} failed "
               f"({len(unexpected)} not expected to)")
    text = "\n".join(["# Crash-point sweep (make sweep)", "",
                      "Each cell: a driver SIGKILLed at the point, the operator action in the "
                      "pause, a restart; verdict from Kafka (tests/broker/test_crash_points.py).",
                      "", summary, "", *lines, ""])
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.crash_driver")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("crash", help="run a scenario with one fault armed at its step")
    for name in ("bootstrap", "topic", "prefix", "checkpoint", "lineage", "gate"):
        run.add_argument(f"--{name}", required=True)
    run.add_argument("--scenario", choices=SCENARIOS, required=True)
    run.add_argument("--fault", required=True, help="e.g. commit.after_decision=kill")
    rep = sub.add_parser("report", help="print the sweep's matrix")
    rep.add_argument("results", type=Path)
    rep.add_argument("out", type=Path, nargs="?")
    args = parser.parse_args(argv)
    if args.command == "report":
        print(report(args.results, args.out))
        return 0
    query = Query(args.bootstrap, args.topic, args.prefix, Path(args.checkpoint), args.lineage,
                  topic_column=args.scenario == "claim",
                  batch_records=BIG_BATCH_RECORDS if args.scenario == "lost_big" else None)
    crash(query, args.scenario, args.fault, Path(args.gate))
    print(f"crash_driver: {args.fault} never fired in scenario {args.scenario}", flush=True)
    return 3


def run_crash(query: Query, scenario: str, fault: str, gate: Path,
              timeout_s: float = 240) -> str:
    """Run the crashing driver as a process; returns its output's tail, or fails if it was
    not SIGKILLed (the point was never reached: renamed, or the wrong scenario)."""
    import subprocess

    root = Path(__file__).parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop(faults.ENV_FILE, None)
    env.pop(faults.ENV, None)
    done = subprocess.run(
        [sys.executable, "-m", "tests.crash_driver", "crash", "--bootstrap", query.bootstrap,
         "--topic", query.topic, "--prefix", query.prefix, "--checkpoint",
         str(query.checkpoint), "--lineage", query.lineage, "--gate", str(gate),
         "--scenario", scenario, "--fault", fault],
        env=env, cwd=root, capture_output=True, timeout=timeout_s)
    tail = (done.stdout + done.stderr).decode(errors="replace")[-3000:]
    assert done.returncode == -signal.SIGKILL, (
        f"{fault} was not reached in scenario {scenario} (exit {done.returncode}): {tail}")
    return tail


if __name__ == "__main__":
    sys.exit(main())
