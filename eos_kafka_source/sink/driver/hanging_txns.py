"""A decided transaction whose marker will never reach one of its partitions (KIP-664).

Seen on Kafka 4.4 after coordinator and leader kills (the failover check): batch 1's
transaction was CompleteCommit at its coordinator and had its COMMIT marker in one
partition; the other partition still held it open (DescribeProducers: start offset 12,
coordinator epoch -1: no marker had ever reached it). The restarted driver waited in
:func:`.txn_log.read_transaction` for that marker without end, logging nothing, and the
partition's last stable offset stayed stuck for every read_committed consumer.

While a marker is missing, :func:`end_hanging` asks the coordinator first, then the
partition's leader (in that order: a coordinator says CompleteCommit only after every
marker is written, so a partition still open after that answer will stay open). A
hanging transaction is ended with an ABORT marker, as ``kafka-transactions.sh abort``
would; its records are then copied from the log by recovery, like any decided transaction
Kafka aborted (docs/design.md, invariant 10). A principal that may not write markers
(CLUSTER_ACTION) gets :class:`HangingTransactionError` naming Kafka's command instead.

Runs on: the driver (commit worker, planning worker's roll-forward).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...errors import EosKafkaError, HangingTransactionError
from ...wire import KafkaWire
from ...wire.hanging import Hanging, abort_hanging, coordinator_view, judge, open_producers
from ...wire.retry import LOST_NODE
from ..handoff import TxnHandoff

if TYPE_CHECKING:
    from .txn_log import PartitionInLog

log = logging.getLogger("eos_kafka_source.sink")


def end_hanging(wire: KafkaWire, handoff: TxnHandoff, pending: Sequence[PartitionInLog]) -> bool:
    """End ``handoff``'s transaction where it hangs in ``pending`` (partitions with no marker
    yet). True when an ABORT marker was written (read the log again); False when nothing
    hangs, or it cannot be told now (asked again later). Raises
    :class:`HangingTransactionError` when it hangs and eoskafka may not end it."""
    tid = handoff.transactional_id
    try:
        view = coordinator_view(wire, tid)
        producers = open_producers(wire, [(p.topic, p.partition) for p in pending])
    except (EosKafkaError, *LOST_NODE) as exc:
        log.info("eoskafka: %s: markers missing in %d partition(s); could not ask whether "
                 "they hang: %s", tid, len(pending), exc)
        return False
    if producers is None:
        return False  # no DescribeProducers (Tansu): the wait goes on
    now_ms = int(time.time() * 1000)
    hung = [h for part in pending for p in producers.get((part.topic, part.partition), [])
            if p.producer_id == handoff.producer_id and p.start_offset == part.first
            and (h := judge(p, tid, view, now_ms=now_ms)) is not None]
    if not hung:
        return False
    refused: list[Hanging] = []
    for h in hung:
        try:
            ended = abort_hanging(wire, h)
        except (EosKafkaError, *LOST_NODE) as exc:
            log.warning("eoskafka: %s: hanging transaction %s; could not end it now: %s",
                        handoff.describe(), h.describe(), exc)
            return False
        if ended:
            log.warning("eoskafka: %s: hanging transaction %s; ended it with an ABORT marker: "
                        "its records are copied from the log", handoff.describe(),
                        h.describe())
        else:
            refused.append(h)
    if refused:
        bootstrap = ",".join(wire.config.bootstrap_servers)
        raise HangingTransactionError(
            f"{handoff.describe()}: a hanging transaction (its coordinator ended it, but no "
            "marker reached these partitions and none will; their last stable offset is "
            "stuck): " + "; ".join(h.describe() for h in refused)
            + ". eoskafka may not write the marker (CLUSTER_ACTION on the cluster). End it "
            "with Kafka's tool: " + " && ".join(h.command(bootstrap) for h in refused)
            + "; then restart the query: it copies those records from the log (the decision "
            "is kept)")
    return True
