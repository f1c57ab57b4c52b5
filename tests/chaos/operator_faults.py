"""Operator actions as chaos kinds ("operator chaos"), on the 3-node Kafka round.

What people do between runs, at random moments, while the pipeline runs:

- ``reset_checkpoint``: stop the query, delete its checkpoint, start a new query with the
  same options from where the old one's output ended (``startingOffsets`` from the old
  checkpoint's last batch that the sink decided); the decision log is kept apart
  (``decisionLogLocation``), which is what made a reset lose rows before.
- ``restart_changed_options``: kill the driver (at a random moment or at a commit step) and
  restart it with ``maxOffsetsPerTrigger`` and ``minPartitions`` changed.
- ``fence_crashed``: kill the driver at a commit step and run ``eoskafka fence --checkpoint``
  on the crashed query before restarting it (it refuses while a decided batch is
  unfinished: that refusal is the expected, loud outcome).
- ``batch_rerun``: beside the stream, a batch ``df.write`` with a fixed prefix fails (a task
  raises on every attempt) and is rerun; its rows must be in its topic exactly once.
- ``ids_expire``: kill the driver after its EndTxns, before the decision is marked done,
  and keep it down past ``transactional.id.expiration.ms`` (short on this cluster).
- ``start_during_outage``: kill a broker, then kill and restart the driver while it is down.
- ``slow_marker``: a commit whose marker is slow: the leader of an output partition paused
  (SIGSTOP) while the driver is held just before its EndTxn, for a few seconds after it
  goes on; the driver must wait for the marker, never abort it itself. On this cluster the
  pause slows EndTxn itself (every node holds the transaction log, replication 3) and the
  marker follows at once, so the hanging judge is not reached here: its own Kafka test
  (tests/broker/test_hanging_late_marker.py) keeps the transaction log off the paused node.

Each action's outcome is counted by kind in the verdict (:func:`operator_rows`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from .kafka_faults import KafkaChaos
from .pipeline import ROOT

OPERATOR_KINDS = ("reset_checkpoint", "restart_changed_options", "fence_crashed",
                  "batch_rerun", "ids_expire", "start_during_outage", "kafka_abort_decided",
                  "rewind_checkpoint", "store_fails", "prefix_change", "slow_marker")
#: The cluster's transactional.id.expiration.ms when ids_expire runs (Kafka's is 7 days).
ID_EXPIRATION_MS = 10_000
BATCH_TOPIC, BATCH_ROWS = "chaos-batch", 200
_EXIT_S = 120.0
#: The driver's WARNING when a late marker's partition is judged not hanging, and waited for.
_JUDGED_WAITING = "not hanging as kafka-transactions.sh find-hanging judges it"


def committed_end_offsets(checkpoint: Path, decided: set[int]) -> str | None:
    """The source offsets the old query's output ends at, as ``startingOffsets`` JSON: the
    end of the last batch Spark committed or the sink decided (a decided batch is finished
    by the next start); None when no batch ran."""
    done = {int(p.name) for p in (checkpoint / "commits").glob("[0-9]*")}
    planned = {int(p.name) for p in (checkpoint / "offsets").glob("[0-9]*")}
    last = max((done | decided) & planned, default=None)
    if last is None:
        return None
    lines = (checkpoint / "offsets" / str(last)).read_text().splitlines()
    return json.dumps(json.loads(lines[2]))  # v1, metadata, then the one source's offsets


class OperatorChaos(KafkaChaos):
    """:class:`KafkaChaos` plus the operator kinds."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.outcomes: Counter[tuple[str, str]] = Counter()
        self.batch_expected: Counter[bytes] = Counter()
        self._batch_runs = 0

    def _note(self, kind: str, outcome: str) -> None:
        self.outcomes[(kind, outcome)] += 1

    def _save_config(self) -> None:
        self.pipeline.config_path.write_text(json.dumps(self.cfg, indent=1))

    def _halt(self) -> None:
        """Stop the query for good (the operator's ``query.stop()``) and let the driver exit."""
        pid, since = self.pipeline.pid, self.pipeline.mark()
        if self.pipeline.alive:
            self.pipeline.send("halt")
            if self.pipeline.wait_for(lambda e: e["event"] == "exited" and e["pid"] == pid,
                                      since, _EXIT_S) is None:
                self.pipeline.kill()

    def _start_until_progress(self, timeout_s: float = 240) -> Any:
        """Start the driver; its first batch with rows, or None if none came in time."""
        since = self.pipeline.mark()
        self.pipeline.start()
        return self.pipeline.wait_progress(since, timeout_s)

    def _kill_at(self, points: tuple[str, ...]) -> tuple[str, bool]:
        """SIGKILL the driver at one of ``points``, driver-side fault points (a random moment
        if it did not fire; an executor's point would kill that executor instead)."""
        point = self.rng.choice(points)
        since, pid = self.pipeline.mark(), self.pipeline.pid
        base, flag = self._arm(point, "killgroup")
        exited = self.pipeline.wait_for(lambda e: e["event"] == "exited" and e["pid"] == pid,
                                        since, 90)
        self._disarm()
        if exited is not None and flag.exists():
            return point, True
        self.pipeline.kill()
        return point, False

    # -- kinds -----------------------------------------------------------------------------

    def reset_checkpoint(self) -> None:
        self._halt()
        checkpoint = Path(self.cfg["checkpoint"])
        from eos_kafka_source.sink.decisions.log import DecisionLog

        log = DecisionLog(self.cfg["decision_log"])
        decided = set(log.batch_ids())
        start = committed_end_offsets(checkpoint, decided)
        shutil.rmtree(checkpoint, ignore_errors=True)
        if start is not None:
            self.cfg["starting_offsets"] = start
        self._save_config()
        self.pipeline.start()
        self._note("reset_checkpoint", "new query started")
        self.log.add("reset_checkpoint", f"query stopped, checkpoint deleted, new query from "
                     f"{start or 'earliest'} with the decision log kept "
                     f"({len(decided)} decisions of the old query)")

    def restart_changed_options(self) -> None:
        point, landed = self._kill_at(("commit.before_decision", "commit.after_decision",
                                       "endtxn.commit.answered", "commit.before_done"))
        self.cfg["max_offsets"] = self.rng.choice((500, 2000, 5000, 8000))
        self.cfg["min_partitions"] = self.rng.choice((0, 2, 4, 6))
        self.cfg["most_tasks"] = max(self.cfg.get("most_tasks") or 0, self.cfg["min_partitions"])
        self._save_config()
        self.pipeline.start()
        self._note("restart_changed_options", "restarted")
        self.log.add("restart_changed_options",
                     f"driver killed at {point if landed else 'a random moment'}, restarted "
                     f"with maxOffsetsPerTrigger={self.cfg['max_offsets']} "
                     f"minPartitions={self.cfg['min_partitions'] or 'unset'}",
                     point, landed)

    def fence_crashed(self) -> None:
        point, landed = self._kill_at(("commit.after_decision", "endtxn.commit.answered",
                                       "commit.before_done"))
        location = self.cfg.get("decision_log") or self.cfg["checkpoint"]
        proc = subprocess.run(
            [sys.executable, "-m", "eos_kafka_source.cli", "fence", "--checkpoint", location,
             "-b", self.kafka.bootstrap_servers, "--probe", "--json"],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
            timeout=300)
        outcome = {0: "fenced", 1: "refused (a decided batch unfinished)"}.get(
            proc.returncode, f"error {proc.returncode}")
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"eoskafka fence failed: {proc.stderr.decode()[-800:]}")
        self._note("fence_crashed", outcome)
        self.pipeline.start()
        self.log.add("fence_crashed", f"driver killed at "
                     f"{point if landed else 'a random moment'}; `eoskafka fence --checkpoint "
                     f"--probe`: {outcome}; restarted", point, landed)

    def batch_rerun(self) -> None:
        first = 1_000_000 + self._batch_runs * BATCH_ROWS
        self._batch_runs += 1
        args = [sys.executable, "-m", "tests.chaos.batch_job", self.kafka.bootstrap_servers,
                BATCH_TOPIC, "chaos-batch-fixed", str(first), str(BATCH_ROWS)]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable}
        env.pop("EOSKAFKA_TEST_FAULTS_FILE", None)
        failing = subprocess.run(args, cwd=ROOT, capture_output=True, timeout=600,
                                 env={**env, "EOSKAFKA_TEST_FAULTS": "write.after_flush/1=raise"})
        rerun = subprocess.run(args, cwd=ROOT, capture_output=True, timeout=600, env=env)
        if rerun.returncode == 0:
            self.batch_expected.update(str(i).encode() for i in range(first, first + BATCH_ROWS))
        outcome = (f"failed write {'failed' if failing.returncode else 'SUCCEEDED?'}, "
                   f"rerun {'ok' if rerun.returncode == 0 else 'FAILED'}")
        self._note("batch_rerun", outcome)
        detail = rerun.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        self.log.add("batch_rerun", f"batch write of {BATCH_ROWS} rows with a fixed prefix "
                     f"failed by a task, then rerun: {outcome} {detail[0][:200]}")

    def ids_expire(self) -> None:
        point, landed = self._kill_at(("commit.before_done", "commit.after_decision"))
        down = round(ID_EXPIRATION_MS / 1000 * 2 + 5, 1)
        time.sleep(down)
        self.pipeline.start()
        self._note("ids_expire", "restarted after expiry")
        self.log.add("ids_expire", f"driver killed at {point if landed else 'a random moment'},"
                     f" kept down {down}s (transactional.id.expiration.ms {ID_EXPIRATION_MS})",
                     point, landed)

    def start_during_outage(self) -> None:
        node = self.rng.choice([n.node_id for n in self.kafka.nodes])
        self.pipeline.kill()
        self.kafka.stop_node(node, kill=True)
        progress = self._start_until_progress()
        outcome = "ran while the broker was down" if progress else "NO PROGRESS while down"
        self._note("start_during_outage", outcome)
        self.kafka.start_node(node)
        self.wait_replicated()
        self.log.add("start_during_outage", f"node {node} SIGKILLed, the driver restarted "
                     f"while it was down: {outcome}")

    def _recovery_copies(self) -> int:
        """Recoveries the driver has reported in its log ("copied N records of P aborted
        partition(s) from the log in K recovery transaction(s)"). Not ListTransactions: the
        coordinator forgets a recovery id once it expires (after 10 s in this round)."""
        return self._said("from the log in ")

    def kafka_abort_decided(self) -> None:
        """Kafka's own ``kafka-transactions abort`` on a decided open transaction (the
        operator's tool for a "hanging" one) while the driver is down; the restart finds the
        ABORT marker where its COMMIT should be and copies the records back from the log, its
        first read of the log cut off by a dropped connection (retried, not a loss)."""
        from eos_kafka_source.apache_kafka import KafkaTools

        # Spark's driver takes ~35 s to start again here: past the round's 30 s transaction
        # timeout the coordinator would abort the other partitions too, nothing of the batch
        # would commit and it would simply replay, with no recovery to exercise. So this run
        # and its restart have a long timeout (an option change, picked up at each start).
        normal = self.cfg.get("transaction_timeout_ms")
        copies_before = self._recovery_copies()
        self.cfg["transaction_timeout_ms"] = 300_000
        self._save_config()
        self._halt()
        self._start_until_progress()
        tools, topic = KafkaTools(self.kafka.bootstrap_servers), self.cfg["output"]
        for tries in range(1, 4):  # a decision of an empty batch leaves nothing open: again
            point, landed = self._kill_at(("commit.after_decision",))
            first_open = next(((o.partition, o.start_offset)  # one is enough: its rows
                               for o in tools.open_on_partitions(
                                   topic, range(self.cfg["output_partitions"]))), None)
            if first_open is not None:
                tools.abort_transaction(topic, *first_open)
                break
            if tries < 3:
                self._start_until_progress()
        flag = self.work / "ctl" / f"drop-{len(self.outcomes)}.fired"
        self.faults_file.write_text(f"recover.during_read=drop@{flag}")
        progress = self._start_until_progress()
        self._disarm()
        self.cfg["transaction_timeout_ms"] = normal  # from the next start on
        self._save_config()
        copied = bool(first_open) and self._recovery_copies() > copies_before
        outcome = (f"aborted {first_open[0]}:{first_open[1]}, restarted, "
                   f"{'copied back from the log' if copied else 'NO RECOVERY COPY reported'}"
                   if first_open else f"nothing open to abort ({tries} tries)")
        if first_open and progress is None:
            outcome += ", NO PROGRESS"
        self._note("kafka_abort_decided", outcome)
        self.log.add("kafka_abort_decided", f"driver killed at "
                     f"{point if landed else 'a random moment'}; kafka-transactions abort: "
                     f"{outcome}; recovery's read "
                     f"{'dropped once' if flag.exists() else 'not dropped (no recovery)'}",
                     point, landed)

    def rewind_checkpoint(self) -> None:
        """The query stopped, its last committed batch's ``offsets/N`` and ``commits/N``
        deleted (a common way to reprocess; with them any later batch the stop interrupted);
        Spark plans batch N again over another range. The sink must refuse it by name; the
        operator then restores the files, as the message says, and the query goes on."""
        self._halt()
        checkpoint = Path(self.cfg["checkpoint"])
        done = sorted(int(f.name) for f in (checkpoint / "commits").glob("[0-9]*"))
        if not done:
            self.pipeline.start()
            self._note("rewind_checkpoint", "no batch to rewind")
            return
        batch = done[-1]
        aside = self.work / "ctl" / f"rewound-{batch}"
        kept = []
        for sub in ("offsets", "commits"):  # from N on (a batch N+1 the stop interrupted
            for path in sorted((checkpoint / sub).iterdir()):  # too), with Hadoop's .N.crc
                number = path.name.strip(".").removesuffix(".crc")
                if number.isdigit() and int(number) >= batch:
                    (aside / sub).mkdir(parents=True, exist_ok=True)
                    shutil.move(path, aside / sub / path.name)
                    kept.append(f"{sub}/{path.name}")
        since = self.pipeline.mark()
        self.pipeline.start()
        refused = self.pipeline.wait_for(
            lambda e: e["event"] in ("query_failed", "progress")
            and ("EOSKAFKA_REPLAY_MISMATCH" in e.get("error", "") or e.get("rows", 0) > 0),
            since, 180)
        said = refused is not None and refused["event"] == "query_failed"
        self._halt()
        if said:  # the operator restores what was deleted (over the offsets/N Spark rewrote)
            for name in kept:
                shutil.move(aside / name, checkpoint / name)
            outcome = "refused by name (EOSKAFKA_REPLAY_MISMATCH), restored, restarted"
        else:  # the query went on: what Spark wrote stays
            replanned, old = checkpoint / "offsets" / str(batch), aside / "offsets" / str(batch)
            same = replanned.exists() and old.exists() and (
                replanned.read_text().splitlines()[2:] == old.read_text().splitlines()[2:])
            # Spark may plan the very same range again (a read limit met by both): a replay.
            outcome = ("the same range planned again (a true replay), accepted" if same
                       else "NOT REFUSED" if refused else "NO ANSWER in 180 s")
        self.pipeline.start()
        self._note("rewind_checkpoint", outcome)
        self.log.add("rewind_checkpoint", f"offsets/{batch} and commits/{batch} deleted: "
                     f"{outcome}")

    def store_fails(self) -> None:
        """The decision store fails one write (a full disk, an object store's 503): the
        batch fails by name and the query's restart goes on."""
        since = self.pipeline.mark()
        base, flag = self._arm("store.write", "ioerror")
        failed = self.pipeline.wait_for(lambda e: e["event"] == "query_failed", since, 120)
        self._disarm()
        outcome = ("failed, restarted" if failed is not None and flag.exists()
                   else "not hit in 120 s")
        self._note("store_fails", outcome)
        self.log.add("store_fails", f"one decision-store write failed: {outcome}"
                     + (f" ({failed['error'][:160]})" if failed else ""))

    def prefix_change(self) -> None:
        """Restarted with another ``transactionalIdPrefix`` after a crash mid-commit: the
        old prefix's open transactions are fenced (the decision log names them), the new
        prefix writes from there."""
        point, landed = self._kill_at(("commit.before_decision", "commit.after_decision",
                                       "endtxn.commit.answered"))
        self.cfg["prefixes"] = self.cfg.get("prefixes", 0) + 1
        self.cfg["prefix"] = f"chaos-renamed-{self.cfg['prefixes']}"
        self._save_config()
        self.pipeline.start()
        self._note("prefix_change", "restarted with a new prefix")
        self.log.add("prefix_change", f"driver killed at "
                     f"{point if landed else 'a random moment'}, restarted with "
                     f"transactionalIdPrefix={self.cfg['prefix']}", point, landed)


    def slow_marker(self) -> None:
        """The leader of an output partition paused (SIGSTOP) as the driver sends EndTxn,
        resumed a few seconds later (the controller moves its leadership meanwhile). The
        driver must wait for its marker; an ABORT of its own in the driver's log is a
        failed outcome. The row says whether the marker was late past the judge's first
        check (module docstring: on this cluster it is not)."""
        partition = self.rng.randrange(self.cfg["output_partitions"])
        node = self._leader(self.cfg["output"], partition)
        paused_s = round(self.rng.uniform(3, 8), 2)
        before, waits = self._own_aborts(), self._said(_JUDGED_WAITING)
        base, _ = self._arm("commit.before_endtxn", "block")
        landed = self._wait_blocked(base) is not None
        proc = self.kafka.node(node).proc
        assert proc is not None, f"node {node} is not running"
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            self._disarm(base)
            time.sleep(paused_s)  # how long the leader stays paused: the fault itself
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        self.wait_replicated()
        aborted = self._own_aborts() - before
        judged = self._said(_JUDGED_WAITING) > waits
        # A marker late past the driver's first check (2 s) is judged, and must be waited
        # for; a commit whose requests simply block through the pause never asks.
        outcome = ("ABORTED BY EOSKAFKA" if aborted
                   else "waited for the marker, judged not hanging" if judged
                   else "committed, no marker late past the judge's first check") + (
            "" if landed else " (the hold did not land: paused at a random moment)")
        self._note("slow_marker", outcome)
        self.log.add("slow_marker", f"node {node}, leader of {self.cfg['output']}-{partition}, "
                     f"paused {paused_s}s as the driver sent EndTxn: {outcome}",
                     "commit.before_endtxn", landed)

    def _own_aborts(self) -> int:
        """ABORT markers the driver wrote itself to a hanging partition, as its log says."""
        return self._said("ended it with an ABORT marker")

    def _said(self, text: str) -> int:
        """How often the driver's log holds ``text`` (its WARNING lines are always there)."""
        log = self.work / "driver.log"
        return (log.read_text(errors="replace") if log.exists() else "").count(text)


def operator_rows(verdict: Any, chaos: OperatorChaos, bootstrap: str) -> None:
    """The operator actions by kind and outcome, and the batch writes' topic judged."""
    for (kind, outcome), n in sorted(chaos.outcomes.items()):
        verdict.row(f"  operator {kind}: {outcome}", n,
                    problem=any(bad in outcome for bad in (
                        "FAILED", "NO PROGRESS", "SUCCEEDED?", "NOT REFUSED", "NO ANSWER",
                        "ABORTED BY EOSKAFKA")))
    if chaos._batch_runs:
        from tests.oracle import committed_view

        view = committed_view(bootstrap, BATCH_TOPIC)
        got = Counter(v for pv in view.values() for v in pv.committed_values)
        extra, missing = got - chaos.batch_expected, chaos.batch_expected - got
        open_ = sum(len(pv.open) for pv in view.values())
        verdict.row("batch writes rerun: rows once", f"{sum(got.values())} "
                    f"(missing {sum(missing.values())}, extra {sum(extra.values())}, "
                    f"open {open_})", problem=bool(extra or missing or open_))
