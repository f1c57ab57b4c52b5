"""Scale of one batch: the driver's commit as tasks (64, 256, 1,000) and output partitions grow.

Runs on a 3-node Apache Kafka (the benchmarks' version, :data:`.common.KAFKA_VERSION`;
KRaft, every topic and ``__transaction_state`` replicated 3 times, min.insync.replicas 2).
For each output topic (8 and 64 partitions) and each task count N, a batch is prepared as
Spark's tasks would prepare it: N :class:`TaskWriter`s (on a few threads, as executors run
them side by side) each open a transaction on their own transactional id (``prefix-<task>``:
the ids hash to every ``__transaction_state`` partition, so coordinators sit on all three
nodes), write :data:`RECORDS_PER_PARTITION` records to every output partition and hand it
off. Then :class:`DriverProtocol.commit` runs (decision log on local disk), and its steps
are timed:

- lookup: FindCoordinator for every id (one batched request, v4+);
- liveness: the pre-decision check that every transaction is still live;
- decision: the durable decision written before the first EndTxn;
- endtxn: the EndTxn round;
- confirm: each transaction's COMMIT read back from its partitions (docs/design.md, invariant 9),
  split into its Fetch passes over the partitions (each pass one request per leader, answering
  for every transaction a partition holds) and the per-transaction marker scans it fell back
  to (a partition that stood still, answered an error, or a broker without Kafka's index);
- done + cleanup: marking the decision done, pool bookkeeping;
- markers: after commit() returned, until every output partition's last stable offset
  reaches its high watermark, which is exactly the offset after N COMMIT markers (the
  broker writes markers after EndTxn answered; readers see the batch only then).

Beside each repetition, **the brokers' floor**: another N transactions prepared the same
way and committed with no eoskafka protocol at all (no decision, no liveness check, no
confirmation): the bare EndTxn round of :func:`eos_kafka_source.wire.end_txns`, spread over
the same connections per broker as the driver's, with the coordinators found and the
connections open beforehand (as a user's own producers would have them), then until the
markers landed. No client finishes 1,000 transactions faster than the brokers take to log
1,000 PrepareCommits and write 8,000 markers; what eoskafka adds is its commit minus this.

Also measured per N: InitProducerId of the N ids from the driver (what fencing the id pool
costs at query start) and the tasks' own preparation (not a driver cost).

    python -m benchmarks.scale [--tasks 64,256,1000] [--partitions 8,64] [--reps 3]

Writes ``bench-results/scale.md``, ``.json`` and ``.png`` (commit time against tasks).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa

import eos_kafka_source
from eos_kafka_source.apache_kafka import KafkaCluster
from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.sink.driver import confirming
from eos_kafka_source.sink.driver.fencing import fence_identities
from eos_kafka_source.sink.handoff import TxnHandoff
from eos_kafka_source.wire import (
    KafkaWire,
    ProducerIdentity,
    create_topic,
    end_txns,
    fetch_bounds,
    fetch_metadata,
    find_coordinators,
    leader_of,
    spread,
    txn_outcome,
)
from eos_kafka_source.wire.kept import close_kept

from .common import KAFKA_LABEL, KAFKA_VERSION, unique, value_batches
from .common.charts import line_chart
from .throughput.sink import EosSink

DEFAULT_OUT = Path("bench-results/scale.md")
TARGET_S = 1.0  # 1,000 tasks × 8 partitions
RECORDS_PER_PARTITION = 2
#: Threads preparing the tasks' transactions (executors' cores).
PREP_THREADS = 32
#: Transactions stay open while 1,000 tasks prepare on a loaded machine (minutes).
TXN_TIMEOUT_MS = 900_000
PHASES = ("lookup", "liveness", "decision", "lanes", "endtxn", "confirm", "mark_done",
          "cleanup")


@dataclass
class Cell:
    """One (tasks, partitions) case: per repetition, the commit's steps in seconds."""

    tasks: int
    partitions: int
    #: Connections per broker the driver may use (1: all pipelined on one connection).
    lanes: int = spread.MAX_LANES
    #: Every repetition started with no kept connection: a query's first batch.
    cold: bool = False
    runs: list[dict[str, float]] = field(default_factory=list)
    init_ids_s: float = 0.0
    prep_s: list[float] = field(default_factory=list)
    coordinators: dict[int, int] = field(default_factory=dict)  # node -> ids it coordinates
    loads: list[float] = field(default_factory=list)
    #: Per repetition, the brokers' floor beside it (:func:`floor_commit`): endtxn, markers,
    #: visible (seconds) and the load then.
    floor: list[dict[str, float]] = field(default_factory=list)

    def median(self, key: str) -> float:
        return statistics.median(run.get(key, 0.0) for run in self.runs)

    def floor_runs(self, lanes: int | None = None) -> list[dict[str, float]]:
        """The floor's repetitions over ``lanes`` connections per broker (default: the
        cell's own cap)."""
        want = self.lanes if lanes is None else lanes
        return [run for run in self.floor if run.get("lanes", self.lanes) == want]

    def floor_median(self, key: str, lanes: int | None = None) -> float:
        runs = self.floor_runs(lanes)
        return statistics.median(run.get(key, 0.0) for run in runs) if runs else float("nan")


def load() -> float:
    return os.getloadavg()[0]


class ConfirmProbe:
    """Counts what the confirmation did in a commit: its Fetch passes and the time they took,
    and its marker scans (one per transaction, over every partition). Wraps the two
    functions for the benchmark's process only."""

    def __init__(self) -> None:
        self.passes = 0
        self.fetch_s = 0.0
        self.scans = 0
        self.scan_s = 0.0
        self._saved: list[tuple[object, str, object]] = []

    def __enter__(self) -> ConfirmProbe:
        def timed(module: object, name: str, count: str, seconds: str) -> None:
            real = getattr(module, name)

            def wrapper(*args: object, **kwargs: object) -> object:
                started = time.perf_counter()
                try:
                    return real(*args, **kwargs)
                finally:
                    setattr(self, count, getattr(self, count) + 1)
                    setattr(self, seconds, getattr(self, seconds) +
                            time.perf_counter() - started)

            self._saved.append((module, name, real))
            setattr(module, name, wrapper)

        timed(txn_outcome, "_ask", "passes", "fetch_s")
        timed(confirming, "_from_markers", "scans", "scan_s")
        return self

    def __exit__(self, *_: object) -> None:
        for module, name, real in reversed(self._saved):
            setattr(module, name, real)


def task_batch(task: int, partitions: int) -> pa.RecordBatch:
    """A task's rows: :data:`RECORDS_PER_PARTITION` for every output partition."""
    rows = partitions * RECORDS_PER_PARTITION
    batch = value_batches(rows, rows=rows)[0]
    column = pa.array([(task + i) % partitions for i in range(rows)], pa.int32())
    return batch.append_column("partition", column)


def prepare(sink: EosSink, topic: str, tasks: int, partitions: int) -> list[TxnHandoff]:
    """N open transactions, each over every partition, handed off (executors' work)."""
    local = threading.local()
    wires: list[KafkaWire] = []
    lock = threading.Lock()

    def task(p: int) -> TxnHandoff:
        wire = getattr(local, "wire", None)
        if wire is None:
            wire = local.wire = sink.wire()
            with lock:
                wires.append(wire)
        return sink.task(wire, topic, p, [task_batch(p, partitions)])

    try:
        with ThreadPoolExecutor(PREP_THREADS) as pool:
            return list(pool.map(task, range(tasks)))
    finally:
        for wire in wires:
            wire.close()


def forget_lookups() -> None:
    """What this process's driver and tasks kept (sink/recall.py and wire/known.py; absent
    before 2026-11-26)."""
    try:
        from eos_kafka_source.sink import recall
    except ImportError:
        return
    recall.forget_all()


def await_markers(wire: KafkaWire, leaders: dict[tuple[str, int], int],
                  ends: dict[tuple[str, int], int], timeout_s: float = 120.0) -> None:
    """Until every partition's LSO and high watermark reach ``ends`` (all markers written)."""
    deadline = time.monotonic() + timeout_s
    pending = dict(leaders)
    while pending:
        bounds = fetch_bounds(wire, pending, hints={tp: ends[tp] for tp in pending})
        for tp, b in bounds.items():
            if b.high_watermark > ends[tp]:
                raise AssertionError(f"{tp}: high watermark {b.high_watermark} is past the "
                                     f"expected {ends[tp]}")
            if b.last_stable >= ends[tp]:
                del pending[tp]
        if pending and time.monotonic() > deadline:
            raise TimeoutError(f"markers not landed on {len(pending)} partitions")
        if pending:
            time.sleep(0.01)


def connect_lanes(wire: KafkaWire, coordinators: dict[str, int], timeout_s: float = 30.0
                  ) -> None:
    """Open every connection an EndTxn round over ``coordinators`` spreads over
    (:func:`spread.lanes_for`), before it is timed."""
    nodes = sorted(set(coordinators.values()))
    lanes = spread.lanes_for([(node, None) for node in coordinators.values()])
    deadline = time.monotonic() + timeout_s
    for lane in [wire, *(wire.sibling(k) for k in range(1, lanes))]:
        client = lane.client
        for node in nodes:
            client.maybe_connect(node)
        while not all(client.is_ready(node) for node in nodes):
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not connect to brokers {nodes}")
            client.poll(timeout_ms=20)


def floor_commit(wire: KafkaWire, handoffs: list[TxnHandoff]) -> float:
    """The brokers' floor: ``handoffs`` committed by the bare EndTxn round (no decision, no
    liveness check, no confirmation), its coordinators found and connections open first.
    Returns the round's seconds; every EndTxn must answer NONE."""
    tids = [h.transactional_id for h in handoffs]
    coordinators = find_coordinators(wire, tids)
    connect_lanes(wire, coordinators)
    txns = [(h.transactional_id, ProducerIdentity(h.producer_id, h.epoch)) for h in handoffs]
    started = time.perf_counter()
    outcomes = end_txns(wire, coordinators, txns, True)
    elapsed = time.perf_counter() - started
    failed = [f"{o.transactional_id}: {o.error}" for o in outcomes if not o.ok]
    if failed:
        raise AssertionError(f"the floor's EndTxn round failed for {len(failed)}: "
                             + "; ".join(failed[:5]))
    return elapsed


def run_cell(cfg: ClientConfig, topic: str, tasks: int, partitions: int, reps: int,
             lanes: int = spread.MAX_LANES, *, cold: bool = False, floor: bool = False,
             floor_lanes: tuple[int, ...] = (), profile: Path | None = None) -> Cell:
    """``floor``: each repetition also measures the brokers' floor (:func:`floor_commit`) on
    N more transactions, over the cell's connections per broker and each of
    ``floor_lanes``; ``profile``: the driver's commits' CPU profile (cProfile) there."""
    cell = Cell(tasks, partitions, lanes, cold)
    sink = EosSink(cfg, f"scale{tasks}x{partitions}", TXN_TIMEOUT_MS)
    default_lanes, spread.MAX_LANES = spread.MAX_LANES, lanes
    try:
        with KafkaWire(cfg) as wire:
            info = fetch_metadata(wire, [topic])
            leaders = {(topic, p): leader_of(info, (topic, p)) for p in range(partitions)}
            ids = [sink.ids.for_task(p) for p in range(tasks)]
            where = find_coordinators(wire, ids)
            for node in where.values():
                cell.coordinators[node] = cell.coordinators.get(node, 0) + 1
            started = time.perf_counter()
            fence_identities(wire, ids, TXN_TIMEOUT_MS)
            cell.init_ids_s = time.perf_counter() - started
            for _ in range(reps):
                before = {tp: b.high_watermark for tp, b in fetch_bounds(wire, leaders).items()}
                started = time.perf_counter()
                handoffs = prepare(sink, topic, tasks, partitions)
                cell.prep_s.append(time.perf_counter() - started)
                cell.loads.append(load())
                if cold:  # the driver's commit worker starts with no connection, and
                    close_kept()  # knows no coordinator (the tasks ran elsewhere)
                    forget_lookups()
                run = timed_commit(sink, wire, leaders, before, handoffs, tasks,
                                   None if profile is None else
                                   profile.with_suffix(f".{len(cell.runs)}.prof"))
                cell.runs.append(run)
                print(f"  {tasks:>5} tasks × {partitions:>2} partitions, ≤ {lanes} connection(s) "
                      f"per broker{', first batch' if cold else ''}: commit "
                      f"{run['commit'] * 1000:7.1f} ms, visible {run['visible'] * 1000:7.1f} ms "
                      f"({', '.join(f'{k} {run.get(k, 0) * 1000:.1f}' for k in PHASES)}; "
                      f"confirm: {run['confirm_passes']} Fetch passes "
                      f"{run['confirm_fetch'] * 1000:.0f} ms, {run['marker_scans']} marker scans "
                      f"{run['marker_scan'] * 1000:.0f} ms; driver CPU "
                      f"{run['cpu'] * 1000:.0f} ms, GC {run['gc'] * 1000:.0f} ms); "
                      f"prepared in {cell.prep_s[-1]:.1f} s, load {cell.loads[-1]:.1f}",
                      flush=True)
                sink.driver.prepare(new_run=False)
                for cap in (lanes, *floor_lanes) if floor else ():
                    spread.MAX_LANES = cap
                    try:
                        cell.floor.append(run_floor(sink, wire, topic, tasks, partitions,
                                                    leaders))
                    finally:
                        spread.MAX_LANES = lanes
    finally:
        spread.MAX_LANES = default_lanes
        sink.close()
    return cell


def timed_commit(sink: EosSink, wire: KafkaWire, leaders: dict[tuple[str, int], int],
                 before: dict[tuple[str, int], int], handoffs: list[TxnHandoff], tasks: int,
                 profile: Path | None) -> dict[str, float]:
    """One driver commit of ``handoffs``, timed phase by phase, then until its markers
    landed; ``profile``: where its CPU profile (cProfile, the calling thread's CPU time) is
    written. Also the process's CPU seconds in the commit and the garbage collector's."""
    profiler = cProfile.Profile(time.thread_time) if profile is not None else None
    gc_s = [0.0, 0.0]  # total, start of the collection under way

    def collecting(phase: str, _: object) -> None:
        if phase == "start":
            gc_s[1] = time.perf_counter()
        else:
            gc_s[0] += time.perf_counter() - gc_s[1]

    gc.callbacks.append(collecting)
    cpu = time.process_time()
    started = time.perf_counter()
    try:
        with ConfirmProbe() as probe:
            if profiler is not None:
                profiler.enable()
            sink.driver.commit(sink.batch_id, handoffs, tasks)
            if profiler is not None:
                profiler.disable()
    finally:
        gc.callbacks.remove(collecting)
    committed = time.perf_counter()
    cpu = time.process_time() - cpu
    await_markers(wire, leaders, {tp: end + tasks * (RECORDS_PER_PARTITION + 1)
                                  for tp, end in before.items()})
    visible = time.perf_counter()
    if profiler is not None and profile is not None:
        profiler.dump_stats(profile)
    sink.batch_id += 1
    run = dict(sink.driver.last_phases)
    run.update(commit=committed - started, markers=visible - committed,
               visible=visible - started, cpu=cpu, gc=gc_s[0], confirm_passes=probe.passes,
               confirm_fetch=probe.fetch_s, marker_scans=probe.scans, marker_scan=probe.scan_s)
    return run


def run_floor(sink: EosSink, wire: KafkaWire, topic: str, tasks: int, partitions: int,
              leaders: dict[tuple[str, int], int]) -> dict[str, float]:
    """One repetition of the brokers' floor: N more transactions prepared as the tasks
    prepare them, committed by :func:`floor_commit`, then until their markers landed."""
    before = {tp: b.high_watermark for tp, b in fetch_bounds(wire, leaders).items()}
    handoffs = prepare(sink, topic, tasks, partitions)
    now = load()
    endtxn = floor_commit(wire, handoffs)
    committed = time.perf_counter()
    await_markers(wire, leaders, {tp: end + tasks * (RECORDS_PER_PARTITION + 1)
                                  for tp, end in before.items()})
    markers = time.perf_counter() - committed
    print(f"  {tasks:>5} tasks × {partitions:>2} partitions, the brokers' floor (bare EndTxn "
          f"round, ≤ {spread.MAX_LANES} connections per broker): EndTxn "
          f"{endtxn * 1000:7.1f} ms, markers land {markers * 1000:7.1f} ms, "
          f"visible {(endtxn + markers) * 1000:7.1f} ms; load {now:.1f}", flush=True)
    return {"endtxn": endtxn, "markers": markers, "visible": endtxn + markers, "load": now,
            "lanes": spread.MAX_LANES}


def table(cells: list[Cell]) -> list[str]:
    ms = lambda s: f"{s * 1000:.0f}"  # noqa: E731
    lines = ["| tasks × partitions | connections per broker | markers | lookup | liveness | "
             "decision | EndTxn | confirm (Fetch passes, marker scans) | done + cleanup | "
             "**commit** | markers land | **visible** | InitProducerId ×N | tasks prepare | "
             "ids per node |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in sorted(cells, key=lambda c: (c.partitions, c.tasks, c.lanes, c.cold)):
        commit = c.median("commit")
        target = (" ✅" if commit <= TARGET_S else " ❌") if (c.tasks, c.partitions) == (
            1000, 8) and c.lanes > 1 else ""
        nodes = "/".join(str(c.coordinators.get(n, 0)) for n in sorted(c.coordinators))
        first = " (first batch)" if c.cold else ""
        lines.append(
            f"| {c.tasks:,} × {c.partitions}{first} | {f'≤ {c.lanes}' if c.lanes > 1 else 1} | "
            f"{c.tasks * c.partitions:,} | "
            f"{ms(c.median('lookup'))} | {ms(c.median('liveness'))} | "
            f"{ms(c.median('decision'))} | {ms(c.median('endtxn'))} | "
            f"{ms(c.median('confirm'))} ({c.median('confirm_passes'):.0f}, "
            f"{c.median('marker_scans'):.0f}) | "
            f"{ms(c.median('mark_done') + c.median('cleanup'))} | **{ms(commit)}**{target} | "
            f"{ms(c.median('markers'))} | **{ms(c.median('visible'))}** | "
            f"{ms(c.init_ids_s)} | {statistics.median(c.prep_s):.1f} s | {nodes} |")
        for cap in sorted({int(f.get("lanes", c.lanes)) for f in c.floor}):
            lines.append(
                f"| {c.tasks:,} × {c.partitions}: the brokers' floor (bare EndTxn round, "
                f"{len(c.floor_runs(cap))} repetitions) | ≤ {cap} | "
                f"{c.tasks * c.partitions:,} | – | – | – | {ms(c.floor_median('endtxn', cap))} "
                f"| – | – | **{ms(c.floor_median('endtxn', cap))}** | "
                f"{ms(c.floor_median('markers', cap))} | "
                f"**{ms(c.floor_median('visible', cap))}** | – | – | – |")
    return lines


def save(out: Path, cells: list[Cell], env: dict[str, object]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# Scale of one batch: the driver's commit on a 3-node Kafka", "",
             *(f"- {k}: {v}" for k, v in env.items()), "",
             "Medians in ms (task preparation in s). markers = COMMIT markers the batch "
             "writes (tasks × partitions); visible = commit() start until every partition's "
             f"LSO passed the last marker. Target: 1,000 × 8 committed in ≤ {TARGET_S:.0f} s.",
             "", *table(cells), ""]
    out.write_text("\n".join(lines))
    out.with_suffix(".json").write_text(json.dumps(
        {"env": env, "cells": [asdict(c) for c in cells]}, indent=1))
    series: dict[str, list[tuple[float, float]]] = {}
    for c in cells:
        if c.lanes == 1:
            series.setdefault(f"commit, {c.partitions} partitions, one connection per broker "
                              "(before)", []).append((c.tasks, c.median("commit") * 1000))
            continue
        series.setdefault(f"commit, {c.partitions} partitions", []).append(
            (c.tasks, c.median("commit") * 1000))
        series.setdefault(f"visible, {c.partitions} partitions", []).append(
            (c.tasks, c.median("visible") * 1000))
    line_chart(out.with_suffix(".png"), f"Driver commit of one batch, 3-node {KAFKA_LABEL}",
               "tasks (one transaction each, over every partition)", "ms (median)", series,
               logx=True)


def render(paths: list[Path], out: Path) -> None:
    """Write one table and chart from earlier runs' JSON: a later run's cell replaces an
    earlier one's for the same tasks, partitions and connection cap."""
    cells: dict[tuple[int, int, int, bool], Cell] = {}
    env: dict[str, object] = {}
    for n, path in enumerate(paths, 1):
        data = json.loads(path.read_text())
        env.update({f"run {n}, {k}": v for k, v in data["env"].items()})
        for raw in data["cells"]:
            cell = Cell(**raw)
            cell.coordinators = {int(k): v for k, v in cell.coordinators.items()}
            cells[(cell.tasks, cell.partitions, cell.lanes, cell.cold)] = cell
    save(out, list(cells.values()), env)
    print("\n".join(table(list(cells.values()))))


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="64,256,1000")
    parser.add_argument("--partitions", default="8,64")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--lanes", default="",
                        help="comma-separated connection caps per broker to run every cell "
                             "with (exploring; default: the driver's own)")
    parser.add_argument("--per-lane", type=int, default=0,
                        help="requests per connection before another is opened (exploring)")
    parser.add_argument("--before", default="",
                        help="task counts also measured with one connection per broker (the "
                             "driver's single-connection baseline), on the first partition count")
    parser.add_argument("--big-reps", type=int, default=3,
                        help="repetitions of the 1,000-task cells (their preparation is long)")
    parser.add_argument("--first-batch", action="store_true",
                        help="also run every cell with each repetition starting from no kept "
                             "connection (a query's first batch: the driver opens its "
                             "connections in that commit)")
    parser.add_argument("--floor", action="store_true",
                        help="beside every repetition of the warm cells, the brokers' floor: "
                             "as many more transactions committed by the bare EndTxn round")
    parser.add_argument("--floor-lanes", default="",
                        help="comma-separated connection caps per broker the floor is also "
                             "measured with, on the warm cells (is the driver's cap the "
                             "brokers' best?)")
    parser.add_argument("--profile", type=Path, default=None,
                        help="write cProfile stats (the calling thread's CPU time) of every "
                             "driver commit to PATH.<rep>.prof (a later cell's overwrite an "
                             "earlier one's)")
    parser.add_argument("--nodes", type=int, default=3,
                        help="Kafka nodes (3 for published runs; 1 for a quick check)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--render", default="",
                        help="comma-separated JSON results to merge into --out; runs nothing")
    args = parser.parse_args(argv)
    if args.render:
        render([Path(p) for p in args.render.split(",")], args.out)
        return 0
    task_counts = [int(t) for t in args.tasks.split(",")]
    partition_counts = [int(p) for p in args.partitions.split(",")]
    env: dict[str, object] = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python -m benchmarks.scale " + " ".join(
            sys.argv[1:] if argv is None else argv),
        "broker": f"{KAFKA_LABEL}, 3 nodes (KRaft, combined roles), every topic and "
                  "__transaction_state (10 partitions) replicated 3×, min.insync.replicas 2, "
                  "all on this machine" if args.nodes == 3 else
                  f"{KAFKA_LABEL}, {args.nodes} node(s) (a quick check, not for publishing)",
        "cores": os.cpu_count(),
        "repetitions": f"{args.reps} (1,000 tasks: {min(args.reps, args.big_reps)})",
        "records": f"{RECORDS_PER_PARTITION} × 100 B per task per partition",
        "uptime at start": uptime(),
        "code": str(Path(eos_kafka_source.__file__).parent),
    }
    cells = []
    with KafkaCluster(nodes=args.nodes, version=KAFKA_VERSION) as kafka:
        cfg = ClientConfig.from_options({"kafka.bootstrap.servers": kafka.bootstrap_servers})
        with KafkaWire(cfg) as wire:
            fetch_metadata(wire, [])
            topics = {}
            for partitions in partition_counts:
                topics[partitions] = unique(f"scale{partitions}")
                create_topic(wire, topics[partitions], partitions,
                             replication=min(3, args.nodes))
        before = [int(t) for t in args.before.split(",") if t]
        caps = [int(n) for n in args.lanes.split(",") if n] or [spread.MAX_LANES]
        if args.per_lane:
            spread.REQUESTS_PER_LANE = args.per_lane
        # A fresh cluster's first commits are slow (JIT, __transaction_state loading): warm
        # it up with an unrecorded batch of 64 tasks.
        run_cell(cfg, topics[partition_counts[0]], 64, partition_counts[0], 1)
        # The target's cell (1,000 × 8) first, so a run cut short still has it.
        for partitions in partition_counts:
            for tasks in sorted(task_counts, key=lambda t: (partitions != 8 or t != 1000, t)):
                reps = min(args.reps, args.big_reps) if tasks >= 1000 else args.reps
                runs = [(cap, reps) for cap in caps]
                if partitions == partition_counts[0] and tasks in before:
                    runs.append((1, reps))
                for cap, n in runs:
                    for cold in (False, True) if args.first_batch else (False,):
                        cells.append(run_cell(cfg, topics[partitions], tasks, partitions, n,
                                              lanes=cap, cold=cold,
                                              floor=args.floor,
                                              floor_lanes=() if cold else tuple(
                                                  int(n) for n in args.floor_lanes.split(",")
                                                  if n),
                                              profile=args.profile))
                        save(args.out, cells, {**env, "uptime now": uptime()})
    env["uptime at end"] = uptime()
    save(args.out, cells, env)
    print("\n".join(table(cells)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
