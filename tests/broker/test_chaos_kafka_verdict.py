"""The Kafka chaos verdict's own judges against a real Kafka: they pass a topic whose
transactions all ended, and fail one holding an open transaction (never a silent pass)."""

from __future__ import annotations

import json
import uuid

import pytest

import tests.chaos  # noqa: F401 (puts tests/ on the path for the chaos modules)
from tests.chaos.kafka_verdict import java_disagreement, judge_kafka, settle
from tests.chaos.verdict import Verdict
from tests.kafka_helpers import TxnWriter, create_topic

pytestmark = pytest.mark.kafka_only


def _values(first: int, n: int) -> list[bytes]:
    return [json.dumps({"id": i}).encode() for i in range(first, first + n)]


def test_kafka_judges_pass_ended_transactions_and_fail_an_open_one(broker, bootstrap) -> None:
    topic = f"chaos-verdict-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 2)
    cfg = {"input": topic, "output": topic}
    # A long transaction timeout: the open transaction must outlive the Java tools' runs.
    with TxnWriter(bootstrap, f"{topic}-writer", transaction_timeout_ms=600_000) as writer:
        writer.committed(topic, _values(0, 10), partition=0)
        writer.aborted(topic, _values(10, 5), partition=1)
        writer.committed(topic, _values(15, 3), partition=1)
        assert settle(bootstrap, [topic]) == []
        assert java_disagreement(bootstrap, topic) == (13, 13, [])
        clean = Verdict()
        assert judge_kafka(clean, broker, cfg, [], [], [], 0) == "exactly once", clean.problems

        writer.begin_open(topic, _values(18, 4), partition=1)
        lag = settle(bootstrap, [topic], timeout_s=1)
        assert len(lag) == 1 and lag[0].startswith(f"{topic}-1: LSO")
        held = Verdict()
        assert judge_kafka(held, broker, cfg, [], lag, [], 0) == "failed"
        problems = " | ".join(held.problems)
        assert "LSO < HW after the markers settled (Kafka): 1" in problems
        assert "kafka-transactions: open: 1" in problems
    # TxnWriter's exit aborted the open transaction: nothing left for the session's check.
