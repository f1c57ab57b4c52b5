"""Kafka's authorization codes become EOSKAFKA_NOT_AUTHORIZED naming resource, operation and
the kafka-acls line (eos_kafka_source/acls.py); broker behaviour: tests/broker/test_acls.py."""

from __future__ import annotations

import pytest

from eos_kafka_source.acls import remember_client
from eos_kafka_source.errors import NotAuthorizedError, for_code
from eos_kafka_source.wire.retry import retriable

CASES = [
    (53, "InitProducerId for transactional id 'q.p-0'", None,
     "may not WRITE transactional id 'q.p-0'",
     "--operation Write --transactional-id q.p --resource-pattern-type prefixed"),
    (53, "EndTxn commit q-12 (producer 4 epoch 2)", None,
     "may not WRITE transactional id 'q-12'",
     "--operation Write --transactional-id q --resource-pattern-type prefixed"),
    (30, "OffsetCommit q.eoskafka-claim out-0", None, "may not READ group 'q.eoskafka-claim'",
     "--operation Read --group q --resource-pattern-type prefixed"),
    (29, "OffsetCommit q.eoskafka-claim my-out-0", None, "may not READ topic 'my-out'",
     "--operation Read --topic my-out  "),
    (29, "Produce to ('my-out', 3) by q-1", None, "may not WRITE topic 'my-out'",
     "--operation Write --topic my-out  "),
    (29, "Produce to my-out-3 by idempotent producer", None, "may not WRITE topic 'my-out'",
     "--operation Write --topic my-out  "),
    (29, "Fetch in-1", None, "may not READ topic 'in'", "--operation Read --topic in  "),
    (29, "DescribeConfigs out", None, "may not DESCRIBE_CONFIGS topic 'out'",
     "--operation DescribeConfigs --topic out  "),
    (31, "DescribeConfigs broker 2", None, "may not DESCRIBE_CONFIGS the cluster",
     "--operation DescribeConfigs --cluster  "),
    (30, "OffsetFetch etl", None, "may not DESCRIBE group 'etl'",
     "--operation Describe --group etl  "),
    (31, "InitProducerId (idempotent)", None, "may not IDEMPOTENT_WRITE the cluster",
     "--operation IdempotentWrite --cluster  "),
    (31, "InitProducerId (idempotent: ...)", ("TOPIC", "out"), "may not WRITE topic 'out'",
     "--operation Write --topic out  "),
]


@pytest.mark.parametrize(("code", "context", "resource", "says", "acl"), CASES)
def test_refusal_names_resource_operation_and_acl(code, context, resource, says, acl) -> None:
    remember_client("etl", "b1:9092,b2:9092")
    exc = for_code(code)(context, resource) if resource else for_code(code)(context)
    assert isinstance(exc, NotAuthorizedError) and not retriable(exc)
    first = str(exc).splitlines()[0]
    assert first.startswith(f"[EOSKAFKA_NOT_AUTHORIZED] User:etl {says}")
    assert ("kafka-acls.sh --bootstrap-server b1:9092,b2:9092 --command-config admin.properties"
            " --add --allow-principal User:etl ") in first
    assert acl in first
    assert f"Kafka error {code} " in first and "docs/acls.md" in first


def test_add_partitions_refused_for_one_topic_names_that_topic() -> None:
    """Kafka answers the partitions it did not try OPERATION_NOT_ATTEMPTED (55) when another
    topic of the request is refused (a dead-letter topic the principal may write beside an
    output topic it may not): the refusal is the error, naming the refused topic."""
    from types import SimpleNamespace as NS

    from eos_kafka_source.wire.txn import _answered, add_partitions_error

    def topic(name: str, code: int) -> NS:
        return NS(name=name, results_by_partition=[NS(partition_index=0,
                                                      partition_error_code=code)])

    resp = NS(results_by_topic_v3_and_below=[topic("q.dlq", 55), topic("q.out", 29)])
    assert add_partitions_error(resp) == 29
    assert _answered(resp, 29) == [("q.out", 0)]
    remember_client("etl", "b1:9092")
    first = str(for_code(29)(f"AddPartitionsToTxn q-0 {_answered(resp, 29)}")).splitlines()[0]
    assert "may not WRITE topic 'q.out'" in first
    busy = NS(results_by_topic_v3_and_below=[topic("a", 55), topic("b", 51)])
    assert add_partitions_error(busy) == 51  # retried, before "not attempted"
