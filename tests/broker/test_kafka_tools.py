"""Kafka's own tools as the tests and the chaos harness drive them
(eos_kafka_source/apache_kafka/tools.py), on Apache Kafka: what they find is what is there."""

from __future__ import annotations

import pytest

from eos_kafka_source.apache_kafka import KafkaTools
from eos_kafka_source.apache_kafka.tools import OpenOnPartition
from tests.kafka_helpers import TxnWriter, create_topic

pytestmark = [pytest.mark.kafka_only]


def test_open_on_partitions_finds_where_an_open_transaction_starts(bootstrap, unique) -> None:
    """describe-producers names the open transaction's producer and first offset (what
    `kafka-transactions abort` takes); an ended one is not listed; once aborted, none is."""
    topic = f"{unique}-t"
    create_topic(bootstrap, topic, partitions=2)
    tools = KafkaTools(bootstrap)
    with TxnWriter(bootstrap, f"{unique}-ended") as ended, \
            TxnWriter(bootstrap, f"{unique}-open") as open_:
        ended.committed(topic, [b"c0", b"c1"], partition=1)  # offsets 0, 1 and its marker 2
        open_.begin_open(topic, [b"o0", b"o1"], partition=1)
        found = list(tools.open_on_partitions(topic, range(2)))
        assert found == [OpenOnPartition(1, open_.producer_id, 3)]
        tools.abort_transaction(topic, 1, 3)  # the partition's marker only
        assert list(tools.open_on_partitions(topic, range(2))) == []
        open_.abort_open()  # its coordinator still holds it: never leave it open there
    assert [t for t in tools.open_transactions() if t["TransactionalId"] == f"{unique}-open"] \
        == []
