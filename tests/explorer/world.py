"""One sequence's query on the shared cluster: its own topic, prefix and checkpoint, and
what Spark would do around the sink at each action.

Batches follow Spark's offset log: the next batch replays ``offsets/N`` while ``commits/N``
is missing, else plans N+1. A rewound batch comes back over another input range, so other
rows (tag ``r<shift>``); when the sink refuses it (a decided batch id), the operator puts
``offsets/N`` back. Every failure of a batch is a restart for the next one (a new run).
What the sink raised is kept: a batch it reported LOST may miss rows.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from eos_kafka_source import faults
from eos_kafka_source.sink.decisions.log import DecisionLog
from tests.crash_driver import INPUT_PER_BATCH, Query, partition_verification
from tests.explorer import driver
from tests.explorer.actions import Action, State
from tests.kafka_helpers import create_topic
from tests.operator_actions import eoskafka_fence, kafka_abort
from tests.oracle import committed_view


class HarnessError(RuntimeError):
    """The explorer itself failed (a driver process that neither finished nor died)."""


@dataclass
class Cluster:
    """The shared Apache Kafka: where sequences run, and how to restart its broker (None:
    not ours to restart)."""

    bootstrap: str
    workdir: Path
    restart: Callable[[bool], None] | None = None


def tag(shift: int) -> str:
    return "q" if shift == 0 else f"r{shift}"


@dataclass
class World:
    cluster: Cluster
    name: str
    query: Query = field(init=False)
    prefixes: list[str] = field(default_factory=list)
    new_run: bool = True
    #: Every (batch id, shift) ever planned: its rows are the batch's content.
    planned: set[tuple[int, int]] = field(default_factory=set)
    #: offsets/N as it was when batch N last committed, kept from the first rewind after
    #: that (a later rewind's replans never committed): put back on a refusal.
    saved: dict[int, str] = field(default_factory=dict)
    shift_next: dict[int, int] = field(default_factory=dict)
    rewinds: int = 0
    #: Batches the sink reported LOST (EOSKAFKA_TRANSACTION_LOST): rows may be missing.
    lost: set[int] = field(default_factory=set)
    step: int = 0

    def __post_init__(self) -> None:
        create_topic(self.cluster.bootstrap, self.name, partitions=2)
        home = self.cluster.workdir / self.name
        self.query = Query(self.cluster.bootstrap, self.name, self.name, home / "ckpt",
                           lineage=f"query-{self.name}", keyed=True)
        self.prefixes.append(self.name)

    # -- what the chooser sees ----------------------------------------------------------------

    def state(self) -> State:
        """Between actions: the decision log, and the raw log (which transactions of an
        unfinished decision Kafka aborted: something to recover)."""
        unfinished = DecisionLog(str(self.query.checkpoint), self.query.lineage).unfinished()
        view = committed_view(self.cluster.bootstrap, self.name)
        aborted = {(p, t.producer_id, t.first) for p, pv in view.items()
                   for t in pv.transactions if not t.committed}
        lost = any((p, h.producer_id, first) in aborted for d in unfinished
                   for h in (*d.handoffs, *(d.recovery or ())) for _, p, first in h.first_offsets)
        opened = {pid for pv in view.values() for pid in pv.open_producers}
        recovering = any(h.producer_id in opened for d in unfinished for h in d.recovery or ())
        return State(started=bool(self._ids()), unfinished=bool(unfinished), lost=lost,
                     recovering=recovering, open=bool(opened))

    # -- Spark's offset log ---------------------------------------------------------------------

    def _ids(self) -> list[int]:
        folder = self.query.checkpoint / "offsets"
        return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())

    def shift_of(self, batch: int) -> int:
        lines = (self.query.checkpoint / "offsets" / str(batch)).read_text().splitlines()
        return json.loads(lines[2])["input"]["0"] - (batch + 1) * INPUT_PER_BATCH

    def final(self) -> set[tuple[int, int]]:
        """The batches the checkpoint holds now, with their ranges."""
        return {(b, self.shift_of(b)) for b in self._ids()}

    def next_batch(self) -> tuple[int, int]:
        ids = self._ids()
        if ids and not (self.query.checkpoint / "commits" / str(ids[-1])).exists():
            batch = ids[-1]
            shift = self.shift_of(batch)
        else:
            batch = ids[-1] + 1 if ids else 0
            shift = self.shift_next.pop(batch, 0)
            self.query.write_offsets(batch, shift=shift)
        self.planned.add((batch, shift))
        return batch, shift

    # -- the actions ----------------------------------------------------------------------------

    def act(self, action: Action) -> str:
        self.step += 1
        if action.kind == "batch":
            return self.batch()
        if action.kind == "store_fail":
            return self.batch(store_fail=True)
        if action.kind == "crash":
            return self.crash(action)
        self.new_run = True  # the operator acts on a stopped query
        if action.kind == "kafka_abort":
            return kafka_abort(self.query, action.pick)
        if action.kind == "fence":
            return eoskafka_fence(self.query)
        if action.kind == "rewind":
            return self.rewind()
        if action.kind == "prefix":
            self.query.prefix = f"{self.name}-p{len(self.prefixes)}"
            self.prefixes.append(self.query.prefix)
            return f"prefix now {self.query.prefix}"
        if action.kind == "broker_restart":
            if self.cluster.restart is None:
                return "skipped (the broker is not ours)"
            self.cluster.restart(bool(action.pick))
            return "broker restarted"
        raise ValueError(action.kind)

    def batch(self, *, store_fail: bool = False) -> str:
        """The next batch in this process; a failure makes the next one a new run."""
        batch, shift = self.next_batch()
        if store_fail:
            flag = self.query.checkpoint.parent / f"store-failed-{self.step}"
            os.environ[faults.ENV] = f"store.write=ioerror@{flag}"
        try:
            self.query.run_batch(batch, tag(shift), new_run=self.new_run, shift=shift)
        except Exception as exc:  # noqa: BLE001 - Spark fails the query; the next run replays
            self.new_run = True
            return self.failed(batch, f"{type(exc).__name__}: {exc}")
        finally:
            os.environ.pop(faults.ENV, None)
        self.new_run = False
        self.saved.pop(batch, None)  # its range now is the one committed
        return f"batch {batch} committed"

    def crash(self, action: Action) -> str:
        """The next batch in a driver process, killed at the action's point."""
        ids = self._ids()
        replay = bool(ids) and not (self.query.checkpoint / "commits" / str(ids[-1])).exists()
        batch, shift = self.next_batch()
        fault = f"{action.point}={action.kill}" if action.point else ""
        # A replay strands nothing: its rows would hang outside any decision (no one ends
        # them), and a later transaction of the same producer id could commit them.
        path = "commit" if action.path == "hanging" and replay else action.path
        hanging = path == "hanging"
        if hanging:
            partition_verification(self.cluster.bootstrap, on=False)
        try:
            code, raised, tail = driver.run(
                self.query, fault, self.query.checkpoint.parent / f"gate{self.step}",
                batch=batch, tag=tag(shift), new_run=self.new_run, path=path)
        finally:
            if hanging:
                partition_verification(self.cluster.bootstrap, on=True)
        self.new_run = True
        if code == -signal.SIGKILL:
            return f"batch {batch}: killed at {action.point}"
        if code == 0:
            self.saved.pop(batch, None)
            return f"batch {batch} committed ({action.point or 'no point'} not met)"
        if code == driver.RAISED and raised:
            return "; ".join(self.failed(batch, r) for r in raised)
        raise HarnessError(f"the driver of batch {batch} exited {code}: {tail}")

    def failed(self, batch: int, error: str) -> str:
        if "EOSKAFKA_REPLAY_MISMATCH" in error and batch in self.saved:
            (self.query.checkpoint / "offsets" / str(batch)).write_text(self.saved.pop(batch))
            return f"batch {batch} refused (EOSKAFKA_REPLAY_MISMATCH); offsets/{batch} put back"
        if "TransactionLostError" in error or "EOSKAFKA_TRANSACTION_LOST" in error:
            self.lost |= {int(b) for b in re.findall(r"batch (\d+)", error)} | {batch}
        return f"batch {batch} raised {error.splitlines()[0][:200]}"

    def rewind(self) -> str:
        ids = self._ids()
        if not ids:
            return "nothing to rewind"
        batch = ids[-1]
        self.saved.setdefault(batch, (self.query.checkpoint / "offsets" / str(batch)).read_text())
        self.rewinds += 1
        self.shift_next[batch] = 5 * self.rewinds
        self.query.rewind(batch)
        return f"rewound batch {batch}"

    def settle(self, attempts: int = 4) -> str | None:
        """The query restarts and runs until a batch commits, then one more; what stopped
        it if it never could (a stuck query is a finding)."""
        self.new_run = True
        notes = []
        for _ in range(attempts):
            note = self.batch()
            notes.append(note)
            if note.endswith("committed"):
                note = self.batch()
                return None if note.endswith("committed") else f"stuck: {note}"
        return "stuck: " + " | ".join(notes)
