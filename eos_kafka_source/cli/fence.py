"""``eoskafka fence`` (alias ``abort``): close lingering transactions of a sink's id prefix.

Sends InitProducerId for ``<prefix>-0`` .. ``<prefix>-<N-1>``: each id's epoch is
bumped, the transaction it held open is aborted and any zombie producer using
it is fenced (the same step the sink's driver takes at query start, see
``eos_kafka_source.sink.driver.fencing``). ``--probe`` goes on past the pool like the
driver does: every open transaction under the prefix that Kafka lists (ListTransactions),
past any gap, and ``<prefix>-recovery``; on a broker without that request (Tansu), ids
past the pool until ``--probe-window`` in a row were never used.
With ``--checkpoint`` the prefix and pool size come from the decision log, and
the command refuses while a decided batch is undone (fencing would abort
transactions that must be committed) unless ``--force``.

``--json`` document: ``version``, ``prefix``, ``pool_size``, ``dry_run``, ``probe``,
``ids`` (the pool ids), ``fenced`` ([{transactional_id, epoch}] in the pool, epoch 0 for
an id never used before; [] in a dry run), ``probed`` (the same for ids past the pool),
``used_beyond_pool`` (index past the last used probed id, or null), ``undone`` (batch ids
of the checkpoint's undone decisions), ``refused`` (bool).
Exit 0 done (or dry run), 1 refused (undone batches), 2 usage or connection error.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..sink.naming import TransactionalIdFactory
from . import _common as c

HELP = "close lingering transactions of a sink's transactional-id prefix"
EPILOG = """\
WARNING: fencing the ids of a RUNNING query aborts the transactions of its
in-flight batch. That is safe while its tasks are writing (the batch fails and
Spark replays it), but if it hits while the driver is committing a decided batch
those transactions are lost and the query fails loudly. Fence stopped queries.

examples:
  eoskafka fence --checkpoint /chk/orders --dry-run           # list the ids; changes nothing
  eoskafka fence -b kafka:9092 --checkpoint /chk/orders       # fence them
  eoskafka fence -b kafka:9092 --checkpoint /chk/orders --probe   # and open ids past the pool
  eoskafka fence -b kafka:9092 --prefix eoskafka-1f2e3d4c5b6a7980 --pool-size 8

Every form but --dry-run fences: --probe widens what is fenced, it does not look only.

A query's prefix is its transactionalIdPrefix option, or eoskafka-<hash of its
checkpoint location> (see `eoskafka txns --checkpoint PATH`).

exit status: 0 fenced (or dry run), 1 refused (undone batches), 2 error
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("fence", aliases=["abort"], help=HELP, description=HELP + ".",
                              epilog=EPILOG, parents=parents,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_argument_group("which ids (one of)")
    src.add_argument("--prefix", metavar="P", help="transactional-id prefix of the sink")
    src.add_argument("--pool-size", type=int, metavar="N",
                     help="number of ids with --prefix: P-0 .. P-(N-1)")
    src.add_argument("--checkpoint", metavar="PATH",
                     help="read prefix and pool size from the query's decision log")
    p.add_argument("--probe", action="store_true",
                   help="also fence (abort) open transactions past the pool, listed by Kafka (on "
                        "a broker that cannot list them, ids until --probe-window unused in a "
                        "row); it changes things: --dry-run is the look that does not")
    p.add_argument("--probe-window", type=int, default=4, metavar="K",
                   help="unused ids in a row that end probing (default 4)")
    p.add_argument("--dry-run", "-n", action="store_true",
                   help="list the ids that would be fenced; change nothing, connect to nothing")
    p.add_argument("--force", action="store_true",
                   help="with --checkpoint: fence even while batches are undone (their "
                        "uncommitted transactions are aborted: those records are LOST)")
    p.add_argument("--transaction-timeout-ms", type=int, default=60000, metavar="MS",
                   help="timeout sent with InitProducerId (default 60000)")
    p.set_defaults(run=run)


def _ids_from_checkpoint(location: str) -> tuple[str, int, list[int]]:
    log = c.open_decision_log(location)
    pool = log.pool()
    prefix, size = pool.prefix, pool.size
    decisions = [d for d in (log.get(b) for b in log.batch_ids()) if d is not None]
    for d in decisions:
        for h in d.handoffs:
            head, _, tail = h.transactional_id.rpartition("-")
            if tail.isdigit() and (not prefix or head == prefix):
                prefix = prefix or head
                size = max(size, int(tail) + 1)
    if not prefix or size <= 0:
        raise c.UsageError(f"the decision log at {log.location} records no id pool yet; "
                           "pass --prefix and --pool-size")
    return prefix, size, sorted({d.batch_id for d in log.unfinished()})


def run(args: argparse.Namespace) -> int:
    if args.checkpoint and (args.prefix or args.pool_size is not None):
        raise c.UsageError("give either --checkpoint or --prefix with --pool-size, not both")
    undone: list[int] = []
    if args.checkpoint:
        prefix, size, undone = _ids_from_checkpoint(args.checkpoint)
    elif args.prefix and args.pool_size is not None:
        prefix, size = args.prefix, args.pool_size
    else:
        raise c.UsageError("give --prefix P with --pool-size N, or --checkpoint PATH")
    if size < 0 or args.probe_window < 1:
        raise c.UsageError("--pool-size must be >= 0 and --probe-window >= 1")
    try:
        factory = TransactionalIdFactory(prefix)
    except ValueError:
        raise c.UsageError(f"{prefix!r} is not a valid transactional-id prefix "
                           "(letters, digits, '.', '_', '-')") from None
    ids = factory.pool(size)
    refused = bool(undone) and not args.force
    doc: dict[str, Any] = {"prefix": prefix, "pool_size": size, "dry_run": args.dry_run,
                           "probe": args.probe, "ids": ids, "fenced": [], "probed": [],
                           "used_beyond_pool": None, "undone": undone, "refused": refused}
    if not refused and not args.dry_run:
        from ..sink.driver.fencing import fence, fence_lingering

        config = c.client_config(args)
        with c.connect(config) as wire:
            epochs = fence(wire, ids, args.transaction_timeout_ms)
            doc["fenced"] = [{"transactional_id": t, "epoch": epochs[t]} for t in ids]
            if args.probe:
                end, more = fence_lingering(wire, factory, size, args.transaction_timeout_ms,
                                            window=args.probe_window)
                order = sorted(more, key=lambda t: (factory.task_of(t) is None,
                                                    factory.task_of(t) or 0, t))
                doc["probed"] = [{"transactional_id": t, "epoch": more[t].epoch} for t in order]
                doc["used_beyond_pool"] = end
    if args.json:
        c.emit_json(doc)
    else:
        _print(doc, args.probe_window)
    return c.EXIT_PROBLEM if refused else c.EXIT_OK


def _print(doc: dict[str, Any], window: int) -> None:
    out, prefix, size = sys.stdout, doc["prefix"], doc["pool_size"]
    if doc["undone"]:
        out.write(f"undone batches {doc['undone']}: their decided transactions are not all "
                  "committed yet.\n")
    if doc["refused"]:
        out.write("REFUSED: fencing now would abort transactions the query decided to commit. "
                  "Restart the query (its driver rolls them forward), or pass --force to "
                  "abort them and lose their records.\n")
        return
    if doc["dry_run"]:
        out.write(f"dry run: would fence {size} id(s) of prefix {prefix}:\n")
        for tid in doc["ids"]:
            out.write(f"  {tid}\n")
        if doc["probe"]:
            out.write(f"and probe {prefix}-{size}, {prefix}-{size + 1}, ... until {window} in a "
                      "row were never used (not done in a dry run: probing fences)\n")
        return
    probed = f", {len(doc['probed'])} probed past it" if doc["probe"] else ""
    out.write(f"fenced {len(doc['fenced']) + len(doc['probed'])} id(s) of prefix {prefix} "
              f"({size} in the pool{probed}); any transaction they held open is aborted:\n")
    rows = [[f["transactional_id"], f["epoch"], "new id" if f["epoch"] == 0 else ""]
            for f in doc["fenced"] + doc["probed"]]
    if rows:
        c.table(rows, ["transactional id", "epoch", ""])
    if doc["probe"]:
        used = doc["used_beyond_pool"]
        out.write(f"past the pool, ids up to {prefix}-{used - 1} were in use\n" if used > size
                  else "past the pool, no id was in use\n")
