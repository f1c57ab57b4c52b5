"""The faults, injected at random points (seeded), each logged with its time.

Kinds: ``executor_kill`` (kill -9 an executor JVM, at a random moment or while
its task holds a flushed, open transaction), ``driver_kill`` (kill -9 the
driver process group at a random moment or at a commit step, then restart it
from the checkpoint), ``broker_restart`` (kill -9 Tansu, down 0-3 s, restart;
at a random moment or while the driver is between its decision and its
EndTxns), ``query_stop`` (stop the query while a task holds an open
transaction, start it again), ``zombie`` (InitProducerId on one of the sink's
transactional ids, write junk in a transaction never committed, later try
writing again). Mid-batch moments come from the library's fault points with
the ``block:`` action (EOSKAFKA_TEST_FAULTS_FILE), so they are events, not guesses.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from eos_kafka_source.broker import EmbeddedBroker
from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.sink.decisions.log import DecisionLog
from eos_kafka_source.sink.naming import TransactionalIdFactory, default_prefix
from eos_kafka_source.sink.task.writer import TaskWriter
from eos_kafka_source.wire import KafkaWire

from .cluster import SparkCluster, java_ancestor
from .pipeline import Pipeline

KINDS = ("executor_kill", "driver_kill", "broker_restart", "query_stop", "zombie")
_COMMIT_POINTS = ("commit.before_decision", "commit.after_decision", "endtxn.commit.answered",
                  "commit.before_done", "commit.after_done")
_ARM_TIMEOUT_S = 90.0


@dataclass
class Zombie:
    transactional_id: str
    junk_ids: list[int]
    wire: KafkaWire
    writer: TaskWriter
    second_write: str = "not tried"


@dataclass
class FaultLog:
    path: Path
    started: float = field(default_factory=time.monotonic)
    records: list[dict[str, Any]] = field(default_factory=list)

    def add(self, kind: str, detail: str, aimed: str | None = None,
            landed: bool | None = None) -> None:
        """``aimed``: the moment (fault point) the fault was aimed at, None for a fault meant
        for a random moment; ``landed``: whether it hit that moment (False: fell back to a
        random one). Both are counted in the verdict."""
        now = time.time()
        stamp = time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1000):03d}"
        record = {"n": len(self.records) + 1, "kind": kind, "detail": detail, "time": stamp,
                  "elapsed_s": round(time.monotonic() - self.started, 1),
                  "aimed": aimed, "landed": landed}
        if aimed is not None and not landed:
            detail += f" [aimed at {aimed}: FELL BACK]"
        self.records.append(record)
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        print(f"[chaos] {record['time']} +{record['elapsed_s']:.1f}s FAULT #{record['n']} "
              f"{kind}: {detail}", flush=True)


class Chaos:
    def __init__(self, rng: random.Random, cluster: SparkCluster, broker: EmbeddedBroker,
                 pipeline: Pipeline, cfg: dict[str, Any], work: Path, faults_file: Path) -> None:
        self.rng, self.cluster, self.broker, self.pipeline = rng, cluster, broker, pipeline
        self.cfg, self.work, self.faults_file = cfg, work, faults_file
        self.log = FaultLog(work / "faults.jsonl")
        self.zombies: list[Zombie] = []
        self._armed = 0

    # -- fault points ----------------------------------------------------------------------

    def _arm(self, point: str, action: str) -> tuple[Path, Path]:
        """Arm ``point`` to fire once with ``action`` ("block" or "killgroup")."""
        self._armed += 1
        base = self.work / "ctl" / f"f{self._armed}"
        base.parent.mkdir(exist_ok=True)
        flag = base.with_suffix(".fired")
        verb = f"block:{base}" if action == "block" else action
        self.faults_file.write_text(f"{point}={verb}@{flag}")
        return base, flag

    def _disarm(self, base: Path | None = None) -> None:
        self.faults_file.write_text("")
        if base is not None:
            Path(f"{base}.release").touch()

    def _wait_blocked(self, base: Path, timeout_s: float = _ARM_TIMEOUT_S) -> int | None:
        """The pid blocked at the armed point, once it is there."""
        started = Path(f"{base}.started")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.pipeline.ensure_running()
            try:
                text = started.read_text().strip()
            except FileNotFoundError:
                text = ""
            if text.isdigit():
                return int(text)
            time.sleep(0.05)
        return None

    # -- kinds -----------------------------------------------------------------------------

    def inject(self, kind: str) -> None:
        self.zombie_follow_up()
        getattr(self, kind)()

    def executor_kill(self) -> None:
        aimed = None
        if self.rng.random() < 0.5:
            aimed = "write.after_flush"
            base, _ = self._arm(aimed, "block")
            blocked = self._wait_blocked(base)
            jvm = java_ancestor(blocked) if blocked else None
            if jvm is not None:
                os.kill(jvm, signal.SIGKILL)
                self.log.add("executor_kill", f"executor JVM {jvm} whose task (Python worker "
                             f"{blocked}) holds a flushed open transaction", aimed, True)
                self._disarm(base)
                return
            self._disarm(base)
        pids = self._executors()
        victim = self.rng.choice(pids)
        os.kill(victim, signal.SIGKILL)
        self.log.add("executor_kill", f"executor JVM {victim} at a random moment "
                     f"(of {len(pids)} executors)", aimed, False if aimed else None)

    def _executors(self) -> list[int]:
        deadline = time.monotonic() + _ARM_TIMEOUT_S
        while not (pids := self.cluster.executor_pids()):
            if time.monotonic() > deadline:
                raise RuntimeError("no executor JVM appeared")
            self.pipeline.ensure_running()
            time.sleep(0.2)
        return pids

    def driver_kill(self) -> None:
        point = self.rng.choice(("random", *_COMMIT_POINTS))
        since = self.pipeline.mark()
        pid = self.pipeline.pid
        if point != "random":
            base, flag = self._arm(point, "killgroup")
            exited = self.pipeline.wait_for(
                lambda e: e["event"] == "exited" and e["pid"] == pid, since, _ARM_TIMEOUT_S)
            self._disarm()
            if exited is not None and flag.exists():
                self.log.add("driver_kill", f"driver {pid} SIGKILLed (process group) at {point}",
                             point, True)
                self.pipeline.start()
                return
            aimed, point = point, f"random ({point} did not fire in {_ARM_TIMEOUT_S:.0f}s)"
        else:
            aimed = None
        self.pipeline.kill()
        self.log.add("driver_kill", f"driver {pid} SIGKILLed (process group) at {point}",
                     aimed, False if aimed else None)
        self.pipeline.start()

    def broker_restart(self) -> None:
        down = round(self.rng.uniform(0, 3), 2)
        base, aimed, landed = None, None, None
        where = "a random moment"
        if self.rng.random() < 0.4:
            aimed, landed = "commit.after_decision", False
            base, _ = self._arm(aimed, "block")
            if self._wait_blocked(base) is not None:
                where, landed = "the driver's commit, between its decision and its EndTxns", True
        self.broker.stop(kill=True)
        self.log.add("broker_restart", f"broker SIGKILLed at {where}; down {down}s", aimed,
                     landed)
        if base is not None:
            self._disarm(base)
        time.sleep(down)  # the outage itself
        self.broker.start()

    def query_stop(self) -> None:
        base, _ = self._arm("write.after_flush", "block")
        blocked = self._wait_blocked(base)
        since = self.pipeline.mark()
        pid = self.pipeline.pid
        self.pipeline.send("stop")
        stopping = self.pipeline.wait_for(
            lambda e: e["event"] in ("stopping", "exited") and e["pid"] == pid, since, 60)
        when = "while a task holds a flushed open transaction" if blocked else "between batches"
        self.log.add("query_stop", f"query stopped {when}; restarted from the checkpoint",
                     "write.after_flush", blocked is not None)
        time.sleep(self.rng.uniform(0, 1.5))  # the stopped task may go on after abort()
        self._disarm(base)
        if stopping is None:
            raise RuntimeError("the driver did not react to the stop command in 60s")

    def _sink_pool(self) -> tuple[TransactionalIdFactory, int]:
        """The sink's ids (the operator's prefix, else the one derived from where the decision
        log lives) and its pool's size."""
        location = self.cfg.get("decision_log") or self.cfg["checkpoint"]
        prefix = self.cfg.get("prefix") or default_prefix(location)
        return TransactionalIdFactory(prefix), max(DecisionLog(location).pool().size, 1)

    def zombie(self) -> None:
        ids, size = self._sink_pool()
        task = self.rng.randrange(size)
        tid = ids.for_task(task)
        base, when, aimed, landed = None, "at a random moment", None, None
        if self.rng.random() < 0.5:
            # The worst moment: that task has flushed its transaction and is about to hand it
            # over; the zombie's InitProducerId aborts it before the driver commits.
            aimed, landed = f"write.after_flush/{task}", False
            base, _ = self._arm(aimed, "block")
            if self._wait_blocked(base) is not None:
                when = f"while task {task} holds its flushed transaction, before the commit"
                landed = True
        try:
            self._start_zombie(tid, when, aimed, landed)
        finally:
            if base is not None:
                self._disarm(base)

    def _start_zombie(self, tid: str, when: str, aimed: str | None,
                      landed: bool | None) -> None:
        number = len(self.zombies) + 1
        junk = [-(number * 100_000 + i) for i in range(self.rng.randint(5, 50))]
        wire = KafkaWire(ClientConfig.from_options(
            {"kafka.bootstrap.servers": self.broker.bootstrap_servers}))
        writer = TaskWriter(wire, transactional_id=tid, topic=self.cfg["output"],
                            transaction_timeout_ms=900_000, batch_records=100)
        try:
            writer.open()  # InitProducerId: fences the sink's task on this id, if one runs
            writer.write_batch(_junk(junk, number))
            writer.flush()
        except Exception as exc:
            wire.close()
            self.log.add("zombie", f"zombie on {tid} failed to start: {exc}", aimed, landed)
            return
        self.zombies.append(Zombie(tid, junk, wire, writer))
        assert writer.producer is not None
        self.log.add("zombie", f"zombie producer on sink id {tid} (epoch {writer.producer.epoch})"
                     f" {when}: {len(junk)} junk records in a transaction it never commits",
                     aimed, landed)

    def zombie_follow_up(self) -> None:
        """The last zombie writes again: by now the sink should have fenced it."""
        for z in self.zombies:
            if z.second_write != "not tried":
                continue
            try:
                z.writer.write_batch(_junk(z.junk_ids, 0))
                z.writer.flush()
                z.second_write = "ACCEPTED"
            except Exception as exc:
                z.second_write = f"refused ({type(exc).__name__})"
            finally:
                z.wire.close()


def _junk(ids: list[int], number: int) -> pa.RecordBatch:
    values = [json.dumps({"id": i, "zombie": number}).encode() for i in ids]
    return pa.RecordBatch.from_pydict({"value": values})
