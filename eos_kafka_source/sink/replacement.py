"""Replay helpers: which replay transactions may stand in for lost ones, and what a batch
write is told after an earlier write was finished for it.

A replacement is the same rows, not the same counts (invariant 10): both transactions'
records are read back from the log (:mod:`.txn_log`) and compared as multisets.
Runs on: the driver (commit worker).
"""

from __future__ import annotations

import time
from dataclasses import replace

from ..errors import PreviousWriteCompletedError
from ..wire import KafkaWire
from .decision_log import Decision
from .handoff import TxnHandoff
from .txn_log import read_transaction


def replacements(wire: KafkaWire, lost: list[TxnHandoff],
                  fresh: list[TxnHandoff]) -> list[TxnHandoff]:
    """The replay's hand-offs that can stand in for lost ones: exactly the same rows, read
    back from the log (the lost transaction's aborted records are still there, the replay's
    are open), in the same output partitions (invariant 10). Counts alone are not enough: a
    changed minPartitions or a non-deterministic query writes other rows with equal counts.
    Each replacement names the lost transaction it stands for and their common digest."""
    out: list[TxnHandoff] = []
    for gone in lost:
        for candidate in fresh:
            if not candidate.open or candidate.partitions != gone.partitions or any(
                    candidate is o for o in out):
                continue
            a = read_transaction(wire, gone, records=True)  # aborted: its marker is there
            b = read_transaction(wire, candidate, records=True, wait=False)  # still open
            if a.records is not None and a.records == b.records:
                out.append(replace(candidate, digest=a.digest(),
                                   extra={**candidate.extra, "replaces": txn_key(gone)}))
                break
    return out


def txn_key(h: TxnHandoff) -> str:
    """A transaction's identity: id, producer id and epoch. The epoch alone is not enough:
    an expired id comes back with a new producer id and the same low epochs."""
    return f"{h.transactional_id}/{h.producer_id}/{h.epoch}"


def previous_write_completed(location: str, decisions: list[Decision | None]
                              ) -> PreviousWriteCompletedError:
    done = [d for d in decisions if d is not None]
    records = sum(h.records for d in done for h in d.handoffs)
    lost = sum(len(d.lost) for d in done)
    topics = sorted({t for d in done for h in d.handoffs for t, _, _ in h.partitions})
    when = ", ".join(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(d.decided_at))
                     for d in done)
    return PreviousWriteCompletedError(
        f"an earlier batch write with decisionLogLocation {location} (decided {when}) was "
        "interrupted after its commit decision, and eoskafka has now finished it: its "
        f"{records} records to {', '.join(topics) or 'its topics'} are committed"
        + (f" ({lost} transaction(s) of it were lost, see `eoskafka txns`)" if lost else "")
        + ". If the write you are starting reruns that write, it is already complete: do not "
        "run it again. Otherwise run your write again (this is reported once)."
    )
