"""What the verdict adds on Apache Kafka: Kafka's own tools as a second judge.

- Kafka's Java console consumer with ``isolation.level=read_committed`` must return,
  record for record (partition, offset, value), what the marker oracle calls committed,
  on the output and on the input (on Tansu it is no oracle: docs/compatibility.md);
- ``kafka-transactions list`` must show no transaction still open and
  ``kafka-transactions find-hanging`` nothing hanging, on every node;
- LSO == high watermark on every partition once Kafka's asynchronous markers are
  written (on Kafka a lag is never a quirk);
- coordinator kills that landed during a commit are counted (the soak's target);
- losses the driver reported (``EOSKAFKA_TRANSACTION_LOST``, a driver kept down past
  the transaction timeout) are counted with the records they name: a loss they cover
  is a *documented* loss, outside the guarantee (docs/guarantee.md "The transaction timeout is a
  budget"), reported as such and never as a pass.
"""

from __future__ import annotations

import re
import time
from typing import Any

from oracle import committed_view

from eos_kafka_source import wire as kwire
from eos_kafka_source.apache_kafka import KafkaCluster, KafkaTools

from .kafka_faults import coordinator_kills_in_commit, wire_for
from .verdict import Verdict

_LOST = re.compile(r"transaction (\S+) \(producer (\d+), epoch (\d+)\) of task \d+ attempt \d+: "
                   r"(\d+) records")
_QUICK_MS, _PATIENT_MS = 5000, 30000


def settle(bootstrap: str, topics: list[str], timeout_s: float = 120) -> list[str]:
    """Wait until LSO == high watermark on every partition of ``topics`` (Kafka writes the
    markers of a finished transaction asynchronously); what still lags at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        with wire_for(bootstrap) as w:
            info = kwire.require_topics(w, topics)
            leaders = {(t, p): n for t in topics for p, n in info[t].leaders.items()}
            bounds = kwire.fetch_bounds(w, leaders)
        lag = [f"{t}-{p}: LSO {b.last_stable} < high watermark {b.high_watermark}"
               for (t, p), b in sorted(bounds.items()) if b.last_stable < b.high_watermark]
        if not lag or time.monotonic() > deadline:
            return lag
        time.sleep(0.5)


def java_disagreement(bootstrap: str, topic: str) -> tuple[int, int, list[str]]:
    """(records per the marker oracle, records per Kafka's Java read_committed consumer,
    the first differences)."""
    ours = sorted((p, r.offset, r.value or b"")
                  for p, view in committed_view(bootstrap, topic).items() for r in view.committed)
    tools = KafkaTools(bootstrap)
    java = tools.consume(topic, idle_timeout_ms=_QUICK_MS, max_messages=len(ours) + 1)
    if len(java) < len(ours):  # a slow group join: one patient read tells slow from missing
        java = tools.consume(topic, idle_timeout_ms=_PATIENT_MS, max_messages=len(ours) + 1)
    theirs = [(r.partition, r.offset, r.value) for r in java]
    if theirs == ours:
        return len(ours), len(theirs), []
    only_ours = sorted(set(ours) - set(theirs))[:3]
    only_java = sorted(set(theirs) - set(ours))[:3]
    return len(ours), len(theirs), [f"only in the oracle {only_ours}", f"only in Java {only_java}"]


#: EOSKAFKA_TRANSACTION_LOST also fails a batch whose transactions were fenced before any
#: was committed: nothing lost (the batch replays), so those reports name no loss.
_NO_LOSS = ("nothing was committed", "nothing was written")


def reported_losses(errors: list[str]) -> tuple[int, int]:
    """(transactions, records) named lost by EOSKAFKA_TRANSACTION_LOST reports (the query's
    failures and the driver's log), each transaction (id, producer, epoch) counted once
    however often it was reported; reports of a batch that committed nothing are skipped."""
    named: dict[tuple[str, int, int], int] = {}
    for error in errors:
        if "EOSKAFKA_TRANSACTION_LOST" not in error or any(s in error for s in _NO_LOSS):
            continue
        for tid, producer, epoch, records in _LOST.findall(error):
            named[(tid, int(producer), int(epoch))] = int(records)
    return len(named), sum(named.values())


def judge_kafka(v: Verdict, kafka: KafkaCluster, cfg: dict[str, Any],
                faults: list[dict[str, Any]], lag: list[str], lost_reports: list[str],
                losses: int) -> str:
    """Adds Kafka's rows to ``v``; returns the result: "exactly once", "documented loss"
    (every lost record covered by the driver's own loss reports) or "failed"."""
    bootstrap = kafka.bootstrap_servers
    v.row("coordinator kills during a commit (landed)", coordinator_kills_in_commit(faults))
    v.row("LSO < HW after the markers settled (Kafka)", len(lag), problem=bool(lag))
    v.notes.extend(lag)
    for topic in (cfg["output"], cfg["input"]):
        try:
            ours, java, diff = java_disagreement(bootstrap, topic)
        except Exception as exc:  # a check that cannot run is a problem, never a pass
            v.row(f"Java read_committed consumer = oracle ({topic})", f"NOT CHECKED: {exc}",
                  problem=True)
            continue
        v.row(f"Java read_committed consumer = oracle ({topic})",
              f"{'yes' if not diff else 'NO'} ({java} records / oracle {ours})",
              problem=bool(diff))
        v.notes.extend(f"{topic}: {d}" for d in diff)
    tools = KafkaTools(bootstrap)
    try:
        still_open = tools.open_transactions()
        hanging = [row for n in kafka.nodes for row in tools.hanging_transactions(n.node_id)]
    except Exception as exc:
        v.row("kafka-transactions list / find-hanging", f"NOT CHECKED: {exc}", problem=True)
        still_open, hanging = [], []
    else:
        v.row("kafka-transactions: open", len(still_open), problem=bool(still_open))
        v.row("kafka-transactions find-hanging (all nodes)", len(hanging),
              problem=bool(hanging))
    v.notes.extend(f"open: {row}" for row in still_open[:10])
    v.notes.extend(f"hanging: {row}" for row in hanging[:10])
    txns, records = reported_losses(lost_reports)
    v.row("EOSKAFKA_TRANSACTION_LOST reports", f"{len(lost_reports)} ({txns} transactions, "
          f"{records} records named: what the log no longer held to copy)")
    return classify(v, losses, records)


def classify(v: Verdict, losses: int, records: int) -> str:
    """"exactly once"; "documented loss" when the only problem is lost records, no more than
    the ``records`` the driver reported lost; else "failed"."""
    if v.ok:
        return "exactly once"
    only_losses = all(p.startswith("losses:") for p in v.problems)
    if only_losses and 0 < losses <= records:
        v.notes.append(f"DOCUMENTED LOSS: the {losses} lost records are within the {records} "
                       "the driver reported lost (EOSKAFKA_TRANSACTION_LOST): the guarantee's "
                       "stated limit (a decided batch's transactions expired while the driver "
                       "was down past kafka.transaction.timeout.ms), not a pass")
        return "documented loss"
    return "failed"
