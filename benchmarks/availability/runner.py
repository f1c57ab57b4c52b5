"""One run of the availability harness: one connector, one (fault kind, moment) cell.

The job is the same for both connectors: ``readStream.format(C)`` -> key, value ->
``writeStream.format(C)``, ``maxOffsetsPerTrigger`` 100, a 1 s trigger, over a backlog
of 30,000 records on fresh replicated topics and a fresh checkpoint, in the harness's own
SparkSession (``local[2,4]``: a task gets 4 attempts, as a cluster gives it). The run ends
once a batch has finished after the fault was lifted; the output is then judged
against the input up to the last batch Spark committed.

Where the fault lands (:data:`MOMENTS`):

- ``start``: the fault begins, then the query starts;
- ``restart``: two batches done, the query stopped, the fault begins, the query restarts
  from its checkpoint;
- ``planning``, ``reading``, ``writing``, ``commit``, ``fencing``: eoskafka is held at the
  fault point of that step (``plan.latest``, ``read.after_leader``, ``write.after_batch``,
  ``commit.before_endtxn``, ``prepare.before_fence`` at a restart) while the fault begins,
  then let go, so its next request meets it. Spark's connector has no such points and no
  driver commit or fencing: its fault begins as soon as the second batch is done (the next
  batch's planning, reading and writing all fall inside a fault of 15 s or more), and at a
  restart for ``fencing``.

A query that fails (``StreamingQueryException``, or a ``start()`` that raises) is counted
and started again from its checkpoint, as an operator would; the stall is the longest
time without a finished batch from the fault's beginning to the first batch finished after
the fault was lifted.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from .faults import Fault, coordinator_of, leader_of, replicas_of

MOMENTS = ("start", "restart", "planning", "reading", "writing", "commit", "fencing")
HOLDS = {"planning": "plan.latest", "reading": "read.after_leader/0",
         "writing": "write.after_batch", "commit": "commit.before_endtxn",
         "fencing": "prepare.before_fence"}
#: A backlog no run reaches the end of: every run lasts from its fault's beginning until a
#: batch has finished after the fault was lifted (or RUN_TIMEOUT_S).
PARTITIONS, RECORDS, PER_TRIGGER = 3, 30000, 100
RUN_TIMEOUT_S = 360.0
_HOLD_WAIT_S = 90.0
_MACHINE = ("Python worker failed to connect back",)


@dataclass
class RunResult:
    kind: str
    moment: str
    connector: str
    failures: int = 0
    #: Failures of the machine, not of the connector: a Python worker that did not connect
    #: back to the JVM in time (Spark's fixed 10 s; seen at load 60).
    env_failures: int = 0
    errors: list[str] = field(default_factory=list)
    finished: bool = False
    stall_s: float | None = None
    batch_s: float | None = None  # median time between batches outside the fault
    landed: bool = True
    detail: str = ""
    records_in: int = 0
    records_out: int = 0
    duplicates: int = 0
    missing: int = 0
    open_txns: int | None = None  # output partitions with LSO < HW: a transaction left open
    seconds: float = 0.0

    def json(self) -> dict[str, Any]:
        return asdict(self)


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "desc", None) or exc)
    lines = [ln for ln in text.splitlines() if "EOSKAFKA" in ln or "Exception" in ln]
    return (lines or text.splitlines() or [repr(exc)])[0].strip()[:300]


def _completions(query: Any, ends: dict[str, int] | None = None,
                 topic: str = "") -> list[float]:
    """Wall-clock times at which the query's batches with input finished; ``ends`` takes the
    furthest end offset of ``topic`` a finished batch reached."""
    out = []
    for p in query.recentProgress:
        if ends is not None and p.sources:
            end = json.loads(p.sources[0].endOffset or "{}").get(topic, {})
            for part, offset in end.items():
                ends[str(part)] = max(ends.get(str(part), 0), int(offset))
        if not p.numInputRows:
            continue
        began = datetime.fromisoformat(p.timestamp.replace("Z", "+00:00")).timestamp()
        out.append(began + p.durationMs.get("triggerExecution", 0) / 1000)
    return out


class Run:
    def __init__(self, spark: Any, kafka: Any, work: Path, kind: str, moment: str,
                 connector: str, name: str, faults_file: Path) -> None:
        self.spark, self.kafka, self.work = spark, kafka, work
        self.result = RunResult(kind, moment, connector)
        self.name, self.faults_file = name, faults_file
        self.input, self.output = f"{name}-in", f"{name}-out"
        self.checkpoint = str(work / f"ckpt-{name}")
        self.prefix = f"{name}-txn"
        self.query: Any = None
        self.times: list[float] = []
        self.fault = Fault(kind, kafka, 0, [self.input, self.output])
        self.committed: dict[str, int] = {}  # input partition -> end of the last batch done

    # -- the query -------------------------------------------------------------------------

    def _start(self) -> None:
        fmt, b = self.result.connector, self.kafka.bootstrap_servers
        frame = (self.spark.readStream.format(fmt).option("kafka.bootstrap.servers", b)
                 .option("subscribe", self.input).option("startingOffsets", "earliest")
                 .option("maxOffsetsPerTrigger", str(PER_TRIGGER)).load())
        writer = (frame.select("key", "value").writeStream.format(fmt)
                  .option("kafka.bootstrap.servers", b).option("topic", self.output)
                  .option("checkpointLocation", self.checkpoint)
                  .trigger(processingTime="1 second"))
        if fmt == "eoskafka":
            writer = writer.option("transactionalIdPrefix", self.prefix)
        try:
            self.query = writer.start()
        except Exception as exc:
            self._failed(exc)

    def _failed(self, exc: BaseException) -> None:
        if any(s in str(exc) for s in _MACHINE):
            self.result.env_failures += 1
        else:
            self.result.failures += 1
        self.result.errors.append(_first_line(exc))
        print(f"    query failed: {self.result.errors[-1]}", flush=True)

    def _stop(self) -> None:
        if self.query is not None:
            try:
                self.query.stop()
            except Exception:  # noqa: BLE001, S110 - a failed query is already counted
                pass
            self.times += _completions(self.query, self.committed, self.input)
            self.query = None

    def _recovered(self) -> bool:
        """A batch finished after the fault was lifted (that ends the stall)."""
        if not self.fault.lifted:
            return False
        done = self.times + (_completions(self.query) if self.query is not None else [])
        return any(t > self.fault.lifted for t in done)

    def _batches_done(self) -> int:
        return len(self.times) + (len(_completions(self.query)) if self.query else 0)

    def _tick(self) -> None:
        """One look at the query: start it again (from its checkpoint) when it failed."""
        if self.query is None:
            time.sleep(1)
            self._start()
        elif not self.query.isActive:
            exc = self.query.exception()
            self.times += _completions(self.query, self.committed, self.input)
            self.query = None
            if exc is not None:
                self._failed(exc)

    def _until(self, predicate: Any, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            self._tick()
            if time.monotonic() > deadline:
                return bool(predicate())
            time.sleep(0.2)
        return True

    # -- landing the fault -----------------------------------------------------------------

    def _aim(self) -> int:
        kind, moment = self.result.kind, self.result.moment
        if kind == "isr":
            leader = leader_of(self.kafka, self.output, 0)
            return next(r for r in replicas_of(self.kafka, self.output)[0] if r != leader)
        if moment == "writing" or (moment in ("commit", "fencing")
                                   and self.result.connector == "kafka"):
            return leader_of(self.kafka, self.output, 0)
        if moment in ("commit", "fencing"):
            return coordinator_of(self.kafka, f"{self.prefix}-0")
        return leader_of(self.kafka, self.input, 0)

    def _begin(self) -> None:
        self.fault.node = self._aim()
        self.fault.begin()
        self.lifter = threading.Thread(target=self._lift, daemon=True)
        self.lifter.start()

    def _lift(self) -> None:
        try:
            self.fault.lift()
        except Exception as exc:  # noqa: BLE001 - the harness's own failure, reported
            self.result.detail += f" LIFT FAILED: {exc}"

    def _hold(self, point: str, then: Any = None) -> bool:
        """Hold eoskafka at ``point`` (``then()`` once armed), begin the fault, let go;
        whether the hold landed."""
        base = self.work / f"hold-{self.name}"
        self.faults_file.write_text(f"{point}=block:{base}@{base}.once")
        try:
            if then is not None:
                then()
            landed = self._until(lambda: Path(f"{base}.started").exists(), _HOLD_WAIT_S)
            self._begin()
        finally:
            self.faults_file.write_text("")
            Path(f"{base}.release").touch()
        return landed

    def _land(self) -> None:
        moment, eos = self.result.moment, self.result.connector == "eoskafka"
        if moment == "start":
            self._begin()
            self._start()
            return
        self._start()
        self._until(lambda: self._batches_done() >= 2, 180)
        if moment in ("restart", "fencing"):
            self._stop()
            if moment == "fencing" and eos:  # the restarted query's prepare() is held
                self.result.landed = self._hold(HOLDS["fencing"], then=self._start)
            else:
                self._begin()
                self._start()
        elif eos:
            self.result.landed = self._hold(HOLDS[moment])
        else:
            self._begin()

    # -- the whole run ---------------------------------------------------------------------

    def run(self) -> RunResult:
        started = time.monotonic()
        self.fault.prepare()
        try:
            self._land()
            self.result.finished = self._until(self._recovered, RUN_TIMEOUT_S)
        finally:
            self._stop()
            if hasattr(self, "lifter"):
                self.lifter.join()
            self.result.detail = (self.fault.detail + self.result.detail).strip()
        self._measure()
        self.result.seconds = round(time.monotonic() - started, 1)
        return self.result

    def _measure(self) -> None:
        times = sorted(set(self.times))
        began, lifted = self.fault.began, self.fault.lifted or time.time()
        after = [t for t in times if t > began]
        first_after_lift = next((t for t in after if t > lifted), None)
        points = [began] + [t for t in after if first_after_lift is None or t <= first_after_lift]
        if not self.result.finished and first_after_lift is None:
            points.append(time.time())
        gaps = [b - a for a, b in zip(points, points[1:], strict=False)]
        self.result.stall_s = round(max(gaps), 1) if gaps else None
        quiet = [b - a for a, b in zip(times, times[1:], strict=False)
                 if b < began or a > lifted]
        if quiet:
            self.result.batch_s = round(sorted(quiet)[len(quiet) // 2], 1)
