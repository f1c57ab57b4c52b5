"""A batch write is never replayed: its errors say what happened, whether rows are at risk,
and to rerun the write. Before, they said "batch None ... will be
replayed on restart" and "the restarted query rolls it forward"."""

from __future__ import annotations

import time

import pytest

from eos_kafka_source.errors import TimeoutError_
from eos_kafka_source.sink.driver.committer import FinishReport, outcome_unknown
from eos_kafka_source.sink.driver.refusals import raise_if_too_long
from eos_kafka_source.sink.handoff import TxnHandoff

STREAMING_WORDS = ("replay", "restart", "query", "batch None", "batch 0")


def _handoff() -> TxnHandoff:
    return TxnHandoff(transactional_id="w-0", producer_id=7, epoch=1, txn_protocol=1,
                      open=True, partitions=(("t", 0, 5),), records=5)


def test_an_unknown_outcome_of_a_batch_write_says_not_to_rerun_blindly() -> None:
    report = FinishReport(unknown=[(_handoff(), "NOT_COORDINATOR")])
    message = str(outcome_unknown(None, report, "committing", streaming=False))
    assert "] the batch write:" in message
    assert "may be committed" in message and "Do not rerun this write" in message
    assert not any(word in message for word in STREAMING_WORDS), message
    streaming = str(outcome_unknown(3, report, "committing"))
    assert "batch 3" in streaming and "restarted query" in streaming


def test_a_batch_write_past_the_timeout_says_to_rerun_it() -> None:
    with pytest.raises(TimeoutError_) as err:
        raise_if_too_long(0, [(_handoff(), "PRODUCER_FENCED")], timeout_ms=1000,
                          planned_at=time.time() - 5, streaming=False)
    message = str(err.value)
    assert "nothing was written and no row is at risk" in message
    assert "then rerun it" in message
    assert not any(word in message for word in STREAMING_WORDS), message
