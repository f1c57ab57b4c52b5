"""Closing lingering transactions: fence transactional ids by re-initialising them.

InitProducerId on an id bumps its epoch, aborts the transaction it held open
and fences any zombie still using it. Only safe when no transaction on those
ids is waiting to be committed: the driver calls it after recovery in the
planning worker, for unused ids after a commit, and after an abort.
Runs on: the driver.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from ...wire import KafkaWire, ProducerIdentity, find_coordinators, init_producer_ids
from ...wire.admin_txns import list_open_transactions
from ..naming import TransactionalIdFactory

log = logging.getLogger(__name__)


def fence(wire: KafkaWire, transactional_ids: list[str], timeout_ms: int) -> dict[str, int]:
    """Fence ``transactional_ids``; returns the new epoch of each (0 for a never-used id)."""
    return {tid: who.epoch for tid, who in fence_identities(wire, transactional_ids,
                                                              timeout_ms).items()}


def fence_identities(
    wire: KafkaWire, transactional_ids: list[str], timeout_ms: int
) -> dict[str, ProducerIdentity]:
    """Fence ``transactional_ids``; returns each one's new (producer id, epoch)."""
    if not transactional_ids:
        return {}
    coordinators = find_coordinators(wire, transactional_ids)
    # Every coordinator at once (spread over connections), not one node after another.
    out = init_producer_ids(wire, coordinators, transactional_ids, timeout_ms)
    log.info("eoskafka: fenced %d transactional ids", len(out))
    return out


def fence_lingering(
    wire: KafkaWire, ids: TransactionalIdFactory, start: int, timeout_ms: int, *,
    known: Mapping[str, int] | None = None, window: int = 4,
) -> tuple[int, dict[str, ProducerIdentity]]:
    """Fence every id under ``ids``' prefix at index ``start`` or beyond, and the recovery
    id ``<prefix>-recovery``, that may hold a transaction open. Returns (first index past
    the last id found in use, epochs).

    Kafka lists its open transactions (ListTransactions): exactly those are fenced, however
    far past the pool and whatever gaps lie between them (a killed batch of 20 tasks whose
    tasks 10-14 never started leaves ids 15-19 open past a gap). Where it cannot (Tansu),
    ids are probed (:func:`probe_beyond`), and the recovery id is fenced blindly. Only after every
    decision was rolled forward: an id under the prefix that holds a decided transaction
    must be committed, never fenced.
    """
    recovery = f"{ids.prefix}-recovery"
    listed = list_open_transactions(wire, _id_pattern(ids.prefix))
    if listed is None:
        end, found = probe_beyond(wire, ids.for_task, start, timeout_ms, known=known,
                                  window=window)
        found.update(fence_identities(wire, [recovery], timeout_ms))
        return end, found
    indexes = {tid: ids.task_of(tid) for tid in listed}
    lingering = sorted(tid for tid, i in indexes.items()
                       if tid == recovery or (i is not None and i >= start))
    end = max([start, *(i + 1 for tid, i in indexes.items()
                        if i is not None and tid in lingering)])
    if lingering:
        log.warning("eoskafka: fencing %d open transaction(s) a stopped or killed run left "
                    "under prefix %s: %s", len(lingering), ids.prefix,
                    ", ".join(lingering[:10]) + (" ..." if len(lingering) > 10 else ""))
    return end, fence_identities(wire, lingering, timeout_ms)


def _id_pattern(prefix: str) -> str:
    """The ids under ``prefix`` (task ids and the recovery id) as a regular expression Kafka
    (Java) and Python read alike; the prefix's characters are [A-Za-z0-9._-]."""
    return "^" + prefix.replace(".", "\\.") + "-([0-9]+|recovery)$"


def probe_beyond(
    wire: KafkaWire, make_id: Callable[[int], str], start: int, timeout_ms: int, *,
    window: int = 4, known: Mapping[str, int] | None = None,
) -> tuple[int, dict[str, ProducerIdentity]]:
    """Fence ids ``make_id(start)``, ``make_id(start+1)``… until ``window`` in a row were unused.

    Each InitProducerId bumps an id's epoch by one. An id is unused when it comes back
    one above the epoch the driver last fenced it to (``known``, from the pool state),
    or at 0 when the driver never fenced it; a task's InitProducerId in between makes
    it higher. Without ``known``, the probe would take the epochs its own previous run
    left for use and grow the pool at every restart. Finds ids a killed batch with more
    tasks than the recorded pool may have left open.
    Returns (first index past the last used id, epochs).
    """
    known = known or {}
    found: dict[str, ProducerIdentity] = {}
    index, end = start, start
    while index < end + window:
        ids = [make_id(i) for i in range(index, end + window)]
        got = fence_identities(wire, ids, timeout_ms)
        found.update(got)
        for i in range(index, end + window):
            if got[make_id(i)].epoch > known.get(make_id(i), -1) + 1:
                end = i + 1
        index += len(ids)
    return end, found
