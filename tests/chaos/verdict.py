"""The verdict: the output's committed view (from markers, tests/oracle.py) against the input's.

Truth is the input topic's own committed view (the feeders' ledger is checked
against it: a transaction a feeder saw commit must be committed there, one it
aborted must not). The output must hold each committed input id exactly once,
no id of an aborted input transaction, none of the zombies' junk, and no open
transaction on any partition (strict: records with no marker). LSO < high
watermark with no open transaction is a problem unless the raw log shows exactly
Tansu's pinned stuck-LSO state (tests/oracle.py ``tansu_stuck_lso``), reported apart.
Faults aimed at a moment are counted: how many landed there, how many fell back.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kafka.record import MemoryRecords
from oracle import TANSU_STUCK_LSO, PartitionView, committed_view, lso_lag

from eos_kafka_source import wire as kwire
from eos_kafka_source.client.config import ClientConfig

from .feeder import Ledger


def _ids(records: list[Any]) -> list[int]:
    return [int(json.loads(r.value)["id"]) for r in records]


def _open(view: dict[int, PartitionView]) -> list[str]:
    return [f"partition {p}: producers {sorted(v.open_producers)}, {len(v.open)} records"
            for p, v in sorted(view.items()) if v.open_producers]


def producer_ids(bootstrap: str, topic: str) -> set[int]:
    """Distinct producer ids of the transactional data batches in ``topic``."""
    config = ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap})
    out: set[int] = set()
    with kwire.KafkaWire(config) as w:
        info = kwire.require_topics(w, [topic])[topic]
        leaders = {(topic, p): leader for p, leader in info.leaders.items()}
        for tp, b in kwire.fetch_bounds(w, leaders).items():
            position, empty = b.log_start, 0
            while position < b.high_watermark:
                chunk = kwire.fetch(w, leaders[tp], {tp: position}, max_bytes=32 << 20,
                                    max_wait_ms=min(500 << empty, 8000))[tp]
                before = position
                for batch in MemoryRecords(chunk.records):
                    if batch.next_offset <= position:
                        continue
                    position = batch.next_offset
                    if batch.is_transactional and not batch.is_control_batch:
                        out.add(batch.producer_id)
                empty = 0 if position > before else empty + 1
                if empty > 20:
                    raise AssertionError(f"no progress reading {tp} at {position}")
    return out


def recovery_producer_ids(bootstrap: str) -> set[int]:
    """Producer ids of sink recovery ids (``<prefix>-recovery``, which copy a decided
    transaction Kafka aborted back from the log: docs/design.md): outside the pool's bound.
    Every state, from ListTransactions on every broker; empty where it is not served."""
    from kafka.protocol.admin.transactions import ListTransactionsRequest

    from eos_kafka_source.acls import RECOVERY_SUFFIX

    config = ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap})
    out: set[int] = set()
    with kwire.KafkaWire(config) as w:
        try:
            w.version(ListTransactionsRequest)
        except Exception:  # noqa: BLE001 - not served (Tansu): no id is set apart
            return out
        kwire.fetch_metadata(w, [])
        nodes = sorted(b.node_id for b in w.client.cluster.brokers())
        request = ListTransactionsRequest[0](state_filters=[], producer_id_filters=[])
        for answer in w.request_many([(n, request) for n in nodes], "ListTransactions"):
            for state in answer.transaction_states:
                if state.transactional_id.endswith(f"-{RECOVERY_SUFFIX}"):
                    out.add(state.producer_id)
    return out


def aim_summary(faults: list[dict[str, Any]], kind: str | None = None) -> str:
    """Faults aimed at a moment (a fault point), how many landed there, how many fell back
    to a random moment (FaultLog.add's ``aimed``/``landed``)."""
    aimed = [f for f in faults if f.get("aimed") and kind in (None, f["kind"])]
    hit = sum(1 for f in aimed if f.get("landed"))
    return (f"aimed at a moment {len(aimed)}: landed where aimed {hit}, "
            f"fell back to a random moment {len(aimed) - hit}")


@dataclass
class Verdict:
    rows: list[tuple[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def row(self, name: str, value: Any, problem: bool = False) -> None:
        self.rows.append((name, value))
        if problem:
            self.problems.append(f"{name}: {value}")

    def print(self) -> None:
        width = max(len(n) for n, _ in self.rows)
        print("\n  chaos verdict (committed views resolved from the transaction markers)")
        for name, value in self.rows:
            print(f"  {name:<{width}}  {value}")
        for note in self.notes:
            print(f"  note: {note}")
        print(f"\n  result: {'EXACTLY ONCE' if self.ok else 'FAILED'}", flush=True)
        for problem in self.problems:
            print(f"  PROBLEM: {problem}")

    @property
    def ok(self) -> bool:
        return not self.problems


def judge(bootstrap: str, cfg: dict[str, Any], ledger: Ledger, faults: list[dict[str, Any]],
          zombies: list[Any], pool_size: int, driver: dict[str, int], wall_s: float) -> Verdict:
    v = Verdict()
    src = committed_view(bootstrap, cfg["input"])
    out = committed_view(bootstrap, cfg["output"])
    committed_in = Counter(i for pv in src.values() for i in _ids(pv.committed))
    aborted_in = {i for pv in src.values() for i in _ids(pv.aborted)}
    out_ids = Counter(i for pv in out.values() for i in _ids(pv.committed))
    junk = {i for z in zombies for i in z.junk_ids}

    kinds = Counter(f["kind"] for f in faults)
    v.row("faults injected", f"{len(faults)} ("
          + ", ".join(f"{k} {kinds[k]}" for k in sorted(kinds)) + ")")
    for kind in sorted(kinds):
        v.row(f"  {kind}", f"{kinds[kind]} ({aim_summary(faults, kind)})")
    v.row("faults aimed at a moment", aim_summary(faults))
    for f in faults:
        if f.get("aimed") and not f.get("landed"):
            v.notes.append(f"fault #{f['n']} {f['kind']} aimed at {f['aimed']} fell back: "
                           f"{f['detail']}")
    v.row("driver processes started", driver["starts"])
    v.row("query runs failed (restarted)", driver["failed_runs"])
    v.row("input transactions (feeders)", f"{ledger.transactions} "
          f"({ledger.failures} interrupted by a broker kill)")
    v.row("records in (committed input)", sum(committed_in.values()))
    v.row("input records aborted", len(aborted_in))
    v.row("input duplicate ids (harness bug)", sum(n - 1 for n in committed_in.values() if n > 1),
          problem=any(n > 1 for n in committed_in.values()))
    open_in_ids = {i for pv in src.values() for i in _ids(pv.open)}
    said_committed = ledger.committed - set(committed_in)
    said_aborted = ledger.aborted & set(committed_in)
    v.row("feeder commits not committed in input log",
          f"{len(said_committed)} ({len(said_committed & aborted_in)} aborted, "
          f"{len(said_committed & open_in_ids)} open, "
          f"{len(said_committed - aborted_in - open_in_ids)} absent)",
          problem=bool(said_committed))
    v.row("feeder aborts committed in input log", len(said_aborted), problem=bool(said_aborted))
    for name, ids in (("feeder-committed, not in log", said_committed),
                      ("feeder-aborted, committed", said_aborted)):
        if ids:
            v.notes.append(f"{name} ids: {min(ids)}..{max(ids)} ({len(ids)})")
    v.row("records out (committed output)", sum(out_ids.values()))
    dups = {i: n for i, n in out_ids.items() if n > 1}
    v.row("duplicates", sum(n - 1 for n in dups.values()), problem=bool(dups))
    lost = set(committed_in) - set(out_ids)
    v.row("losses", len(lost), problem=bool(lost))
    leaked = aborted_in & set(out_ids)
    v.row("aborted input records in output", len(leaked), problem=bool(leaked))
    visible_junk = junk & set(out_ids)
    v.row("zombie junk records committed", len(visible_junk), problem=bool(visible_junk))
    stray = set(out_ids) - set(committed_in) - aborted_in - junk
    v.row("output records of unknown origin", len(stray), problem=bool(stray))
    v.row("zombie second writes", ", ".join(z.second_write for z in zombies) or "-",
          problem=any(z.second_write == "ACCEPTED" for z in zombies))
    v.row("output records aborted (retries/zombies)", sum(len(pv.aborted) for pv in out.values()))
    open_out, open_in = _open(out), _open(src)
    v.row("open transactions (output)", len(open_out), problem=bool(open_out))
    v.row("open transactions (input)", len(open_in), problem=bool(open_in))
    quirk_out, other_out = lso_lag(out, cfg["output"], broker=cfg.get("broker", "tansu"))
    quirk_in, other_in = lso_lag(src, cfg["input"], broker=cfg.get("broker", "tansu"))
    v.row("LSO < HW, pinned Tansu stuck-LSO state", len(quirk_out) + len(quirk_in))
    if quirk_out or quirk_in:
        v.notes.append(f"{TANSU_STUCK_LSO}: " + "; ".join(quirk_out + quirk_in))
    v.row("LSO < HW with no open txn, not the pinned quirk", len(other_out) + len(other_in),
          problem=bool(other_out or other_in))
    for lag in other_out + other_in:
        v.notes.append(lag)
    # Tasks per batch: one per input partition, or minPartitions when an operator raised it.
    bound = max(cfg["input_partitions"], cfg.get("most_tasks") or 0)
    pids = producer_ids(bootstrap, cfg["output"])
    v.row("sink transactional ids (pool.json size)", f"{pool_size} (bound {bound})",
          problem=pool_size > bound)
    if cfg.get("ids_expired"):  # a round with ids_expire: ids expire after 10 s, and an
        # expired id comes back with a new producer id (at each restart, not only that one's)
        v.row("producer ids in output log", f"{len(pids)} (ids expire here: no bound)")
    else:
        recovering = pids & recovery_producer_ids(bootstrap)
        # A prefix changed by the operator is a new pool, with its own producer ids.
        bound *= 1 + cfg.get("prefixes", 0)
        v.row("producer ids in output log",
              f"{len(pids)} (bound {bound}"
              + (f", plus {len(recovering)} recovery id)" if recovering else ")"),
              problem=len(pids - recovering) > bound)
    v.row("wall time", f"{wall_s:.0f} s")
    for name, ids in (("lost", lost), ("duplicated", set(dups)), ("leaked", leaked)):
        if ids:
            v.notes.append(f"{name} ids (first 10): {sorted(ids)[:10]}")
    return v
