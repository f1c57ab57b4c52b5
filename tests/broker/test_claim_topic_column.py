"""A sink writing a ``topic`` column (no ``topic`` option) claims its
transactional-id prefix too (invariant 7), at its first commit, on a topic it wrote."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from eos_kafka_source.errors import IdPrefixClashError
from eos_kafka_source.sink.driver.protocol import DriverProtocol
from eos_kafka_source.sink.naming import fingerprint
from tests.kafka_helpers import create_topic
from tests.sink_harness import Harness, assert_once_on_kafka, vals


def _topic_column_query(bootstrap: str, topic: str, prefix: str, log_dir: Path,
                        lineage: str) -> Harness:
    """A Harness whose driver is set up as spark_writer sets it up for a ``topic`` column:
    no claim topic; the hand-offs name the topics written."""
    h = Harness(bootstrap, topic, prefix, log_dir, lineage=lineage)
    h.driver = DriverProtocol(h.ids, h.log, h.wire, owner=fingerprint(str(log_dir)),
                              transaction_timeout_ms=h.timeout_ms, claim_from_handoffs=True,
                              lineage=lineage)
    return h


def test_a_topic_column_query_claims_its_prefix(bootstrap: str, unique: str,
                                                tmp_path: Path) -> None:
    create_topic(bootstrap, unique, partitions=1)
    prefix = f"{unique}-shared"
    first = _topic_column_query(bootstrap, unique, prefix, tmp_path / "q1", "query-1")
    first.driver.prepare(new_run=True)
    first.driver.commit(0, [first.task(0, vals("first", 3))], tasks=1)
    assert first.log.pool().claim_topic == unique
    first.driver.prepare(new_run=True)  # a later run claims before its tasks: its own claim

    second = _topic_column_query(bootstrap, unique, prefix, tmp_path / "q2", "query-2")
    second.driver.prepare(new_run=True)  # nothing written yet: no topic to claim on
    handoffs = [second.task(0, vals("second", 3))]
    try:
        with pytest.raises(IdPrefixClashError, match="already used by another query"):
            second.driver.commit(0, handoffs, tasks=1)
    finally:
        second.driver.abort(0, handoffs, tasks=1)  # what Spark does after commit() raised
    assert_once_on_kafka(first, Counter(vals("first", 3)))


def test_a_kill_between_the_claim_and_remembering_it(bootstrap: str, unique: str,
                                                     tmp_path: Path, faults) -> None:  # noqa: ANN001
    """Crash point ``commit.after_claim``: the claim is on the broker, the pool state does
    not know its topic yet. Nothing was decided; the replay's commit claims again (its own
    claim) and commits."""
    create_topic(bootstrap, unique, partitions=1)
    h = _topic_column_query(bootstrap, unique, f"{unique}-p", tmp_path / "q", "query-1")
    h.driver.prepare(new_run=True)
    handoffs = [h.task(0, vals("lost", 3))]
    faults("commit.after_claim=raise")
    with pytest.raises(RuntimeError, match="injected fault"):
        h.driver.commit(0, handoffs, tasks=1)
    faults("")
    h.driver.abort(0, handoffs, tasks=1)
    assert h.log.pool().claim_topic == ""
    h.driver.prepare(new_run=True)
    h.driver.commit(0, [h.task(0, vals("replay", 3))], tasks=1)
    assert h.log.pool().claim_topic == unique
    assert_once_on_kafka(h, Counter(vals("replay", 3)))
