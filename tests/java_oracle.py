"""The second, independent oracle: Kafka's own Java console consumer with read_committed.

On Apache Kafka, what the marker-resolving oracle (``tests/oracle.py``) calls committed
must be exactly what Kafka's Java client returns under ``isolation.level=read_committed``:
same partitions, offsets and values. On Tansu the Java consumer is no oracle (Tansu
leaves Fetch's aborted-transactions list empty, so every read_committed client returns
aborted records: docs/compatibility.md), so there the check is not made.
"""

from __future__ import annotations

from eos_kafka_source.apache_kafka import KafkaTools
from tests.brokers import ON_TANSU
from tests.oracle import committed_view


def assert_java_agrees(bootstrap: str, topic: str) -> int:
    """Assert the Java read_committed consumer and the marker oracle agree record for record;
    returns the number of committed records (0 checks made on Tansu: returns -1)."""
    if ON_TANSU:
        return -1
    ours = sorted((p, r.offset, r.value or b"")
                  for p, view in committed_view(bootstrap, topic).items() for r in view.committed)
    java = KafkaTools(bootstrap).consume_expecting(topic, len(ours))
    theirs = [(r.partition, r.offset, r.value) for r in java]
    missing = sorted(set(ours) - set(theirs))[:5]
    extra = sorted(set(theirs) - set(ours))[:5]
    assert theirs == ours, (
        f"{topic}: Kafka's Java read_committed consumer returned {len(theirs)} records, the "
        f"marker oracle {len(ours)}; only in the oracle: {missing}; only in Java: {extra}"
    )
    return len(ours)
