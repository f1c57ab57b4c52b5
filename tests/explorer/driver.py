"""The explorer's crashing driver: one batch of a sequence in a process of its own, built
like the sweep's (tests/crash_driver.py: the sink's own Spark-facing writer, no Spark), with
a fault point armed from its planning on, so ``<point>=kill`` SIGKILLs it there. A point
it never meets lets the batch run to its end; what the batch raised is printed.

Paths: ``commit``; ``abort`` (the commit raises before its decision, Spark's abort runs);
``lost`` (the batch is decided, then a zombie fences task 1's transaction before its
EndTxn; armed from the commit on: its zombie needs the tasks' transactions open);
``hanging`` (task 0 writes its rows unkeyed, one partition, but for its last three, which
its producer appends to another partition its coordinator never hears of, stamped long
ago: the commit's confirmation finds that partition hanging and ends it with eoskafka's own
ABORT, then copies it; partition verification must be off, as the world sets it).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from eos_kafka_source import faults
from tests.crash_driver import ROWS, Query, _nth_kill, arm, lose_task_1, rows, strand

PATHS = ("commit", "abort", "lost", "hanging")
#: ``hanging``: task 0's rows stranded on a partition of their own.
STRANDED = 3
#: Exit status of a batch that raised (its errors printed, one ``raised`` line each).
RAISED = 4


def one_batch(query: Query, fault: str, gate: Path, batch: int, tag: str, new_run: bool,
              path: str) -> None:
    """``batch`` (``offsets/<batch>`` written by the caller), its tasks writing ``tag``'s
    rows, then its ``path``, with ``fault`` armed."""
    if path == "lost":
        writer = query.plan(batch, new_run=new_run)
        lose_task_1(query, batch, gate, fault, tag=tag, writer=writer)
        return
    if path == "hanging":
        writer = query.plan(batch, new_run=new_run)
        own = rows(query.topic, tag, batch, 0)
        query.keyed = False  # one Arrow batch, no key: one sticky partition
        first = query.task(writer, batch, 0, own[:ROWS - STRANDED])
        query.keyed = True
        handoffs = [strand(query, first, own[ROWS - STRANDED:]),
                    query.task(writer, batch, 1, rows(query.topic, tag, batch, 1))]
        arm(fault)
        query.commit(writer, handoffs, batch)
        return
    arm(fault)
    writer = query.plan(batch, new_run=new_run)
    handoffs = query.tasks(writer, batch, tag)
    if path == "commit":
        query.commit(writer, handoffs, batch)
        return
    arm(f"commit.before_decision=raise,{fault}")
    try:
        writer.commit(handoffs, batch)
    except faults.InjectedFault:
        arm(fault)
        writer.abort(handoffs, batch)
    raise RuntimeError("commit raised before its decision; Spark's abort ran")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.explorer.driver")
    for name in ("bootstrap", "topic", "prefix", "checkpoint", "lineage", "gate", "tag"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--fault", default="", help="e.g. recover.after_record=kill")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--new-run", action="store_true")
    parser.add_argument("--path", choices=PATHS, default="commit")
    args = parser.parse_args(argv)
    query = Query(args.bootstrap, args.topic, args.prefix, Path(args.checkpoint),
                  args.lineage, keyed=True)
    _nth_kill()
    try:
        one_batch(query, args.fault, Path(args.gate), args.batch, args.tag, args.new_run,
                  args.path)
    except Exception as exc:  # noqa: BLE001 - the explorer reads what the batch raised
        query.errors.append(exc)
    for exc in query.errors:
        print(f"explorer driver: raised {type(exc).__name__}: {exc}", flush=True)
    return RAISED if query.errors else 0


def run(query: Query, fault: str, gate: Path, *, batch: int, tag: str, new_run: bool,
        path: str, timeout_s: float = 240) -> tuple[int, list[str], str]:
    """Run one batch in a driver process: its exit status (``-SIGKILL``: killed at the
    point), what it raised, and its output's tail."""
    import subprocess

    root = Path(__file__).parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop(faults.ENV_FILE, None)
    env.pop(faults.ENV, None)
    done = subprocess.run(
        [sys.executable, "-m", "tests.explorer.driver", "--bootstrap", query.bootstrap,
         "--topic", query.topic, "--prefix", query.prefix, "--checkpoint",
         str(query.checkpoint), "--lineage", query.lineage, "--gate", str(gate),
         "--tag", tag, "--fault", fault, "--batch", str(batch), "--path", path,
         *(["--new-run"] if new_run else [])],
        env=env, cwd=root, capture_output=True, timeout=timeout_s)
    out = done.stdout.decode(errors="replace")
    raised = [line.split("raised ", 1)[1] for line in out.splitlines()
              if line.startswith("explorer driver: raised ")]
    return done.returncode, raised, (out + done.stderr.decode(errors="replace"))[-3000:]


if __name__ == "__main__":
    sys.exit(main())
