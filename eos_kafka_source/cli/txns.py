"""``eoskafka txns``: a sink's decision log, its id pool, and the open transactions on its topics.

Exit code 1 when a decided batch is not done (its transactions may not all be
committed), a partition holds an open transaction (records with no marker) or a hanging
one, or the decision log records a loss; 0 otherwise; 2 on a usage or connection error; 3
when nothing was found but some partitions could not be asked (a broker down: they are
named, the others checked). A running query always has young open transactions and, for
milliseconds, an undone batch: ``--max-open-age S`` counts only those older than S seconds,
hanging ones too (for alerting on a running query, docs/operations.md "What to alert on");
``--lost-within S`` counts only losses decided in the last S seconds (so an alert clears
once it has been seen). Nothing is counted from a moment's view: an undone batch's age is
its decision's, read with it, and whatever is stale is read again before it counts (a
batch done since, a transaction whose marker has landed since, are not).

``--json`` document (field names are stable; new fields may be added)::

    version          1
    checkpoint       the location given, or null
    decision_log     <checkpoint>/eoskafka, or null
    pool             null, or {prefix, size, owner, clean, fenced_epochs: {id: epoch}}
    batches          one per decision kept (the last 100), oldest first:
        batch_id, state ("done" | "undone"),
        decision_state             decided | done | lost | recovering (sink/decisions/states.py)
        decided_at, done_at        epoch seconds (float); done_at null while undone
        commit_seconds             done_at - decided_at, or null
        transactions               hand-offs with an open transaction in the decision
        transactions_committed     transactions - lost when done; null while undone
        transactions_lost          len(lost) when done; null while undone
        records, bytes             written by the batch's transactions
        partitions                 [{topic, partition, records}]
        lost                       descriptions of lost transactions (strings)
        handoffs                   [{transactional_id, producer_id, epoch, task_partition,
                                     attempt, records, bytes}]
    lineage          the query id the log serves (null for a log from before lineages)
    undone           batch ids decided but not finished, of any lineage
    undone_lineages  the lineages those belong to
    topics           topics checked on the broker ([] when no broker was given)
    partitions       [{topic, partition, log_start, last_stable, high_watermark, lso_lag,
                       open: [{producer_id, producer_epoch, transactional_id, first_offset,
                               last_offset, records, batches}]}]
    open_transactions  number of open transactions found
    hanging          open transactions no coordinator will end (KIP-664, as
                     kafka-transactions.sh find-hanging): [{topic, partition, producer_id,
                     producer_epoch, transactional_id, start_offset, why, command}], command
                     being Kafka's own that ends it
    hanging_transactions  len(hanging); each hanging one has last_write_age_s
    unasked          what could not be asked (a partition and why); non-empty: exit 3
                     unless something else makes it 1
    stale_undone     undone batch ids counted against --max-open-age (all without it)
    stale_open_transactions  open transactions counted against --max-open-age (all
                     without it); each open transaction has first_timestamp_ms and age_s
    lost_batches     batch ids whose decision records a loss (within --lost-within if given)
    ok               false when the exit code is 1
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from ..errors import EosKafkaError, NotAuthorizedError
from ..wire import KafkaWire, fetch_bounds, require_topics
from ..wire.hanging import Verdict, find_hanging
from ..wire.retry import LOST_NODE
from . import _common as c
from ._scan import PartitionState, scan_headers

HELP = "show a sink's decision log, id pool and open transactions"
EPILOG = """\
examples:
  eoskafka txns --checkpoint /chk/orders
  eoskafka txns --checkpoint s3://bucket/chk/orders -b kafka:9092 --topic orders --json
  eoskafka txns -b kafka:9092 --topic orders          # open transactions only

With a broker but no --topic, the topics are those the decision log's hand-offs
wrote to. Open transactions are found by reading each partition's raw log from
the last stable offset (LSO) to the high watermark, looking at batch headers:
a producer with transactional records and no COMMIT/ABORT marker after them
holds the LSO back. Close them with `eoskafka fence` (on a stopped query).
An open transaction whose coordinator does not hold that partition (or older than
any transaction may last) is HANGING: no coordinator will end it; the command that
does (kafka-transactions.sh abort) is printed.

For alerting on a running query (a cron job or a sidecar):
  eoskafka txns --checkpoint /chk/orders -b kafka:9092 --max-open-age 600 --lost-within 900

An open transaction's age counts from its first record's timestamp (its write time,
unless the written rows carry their own timestamp column); an undone batch's from
its decision.

exit status: 0 nothing to report, 1 an undone batch, an open or hanging transaction
(older than --max-open-age when given) or a recorded loss (within --lost-within when
given), 2 error, 3 incomplete (partitions that could not be asked are named)
"""
_SHOWN = 8  # fenced epochs listed in the text output


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("txns", help=HELP, description=HELP + ".", epilog=EPILOG,
                              parents=parents, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", metavar="PATH",
                   help="the query's checkpointLocation (or decisionLogLocation): path or URI")
    p.add_argument("--topic", "-t", action="append", default=[], metavar="T",
                   help="a topic to check for open transactions (repeatable)")
    p.add_argument("--max-open-age", type=float, metavar="S", default=None,
                   help="count only open transactions and undone batches older than S seconds "
                        "(default: all of them)")
    p.add_argument("--lost-within", type=float, metavar="S", default=None,
                   help="count only losses decided in the last S seconds (default: every loss "
                        "the decision log keeps)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not args.checkpoint and not args.topic:
        raise c.UsageError("give --checkpoint PATH, --topic T (with a broker), or both")
    for name in ("max_open_age", "lost_within"):
        if getattr(args, name) is not None and getattr(args, name) < 0:
            raise c.UsageError(f"--{name.replace('_', '-')} must be >= 0 seconds")
    now = time.time()
    config = c.client_config(args, required=bool(args.topic))
    doc: dict[str, Any] = {"checkpoint": args.checkpoint, "decision_log": None, "pool": None,
                           "batches": [], "undone": []}
    pid_names: dict[int, str] = {}
    topics = list(dict.fromkeys(args.topic))
    decided_at: dict[int, float] = {}
    log = None
    if args.checkpoint:
        log = c.open_decision_log(args.checkpoint)
        doc["decision_log"] = log.location
        pool = log.pool()
        doc["pool"] = {"prefix": pool.prefix, "size": pool.size, "owner": pool.owner,
                       "clean": pool.clean,
                       "fenced_epochs": dict(sorted(pool.fenced_epochs.items()))}
        for batch_id in log.batch_ids():
            decision = log.get(batch_id)
            if decision is None:
                continue  # pruned while we listed
            doc["batches"].append(_batch_json(decision))
            for h in decision.handoffs:
                pid_names[h.producer_id] = h.transactional_id
                for topic, _, _ in h.partitions if not args.topic else ():
                    if topic not in topics:
                        topics.append(topic)
        # Unfinished decisions of every lineage (an older query's, a batch write's) count:
        # the next start rolls them forward.
        unfinished = log.unfinished()
        doc["undone"] = sorted({d.batch_id for d in unfinished})
        decided_at = {d.batch_id: d.decided_at for d in unfinished if d.decided_at}
        doc["lineage"] = log.lineage or None
        doc["undone_lineages"] = sorted({d.lineage for d in unfinished})
    doc["topics"], doc["partitions"], doc["unasked"] = [], [], []
    if config is not None and topics:
        doc["topics"] = topics
        with c.connect(config) as wire:
            _check_topics(wire, doc, topics, pid_names, now)
            _read_again(wire, doc, args.max_open_age, now)
    if log is not None and doc["undone"]:
        # An undone batch counts only while it is still undone when read again.
        still = {d.batch_id for d in log.unfinished()}
        doc["undone_now"] = [b for b in doc["undone"] if b in still]
    doc["open_transactions"] = sum(len(p["open"]) for p in doc["partitions"])
    doc.setdefault("hanging", [])
    _judge(doc, now, decided_at, max_open_age=args.max_open_age, lost_within=args.lost_within)
    doc.pop("undone_now", None)
    if args.json:
        c.emit_json(doc)
    else:
        _print(doc, broker_checked=config is not None)
    if not doc["ok"]:
        return c.EXIT_PROBLEM
    return c.EXIT_INCOMPLETE if doc["unasked"] else c.EXIT_OK


def _check_topics(wire: KafkaWire, doc: dict[str, Any], topics: list[str],
                  pid_names: dict[int, str], now: float) -> None:
    """Each partition's bounds and open transactions, then the hanging ones; a partition
    whose leader cannot be asked is named in ``unasked`` and the others go on."""
    for part in _partitions(wire, topics, doc["unasked"]):
        b = part.bounds
        try:
            scan = scan_headers(wire, part, b.last_stable, b.high_watermark)
        except NotAuthorizedError:
            raise
        except (EosKafkaError, *LOST_NODE) as exc:
            doc["unasked"].append(f"{part.topic}-{part.partition}: its log could not be read "
                                  f"({exc})")
            continue
        doc["partitions"].append({
            "topic": part.topic, "partition": part.partition,
            "log_start": b.log_start, "last_stable": b.last_stable,
            "high_watermark": b.high_watermark,
            "lso_lag": b.high_watermark - b.last_stable,
            "open": [t.to_json(pid_names.get(pid), now) for pid, t in sorted(scan.open.items())],
        })
    opened = [(p["topic"], p["partition"]) for p in doc["partitions"] if p["open"]]
    search = find_hanging(wire, opened, names=pid_names) if opened else None
    doc["hanging"] = [_hanging_json(h, wire.config, now) for h in search.hanging] \
        if search else []
    doc["unasked"] += search.unasked if search else []


def _partitions(wire: KafkaWire, topics: list[str], unasked: list[str]) -> list[PartitionState]:
    """Every partition of ``topics`` with its leader and Fetch bounds, one leader at a time: a
    partition without a leader, or whose leader cannot be asked, goes to ``unasked``."""
    info = require_topics(wire, topics)
    by_leader: dict[int, list[tuple[str, int]]] = {}
    for t in topics:
        for p, leader in sorted(info[t].leaders.items()):
            by_leader.setdefault(leader, []).append((t, p))
    out: list[PartitionState] = []
    for leader, tps in sorted(by_leader.items()):
        if leader < 0:
            unasked += [f"{t}-{p}: no leader" for t, p in tps]
            continue
        try:
            bounds = fetch_bounds(wire, dict.fromkeys(tps, leader))
        except NotAuthorizedError:
            raise
        except (EosKafkaError, *LOST_NODE) as exc:
            unasked += [f"{t}-{p}: its leader (broker {leader}) could not be asked ({exc})"
                        for t, p in tps]
            continue
        out += [PartitionState(t, p, leader, bounds[(t, p)]) for t, p in tps]
    return sorted(out, key=lambda s: s.tp)


def _read_again(wire: KafkaWire, doc: dict[str, Any], max_open_age: float | None,
                now: float) -> None:
    """Open transactions that would count, read again: one whose partition's last stable
    offset has since moved past its first offset has its marker now (a commit whose markers
    were in flight) and is marked ``ended_since``, not counted."""
    stale = [(p, o) for p in doc["partitions"] for o in p["open"]
             if max_open_age is None or o["age_s"] is None or o["age_s"] > max_open_age]
    if not stale:
        return
    tps = sorted({(p["topic"], p["partition"]) for p, _ in stale})
    fresh: dict[tuple[str, int], int] = {}
    for part in _partitions(wire, sorted({t for t, _ in tps}), []):
        if part.tp in tps:
            fresh[part.tp] = part.bounds.last_stable
    for p, o in stale:
        lso = fresh.get((p["topic"], p["partition"]))
        if lso is not None and lso > o["first_offset"]:
            o["ended_since"] = True


def _hanging_json(h: Verdict, config: Any, now: float) -> dict[str, Any]:
    p = h.producer
    return {"topic": p.topic, "partition": p.partition, "producer_id": p.producer_id,
            "producer_epoch": p.producer_epoch, "transactional_id": h.transactional_id,
            "start_offset": p.start_offset, "why": h.why,
            "last_write_age_s": round(max(0.0, now - p.last_timestamp_ms / 1000), 3),
            "command": h.command(",".join(config.bootstrap_servers))}


def _judge(doc: dict[str, Any], now: float, decided_at: dict[int, float], *,
           max_open_age: float | None, lost_within: float | None) -> None:
    """Fill the fields the exit code follows: what is stale, what was lost, ``ok``."""
    decided = {b["batch_id"]: b["decided_at"] for b in doc["batches"]} | decided_at
    still = set(doc.get("undone_now", doc["undone"]))

    def old(age: float | None) -> bool:  # an unknown age counts: better a false alarm
        return max_open_age is None or age is None or age > max_open_age

    doc["stale_undone"] = [
        b for b in doc["undone"] if b in still
        and old(None if decided.get(b) is None else now - decided[b])]
    doc["stale_open_transactions"] = sum(
        1 for p in doc["partitions"] for o in p["open"]
        if old(o["age_s"]) and not o.get("ended_since"))
    doc["hanging"] = [h for h in doc["hanging"] if old(h["last_write_age_s"])]
    doc["hanging_transactions"] = len(doc["hanging"])
    doc["lost_batches"] = [
        b["batch_id"] for b in doc["batches"]
        if (b["lost"] or b["decision_state"] == "lost")
        and (lost_within is None or not b["decided_at"] or now - b["decided_at"] <= lost_within)]
    doc["ok"] = not (doc["stale_undone"] or doc["stale_open_transactions"]
                     or doc["lost_batches"] or doc["hanging"])


def _batch_json(decision: Any) -> dict[str, Any]:
    handoffs = decision.handoffs
    partitions: dict[tuple[str, int], int] = {}
    for h in handoffs:
        for topic, partition, n in h.partitions:
            partitions[(topic, partition)] = partitions.get((topic, partition), 0) + n
    done = decision.done
    return {
        "batch_id": decision.batch_id,
        "state": "done" if done else "undone",
        "decision_state": decision.state.value,
        "decided_at": decision.decided_at or None,
        "done_at": decision.done_at,
        "commit_seconds": (round(decision.done_at - decision.decided_at, 6)
                           if done and decision.done_at and decision.decided_at else None),
        "transactions": len(handoffs),
        "transactions_committed": len(handoffs) - len(decision.lost) if done else None,
        "transactions_lost": len(decision.lost) if done else None,
        "records": sum(h.records for h in handoffs),
        "bytes": sum(h.bytes for h in handoffs),
        "partitions": [{"topic": t, "partition": p, "records": n}
                       for (t, p), n in sorted(partitions.items())],
        "lost": list(decision.lost),
        "handoffs": [{"transactional_id": h.transactional_id, "producer_id": h.producer_id,
                      "epoch": h.epoch, "task_partition": h.task_partition,
                      "attempt": h.attempt, "records": h.records, "bytes": h.bytes}
                     for h in handoffs],
    }


def _print(doc: dict[str, Any], *, broker_checked: bool) -> None:
    out = sys.stdout
    if doc["decision_log"]:
        pool = doc["pool"]
        out.write(f"decision log  {doc['decision_log']}\n")
        if pool["size"] or pool["prefix"]:
            fenced = list(pool["fenced_epochs"].items())
            epochs = ", ".join(f"{k}={v}" for k, v in fenced[:_SHOWN]) or "none"
            if len(fenced) > _SHOWN:
                epochs += f", ... ({len(fenced) - _SHOWN} more; --json lists all)"
            out.write(f"id pool       prefix {pool['prefix'] or '?'}, size {pool['size']}, "
                      f"{'clean' if pool['clean'] else 'NOT clean (last batch aborted)'}\n"
                      f"              fenced epochs: {epochs}\n")
        else:
            out.write("id pool       not recorded yet (the query has not started a batch)\n")
        out.write("\n")
        if doc["batches"]:
            rows = [[b["batch_id"], b["state"].upper() if b["state"] == "undone" else b["state"],
                     c.iso(b["decided_at"]),
                     "-" if b["commit_seconds"] is None else f"{b['commit_seconds']:.3f}s",
                     b["transactions"], "-" if b["transactions_lost"] is None
                     else b["transactions_lost"], b["records"], b["bytes"]]
                    for b in doc["batches"]]
            c.table(rows, ["batch", "state", "decided at (UTC)", "commit", "txns", "lost",
                           "records", "bytes"])
            for b in doc["batches"]:
                for entry in b["lost"]:
                    out.write(f"  batch {b['batch_id']} lost: {entry}\n")
        else:
            out.write("no decisions recorded\n")
        if doc["undone"]:
            out.write(f"\nUNDONE batches {doc['undone']}: decided, their transactions may not "
                      "all be committed. Restart the query: its driver rolls them forward "
                      "before any task starts. Do not fence this prefix until then.\n")
    if doc["partitions"]:
        out.write("\n")
        rows = []
        for p in doc["partitions"]:
            opens = [f"producer {o['producer_id']} epoch {o['producer_epoch']}"
                     + (f" ({o['transactional_id']})" if o["transactional_id"] else "")
                     + f": {o['records']} record(s) from offset {o['first_offset']}"
                     for o in p["open"]]
            note = "; ".join(opens) or ("-" if not p["lso_lag"] else
                                        "none (every transaction past the LSO has its marker)")
            rows.append([f"{p['topic']}-{p['partition']}", p["log_start"], p["last_stable"],
                         p["high_watermark"], note])
        c.table(rows, ["partition", "log start", "LSO", "high watermark", "open transactions"])
    elif doc["decision_log"] and not broker_checked:
        out.write("\n(no broker given: open transactions not checked; add -b HOST:PORT)\n")
    for h in doc["hanging"]:
        out.write(f"\nHANGING {h['topic']}-{h['partition']}: producer {h['producer_id']} epoch "
                  f"{h['producer_epoch']} ({h['transactional_id'] or 'no transactional id'}), "
                  f"open from offset {h['start_offset']}: {h['why']}. End it with:\n"
                  f"  {h['command']}\n")
    for entry in doc["unasked"]:
        out.write(f"\nNOT ASKED {entry}\n")
    if doc["ok"] and doc["unasked"]:
        out.write(f"\nINCOMPLETE: {len(doc['unasked'])} partition(s) or broker(s) could not be "
                  "asked (named above); nothing to report in the rest\n")
    elif doc["ok"]:
        young = doc["open_transactions"] + len(doc["undone"])
        out.write("\nOK: " + (f"{young} open transaction(s) or undone batch(es), none older "
                               "than --max-open-age; no recent loss" if young else
                               "nothing open, no loss") + "\n")
    else:
        out.write(f"\nPROBLEM: {len(doc['stale_undone'])} undone batch(es), "
                  f"{doc['stale_open_transactions']} open transaction(s) "
                  f"({doc['hanging_transactions']} hanging), "
                  f"{len(doc['lost_batches'])} batch(es) with a loss "
                  f"{doc['lost_batches'] or ''}".rstrip() + "\n")
