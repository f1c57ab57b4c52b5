"""ProducePipeline's reaction to Produce answers, scripted (no broker): which batches it
re-sends, in what order, and what it counts as written. What Kafka answers when a leader
really moves is in tests/broker/test_leaders_move.py."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from eos_kafka_source.errors import ConnectionDroppedError, KafkaProtocolError, TimeoutError_
from eos_kafka_source.sink.task.produce import Batch, ProducePipeline

TP = ("t", 0)
#: A code, or (code, base offset), or an exception to raise.
Answer = Callable[[int, dict[tuple[str, int], int]], int | tuple[int, int] | BaseException]


class ScriptedWire:
    """Records every Produce (node, {tp: base sequence}); ``answer`` gives each one's code."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.sent: list[tuple[int, dict[tuple[str, int], int]]] = []
        self.dropped: list[int] = []

    def version(self, _cls: Any) -> int:
        return 9

    def send(self, node: int, request: Any, what: str) -> tuple[int, Any]:
        seqs = {(t.name, p.index): int.from_bytes(p.records[53:57], "big", signed=True)
                for t in request.topic_data for p in t.partition_data}
        self.sent.append((node, seqs))
        return node, (len(self.sent) - 1, seqs)

    def wait(self, pending: list[tuple[int, Any]], what: str, timeout_ms: int | None = None):
        out = []
        for node, (_, seqs) in pending:
            code = self.answer(node, seqs)
            if isinstance(code, BaseException):
                raise code
            code, offset = code if isinstance(code, tuple) else (code, -1)
            out.append(SimpleNamespace(responses=[SimpleNamespace(name="t", partition_responses=[
                SimpleNamespace(index=p, error_code=code, error_message=None, base_offset=offset)
                for (_, p) in seqs])]))
        return out

    def flush(self) -> None:
        pass

    def drop_connection(self, node: int) -> None:
        self.dropped.append(node)


def _batch(seq: int, count: int = 10) -> Batch:
    data = bytearray(61)  # a v2 batch header: base sequence at bytes 53..56
    data[53:57] = seq.to_bytes(4, "big")
    return Batch(TP, seq, count, bytes(data))


def _pipeline(wire: ScriptedWire, leader: list[int]) -> ProducePipeline:
    return ProducePipeline(wire, "tid", leader=lambda tp: leader[0],
                           refresh=lambda deadline: None, delivery_timeout_s=5)


def test_batches_after_a_failed_one_are_resent_in_sequence_order() -> None:
    """Three batches in flight to a leader that lost leadership: the first gets
    NOT_LEADER_OR_FOLLOWER, the others OUT_OF_ORDER_SEQUENCE (they follow a gap). All three go
    to the new leader, one at a time, lowest sequence first."""
    leader = [1]

    def answer(node: int, seqs: dict) -> int:
        if node == 1:
            return 6 if seqs[TP] == 0 else 45
        return 0

    wire = ScriptedWire(answer)
    pipeline = _pipeline(wire, leader)
    pipeline.send(1, [_batch(0)])
    pipeline.send(1, [_batch(10)])
    leader[0] = 2
    pipeline.send(1, [_batch(20)])  # sent before the pipeline learnt the leader moved
    pipeline.flush()
    assert [(n, s[TP]) for n, s in wire.sent] == [(1, 0), (1, 10), (1, 20),
                                                  (2, 0), (2, 10), (2, 20)]
    assert pipeline.acked == {TP: 30} and pipeline.retries == 3


def test_duplicate_on_a_resend_counts_as_written() -> None:
    """NOT_ENOUGH_REPLICAS_AFTER_APPEND: the leader has the batch; the re-send is a duplicate,
    which is success, counted once."""
    calls = iter([20, 46])
    wire = ScriptedWire(lambda node, seqs: next(calls))
    pipeline = _pipeline(wire, [1])
    pipeline.send(1, [_batch(0)])
    pipeline.flush()
    assert pipeline.acked == {TP: 10} and len(wire.sent) == 2


def test_a_dropped_connection_resends_and_forgets_the_connection() -> None:
    calls = iter([ConnectionDroppedError("gone"), TimeoutError_("slow"), 0])
    wire = ScriptedWire(lambda node, seqs: next(calls))
    pipeline = _pipeline(wire, [1])
    pipeline.send(1, [_batch(0)])
    pipeline.flush()
    assert pipeline.acked == {TP: 10} and wire.dropped == [1, 1] and len(wire.sent) == 3


def test_out_of_order_on_the_next_expected_batch_fails_the_task() -> None:
    wire = ScriptedWire(lambda node, seqs: 45)
    pipeline = _pipeline(wire, [1])
    with pytest.raises(KafkaProtocolError, match="OUT_OF_ORDER_SEQUENCE_NUMBER.*lost records"):
        pipeline.send(1, [_batch(0)])
        pipeline.flush()


def test_fenced_fails_at_once_without_resending() -> None:
    wire = ScriptedWire(lambda node, seqs: 90)
    pipeline = _pipeline(wire, [1])
    with pytest.raises(KafkaProtocolError, match="PRODUCER_FENCED"):
        pipeline.send(1, [_batch(0)])
        pipeline.flush()
    assert len(wire.sent) == 1


def test_gives_up_after_the_delivery_timeout_naming_the_partition() -> None:
    wire = ScriptedWire(lambda node, seqs: 19)  # NOT_ENOUGH_REPLICAS for ever
    pipeline = ProducePipeline(wire, "tid", leader=lambda tp: 1, refresh=lambda d: None,
                               delivery_timeout_s=0.3)
    with pytest.raises(TimeoutError_, match=r"t-0 .*NOT_ENOUGH_REPLICAS.*min.insync.replicas"):
        pipeline.send(1, [_batch(0)])
        pipeline.flush()


def test_first_offset_is_the_first_batch_s_even_when_it_is_acknowledged_last() -> None:
    """The first batch fails over to a new leader and is acknowledged after the second: the
    first offset is still the first batch's (sequence order, not answer order)."""
    leader = [1]

    def answer(node: int, seqs: dict) -> int | tuple[int, int]:
        if node == 1:
            return 6 if seqs[TP] == 0 else 45
        return 0, 1000 + seqs[TP]  # the new leader: offset follows the sequence

    wire = ScriptedWire(answer)
    pipeline = _pipeline(wire, leader)
    pipeline.send(1, [_batch(0)])
    pipeline.send(1, [_batch(10)])
    leader[0] = 2
    pipeline.flush()
    assert pipeline.first_offsets == {TP: 1000}


def test_a_duplicate_answer_gives_no_first_offset() -> None:
    """The first batch's only answer is DUPLICATE_SEQUENCE_NUMBER (no usable offset, Tansu):
    the partition has no first offset rather than the second batch's."""
    answers = iter([13, (46, -1), (0, 77)])

    def answer(node: int, seqs: dict) -> int | tuple[int, int]:
        return next(answers)

    wire = ScriptedWire(answer)
    pipeline = _pipeline(wire, [1])
    pipeline.send(1, [_batch(0)])
    pipeline.flush()
    pipeline.send(1, [_batch(10)])
    pipeline.flush()
    assert pipeline.acked == {TP: 20}
    assert pipeline.first_offsets == {}


def test_first_offset_of_a_plain_acknowledgement() -> None:
    wire = ScriptedWire(lambda node, seqs: (0, 5 + seqs[TP]))
    pipeline = _pipeline(wire, [1])
    pipeline.send(1, [_batch(0)])
    pipeline.send(1, [_batch(10)])
    pipeline.flush()
    assert pipeline.first_offsets == {TP: 5}
