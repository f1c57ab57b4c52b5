"""The two write policies (sink/driver/write_policy.py) and the keeper the driver picks,
without a broker: what each answers where the driver used to test a flag."""

from __future__ import annotations

from pathlib import Path

from eos_kafka_source.sink.decisions.log import DecisionLog
from eos_kafka_source.sink.driver.logged import LoggedDecisions
from eos_kafka_source.sink.driver.protocol import DriverProtocol
from eos_kafka_source.sink.driver.unlogged import NoDecisionLog
from eos_kafka_source.sink.driver.write_policy import BatchWrite, StreamingQuery
from eos_kafka_source.sink.handoff import TxnHandoff
from eos_kafka_source.sink.naming import TransactionalIdFactory

STREAMING_WORDS = ("replay", "restart", "batch None")


def _handoff(topic: str = "out") -> TxnHandoff:
    return TxnHandoff("p-0", 7, 1, 1, True, ((topic, 0, 5),), records=5)


def _driver(log: DecisionLog | None, *, streaming: bool = True,
            claim_topic: str | None = "out") -> DriverProtocol:
    return DriverProtocol(TransactionalIdFactory("p"), log, lambda: None,  # type: ignore
                          owner="o", transaction_timeout_ms=60_000, lineage="q-1",
                          streaming=streaming, claim_topic=claim_topic)


def test_the_driver_composes_its_keeper_and_policy(tmp_path: Path) -> None:
    logged = _driver(DecisionLog(str(tmp_path)))
    assert isinstance(logged.keeper, LoggedDecisions) and isinstance(logged.policy,
                                                                      StreamingQuery)
    unlogged = _driver(None, streaming=False)
    assert isinstance(unlogged.keeper, NoDecisionLog) and isinstance(unlogged.policy,
                                                                     BatchWrite)
    assert unlogged.policy.mark_topic == "out"  # marks default to the claim topic


def test_the_commit_deadline_is_shared_by_every_role(tmp_path: Path) -> None:
    driver = _driver(DecisionLog(str(tmp_path)))
    assert driver.commit_deadline_s == 75.0  # 60 s timeout + the coordinator's check
    driver.commit_deadline_s = 2.0
    assert isinstance(driver.keeper, LoggedDecisions)
    assert driver.keeper.outcomes.recovery().deadline_s == 2.0


def test_only_a_streaming_query_binds_its_log_and_marks_batches(tmp_path: Path) -> None:
    log = DecisionLog(str(tmp_path))
    streaming, batch = StreamingQuery("out", None), BatchWrite("out")
    assert streaming.binds_log and not batch.binds_log
    assert streaming.claim_scope("q-1", log) == ("q-1", log)
    assert batch.claim_scope("write-1", log) == (None, None)
    assert streaming.marks_batch(3, "q-1") and not streaming.marks_batch(None, "q-1")
    assert not streaming.marks_batch(3, "") and not StreamingQuery(None, None).marks_batch(3, "q")
    assert not batch.marks_batch(3, "write-1")
    assert streaming.clears_marks and not StreamingQuery(None, None).clears_marks
    assert batch.tells_finished and not streaming.tells_finished


def test_identity_is_read_only_where_spark_keeps_offsets(tmp_path: Path) -> None:
    handoffs = [_handoff()]
    assert StreamingQuery("out", None).identify(0, handoffs, None) is None
    assert BatchWrite("out").identify(0, handoffs, None) is None
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text('v1\n{}\n{"t":{"0":5}}\n')
    identity = StreamingQuery("out", str(tmp_path)).identify(0, handoffs, None)
    assert identity == {"offsets": [{"t": {"0": 5}}], "records": 5}


def test_the_marks_topic_without_a_log_is_the_option_else_the_first_written() -> None:
    assert BatchWrite("opt").mark_topic_of([_handoff("col")]) == "opt"
    assert BatchWrite(None).mark_topic_of([_handoff("col")]) == "col"
    assert BatchWrite(None).mark_topic_of([]) is None


def test_each_policy_words_a_loss_for_what_its_user_can_do() -> None:
    lost = ["out-0: 5 records"]
    batch = str(BatchWrite("out").lost_error("batch 0", lost, 1000))
    assert "the batch write" in batch and "Do not rerun the whole write" in batch
    assert not any(word in batch for word in STREAMING_WORDS)
    streaming = str(StreamingQuery("out", None).lost_error("batch 7", lost, 1000))
    assert "] batch 7:" in streaming and "the query goes on" in streaming
    none_batch = str(BatchWrite("out").none_committed(None, "fenced"))
    assert "rerun the write" in none_batch and "batch None" not in none_batch
    none_streaming = str(StreamingQuery("out", None).none_committed(7, "fenced"))
    assert "batch 7" in none_streaming and "replayed on restart" in none_streaming
