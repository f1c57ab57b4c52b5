"""The durable decision log beside the query's checkpoint.

Committing N Kafka transactions is not atomic, so the driver writes its
decision (batch id + every hand-off) here before the first EndTxn and marks it
done after the last; a restarted driver rolls a decided-but-unfinished batch
forward. Lives at ``<checkpointLocation>/eoskafka`` through pyarrow's
filesystems, so HDFS, S3, GCS and ABFS checkpoints work as local ones do.

Layout (each file written once, atomically via write-then-rename):
``decisions/<batch>.json`` the decision; ``decisions/<batch>.done`` its
completion (with any lost hand-offs); ``decisions/<batch>.recovery`` a replay's
hand-offs that rewrite lost task partitions; ``pool.json`` the size of the
transactional-id pool and the epochs the driver fenced ids to; ``planned.json`` when
the last batch was prepared.
Runs on: the driver only (planning and commit workers).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from .handoff import TxnHandoff

_KEEP_DONE = 100  # decisions kept for inspection (eoskafka txns); older ones are pruned


@dataclass(frozen=True)
class Decision:
    batch_id: int
    handoffs: tuple[TxnHandoff, ...]
    done: bool
    lost: tuple[str, ...] = ()
    decided_at: float = 0.0
    #: When the batch was marked done (epoch seconds); None while it is undone.
    done_at: float | None = None
    #: Decided hand-offs that could not be committed (fenced mid-commit): a replay of the
    #: batch may rewrite their task partitions (see DriverProtocol._replayed).
    lost_handoffs: tuple[TxnHandoff, ...] = ()
    #: A replay's hand-offs chosen to replace the lost ones, recorded before their EndTxn.
    recovery: tuple[TxnHandoff, ...] | None = None


@dataclass
class PoolState:
    size: int = 0
    #: transactional id -> epoch the driver fenced it to; older hand-offs are refused.
    fenced_epochs: dict[str, int] = field(default_factory=dict)
    prefix: str = ""
    owner: str = ""
    #: False after an abort: a stopped task may still open a transaction later.
    clean: bool = False
    #: transactional id -> producer id it had when fenced (an epoch compares only within it).
    fenced_producers: dict[str, int] = field(default_factory=dict)


class DecisionLog:
    """Decisions and pool state of one query's sink, in a directory."""

    def __init__(self, location: str) -> None:
        self.location = location.rstrip("/") + "/eoskafka"
        self.fs, self.root = pafs.FileSystem.from_uri(_as_uri(self.location))
        self.fs.create_dir(f"{self.root}/decisions", recursive=True)

    # -- files ---------------------------------------------------------------------------------

    def _path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def _write(self, name: str, payload: dict[str, Any]) -> None:
        final = self._path(name)
        tmp = f"{final}.{uuid.uuid4().hex}.tmp"
        with self.fs.open_output_stream(tmp) as out:
            out.write(json.dumps(payload, sort_keys=True).encode())
        self.fs.move(tmp, final)

    def _read(self, name: str) -> dict[str, Any] | None:
        try:
            with self.fs.open_input_stream(self._path(name)) as src:
                return json.loads(src.read())
        except FileNotFoundError:
            return None

    def _exists(self, name: str) -> bool:
        info = self.fs.get_file_info(self._path(name))
        return info.type != pafs.FileType.NotFound

    # -- decisions -----------------------------------------------------------------------------

    def decide(self, batch_id: int, handoffs: list[TxnHandoff]) -> None:
        """Record the commit decision; must be durable before the first EndTxn."""
        self._write(
            f"decisions/{batch_id:020d}.json",
            {"batch_id": batch_id, "decided_at": time.time(),
             "handoffs": [h.to_json() for h in handoffs]},
        )

    def mark_done(self, batch_id: int, lost: list[str] | None = None,
                  lost_handoffs: list[TxnHandoff] | None = None) -> None:
        self._write(f"decisions/{batch_id:020d}.done", {
            "batch_id": batch_id, "lost": lost or [], "done_at": time.time(),
            "lost_handoffs": [h.to_json() for h in lost_handoffs or []]})

    def record_recovery(self, batch_id: int, handoffs: list[TxnHandoff]) -> None:
        """A replay's hand-offs that replace lost ones; durable before their first EndTxn."""
        self._write(f"decisions/{batch_id:020d}.recovery",
                    {"batch_id": batch_id, "handoffs": [h.to_json() for h in handoffs]})

    def clear_recovery(self, batch_id: int) -> None:
        try:
            self.fs.delete_file(self._path(f"decisions/{batch_id:020d}.recovery"))
        except FileNotFoundError:
            pass

    def void(self, batch_id: int) -> None:
        """Withdraw a decision none of whose transactions committed (the batch will replay)."""
        for suffix in (".json", ".done", ".recovery"):
            try:
                self.fs.delete_file(self._path(f"decisions/{batch_id:020d}{suffix}"))
            except FileNotFoundError:
                pass

    def get(self, batch_id: int) -> Decision | None:
        data = self._read(f"decisions/{batch_id:020d}.json")
        if data is None:
            return None
        done = self._read(f"decisions/{batch_id:020d}.done")
        recovery = self._read(f"decisions/{batch_id:020d}.recovery")
        return Decision(
            batch_id,
            tuple(TxnHandoff.from_json(h) for h in data["handoffs"]),
            done is not None,
            tuple((done or {}).get("lost", ())),
            data.get("decided_at", 0.0),
            (done or {}).get("done_at"),
            tuple(TxnHandoff.from_json(h) for h in (done or {}).get("lost_handoffs", ())),
            None if recovery is None
            else tuple(TxnHandoff.from_json(h) for h in recovery["handoffs"]),
        )

    def batch_ids(self) -> list[int]:
        selector = pafs.FileSelector(f"{self.root}/decisions", allow_not_found=True)
        ids = set()
        for info in self.fs.get_file_info(selector):
            name = info.base_name
            if name.endswith(".json") and name[:-5].isdigit():
                ids.add(int(name[:-5]))
        return sorted(ids)

    def undone(self) -> list[Decision]:
        """Decided batches whose transactions may not all be committed yet."""
        out = []
        for batch_id in self.batch_ids():
            if not self._exists(f"decisions/{batch_id:020d}.done"):
                decision = self.get(batch_id)
                if decision is not None:
                    out.append(decision)
        return out

    def prune(self) -> None:
        ids = self.batch_ids()
        for batch_id in ids[:-_KEEP_DONE]:
            if self._exists(f"decisions/{batch_id:020d}.done"):
                self.void(batch_id)

    def mark_planned(self) -> None:
        """When the driver last prepared a batch (its tasks start after): a batch older
        than the transaction timeout at commit was aborted by Kafka, not by a zombie."""
        self._write("planned.json", {"planned_at": time.time()})

    def planned_at(self) -> float | None:
        data = self._read("planned.json")
        return None if data is None else float(data["planned_at"])

    # -- pool ----------------------------------------------------------------------------------

    def pool(self) -> PoolState:
        data = self._read("pool.json") or {}
        return PoolState(
            int(data.get("size", 0)), dict(data.get("fenced_epochs", {})),
            data.get("prefix", ""), data.get("owner", ""), bool(data.get("clean", False)),
            dict(data.get("fenced_producers", {})),
        )

    def save_pool(self, state: PoolState) -> None:
        self._write("pool.json", {"size": state.size, "fenced_epochs": state.fenced_epochs,
                                  "prefix": state.prefix, "owner": state.owner,
                                  "clean": state.clean,
                                  "fenced_producers": state.fenced_producers})


def _as_uri(location: str) -> str:
    if "://" in location:
        return location
    import os

    return "file://" + os.path.abspath(location)
