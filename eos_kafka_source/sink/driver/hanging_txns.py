"""A decided transaction whose marker will never reach one of its partitions (KIP-664).

Seen on Kafka 4.4 after coordinator and leader kills (the failover check): batch 1's
transaction was CompleteCommit at its coordinator and had its COMMIT marker in one
partition; the other partition still held it open (DescribeProducers: start offset 12,
coordinator epoch -1: no marker had ever reached it). The restarted driver waited in
:func:`.txn_log.read_transaction` for that marker without end, logging nothing, and the
partition's last stable offset stayed stuck for every read_committed consumer.

While a marker is missing, :func:`end_hanging` judges the partition exactly as Kafka's
``kafka-transactions.sh find-hanging`` does (:mod:`eos_kafka_source.wire.hanging`): hanging
only when no coordinator lists it for the transaction *and* its producer's last write there
is older than the brokers' ``transaction.max.timeout.ms``. Until then it says once in the
log which transaction and partition wait, and why, and waits on the coordinator's own
retries (docs/design.md, invariant 18): a commit whose marker is slow (a leader failover)
is never aborted by eoskafka. A hanging transaction is ended with an ABORT marker, as
``kafka-transactions.sh abort`` would; its records are then copied from the log by
recovery, like any decided transaction Kafka aborted (invariant 10). A principal that may
not write markers (CLUSTER_ACTION) gets :class:`HangingTransactionError` naming Kafka's
command instead.

Runs on: the driver (commit worker, planning worker's roll-forward).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from ...errors import EosKafkaError, HangingTransactionError
from ...faults import fault_point
from ...wire import KafkaWire
from ...wire.hanging import (
    Verdict,
    abort_hanging,
    coordinator_view,
    describes_producers,
    judge,
    max_transaction_timeout_ms,
    open_producers,
)
from ...wire.retry import LOST_NODE
from ..handoff import TxnHandoff

log = logging.getLogger("eos_kafka_source.sink")


#: (transaction, partition) already said to be waiting on its coordinator (said once a
#: process; bounded: cleared when it grows past :data:`_SAID_MAX`).
_SAID: set[tuple[str, str, int]] = set()
_SAID_MAX = 10_000


def end_hanging(wire: KafkaWire, handoff: TxnHandoff,
                pending: Sequence[tuple[str, int, int]]) -> bool:
    """End ``handoff``'s transaction where it hangs in ``pending`` (topic, partition, first
    offset: partitions with no marker yet). True when an ABORT marker was written (read
    the log again); False when nothing hangs, or it cannot be told now (asked again
    later). Raises :class:`HangingTransactionError` when it hangs and eoskafka may not
    end it."""
    tid = handoff.transactional_id
    if not describes_producers(wire):
        return False  # Tansu: nothing can be judged, the wait goes on
    try:
        limit = max_transaction_timeout_ms(wire)
        # The coordinator first, then the leaders: a partition still open after its
        # coordinator stopped listing it will stay open (wire/hanging.py).
        view = coordinator_view(wire, tid)
        producers = open_producers(wire, [(t, n) for t, n, _ in pending])
    except (EosKafkaError, *LOST_NODE) as exc:
        log.info("eoskafka: %s: markers missing in %d partition(s); could not ask whether "
                 "they hang: %s", tid, len(pending), exc)
        return False
    if producers is None:
        return False  # no DescribeProducers (Tansu): the wait goes on
    now_ms = int(time.time() * 1000)
    verdicts = [judge(p, tid, view, now_ms=now_ms, max_timeout_ms=limit)
                for t, n, first in pending for p in producers.get((t, n), [])
                if p.producer_id == handoff.producer_id and p.start_offset == first]
    for v in verdicts:
        if not v.hanging:
            _say_waiting(handoff, v)
    hung = [v for v in verdicts if v.hanging]
    if not hung:
        return False
    refused: list[Verdict] = []
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
            fault_point("hanging.after_abort")
        else:
            refused.append(h)
    if refused:
        bootstrap = ",".join(wire.config.bootstrap_servers)
        raise HangingTransactionError(
            f"{handoff.describe()}: a hanging transaction, as kafka-transactions.sh "
            "find-hanging judges one (no marker in these partitions, their last stable offset "
            "stuck behind it): " + "; ".join(h.describe() for h in refused)
            + ". eoskafka may not write the marker (CLUSTER_ACTION on the cluster). End it "
            "with Kafka's tool: " + " && ".join(h.command(bootstrap) for h in refused)
            + "; then restart the query: it copies those records from the log (the decision "
            "is kept)")
    return True


def _say_waiting(handoff: TxnHandoff, verdict: Verdict) -> None:
    """Once per transaction and partition: its marker is late, and eoskafka waits."""
    p = verdict.producer
    key = (f"{handoff.transactional_id}/{handoff.producer_id}/{handoff.epoch}", p.topic,
           p.partition)
    if key in _SAID:
        return
    if len(_SAID) >= _SAID_MAX:
        _SAID.clear()
    _SAID.add(key)
    log.warning("eoskafka: %s: no marker yet in %s-%d (open from offset %d); not hanging as "
                "kafka-transactions.sh find-hanging judges it: %s. Waiting on its "
                "coordinator's retries", handoff.describe(), p.topic, p.partition,
                p.start_offset, verdict.why)
