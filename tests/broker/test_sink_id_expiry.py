"""Transactional ids that expire while the driver is down.

Kafka forgets a transactional id idle longer than ``transactional.id.expiration.ms`` (7 days
by default; 2 s on this test broker). A driver that died after its EndTxns but before
marking the decision done, restarted after that, gets INVALID_PRODUCER_ID_MAPPING when it
rolls the decision forward. Before, that was a loss, and the replay of the batch wrote its
rows a second time; now the log is read: the COMMIT markers are there, the batch is done.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from eos_kafka_source.apache_kafka import KafkaCluster, KafkaTools
from tests.kafka_clusters import kafka_for_tests
from tests.kafka_helpers import create_topic
from tests.sink_harness import Harness, assert_once_on_kafka, vals
from tests.waiting import until

pytestmark = [pytest.mark.kafka_only, pytest.mark.faults]


@pytest.fixture(scope="module")
def kafka_forgetful() -> Iterator[KafkaCluster]:
    with kafka_for_tests(1, {
            "transactional.id.expiration.ms": "2000",
            "transaction.remove.expired.transaction.cleanup.interval.ms": "500"}) as cluster:
        yield cluster


def test_ids_expired_after_the_commit_are_read_as_committed(
        kafka_forgetful: KafkaCluster, unique: str, tmp_path: Path, faults) -> None:
    bootstrap = kafka_forgetful.bootstrap_servers
    create_topic(bootstrap, unique, partitions=2)
    sink = Harness(bootstrap, unique, unique, tmp_path / "ckpt")
    sink.driver.prepare(new_run=True)
    handoffs = [sink.task(p, vals(f"t{p}")) for p in range(2)]
    faults("commit.before_done=raise")  # every EndTxn answered NONE; the driver dies here
    with pytest.raises(RuntimeError, match="injected fault"):
        sink.driver.commit(0, handoffs, tasks=2)
    faults("")
    tools = KafkaTools(bootstrap)
    ids = {h.transactional_id for h in handoffs}
    until(lambda: {r.get("TransactionalId") for r in tools.transactions()},
          lambda known: not (known & ids), what="Kafka to expire the transactional ids",
          timeout_s=60)
    restarted = Harness(bootstrap, unique, unique, tmp_path / "ckpt")
    restarted.driver.prepare(new_run=True)  # EndTxn: INVALID_PRODUCER_ID_MAPPING; the log
    decision = restarted.log.get(0)
    assert decision.done and not decision.lost and not decision.lost_handoffs
    restarted.driver.commit(0, [restarted.task(p, vals(f"t{p}")) for p in range(2)], tasks=2)
    assert_once_on_kafka(restarted, Counter(vals("t0") + vals("t1")))
