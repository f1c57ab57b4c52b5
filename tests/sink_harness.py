"""The sink without Spark: TaskWriter plays the tasks, DriverProtocol the driver.

Shared by the protocol tests (tests/broker/test_sink_protocol.py) and the Apache Kafka
failure tests (coordinator failover, transaction timeout).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.errors import ConnectionDroppedError
from eos_kafka_source.faults import InjectedFault
from eos_kafka_source.sink.decisions.log import DecisionLog
from eos_kafka_source.sink.driver import committer
from eos_kafka_source.sink.driver.protocol import DriverProtocol
from eos_kafka_source.sink.handoff import TxnHandoff
from eos_kafka_source.sink.naming import TransactionalIdFactory, fingerprint
from eos_kafka_source.sink.task.context import WriterContext
from eos_kafka_source.sink.task.writer import TaskWriter
from eos_kafka_source.wire import KafkaWire
from eos_kafka_source.wire import txn as txn_module
from tests.oracle import committed_view


class Harness:
    """A sink for one topic: tasks write, the driver commits; all against the broker."""

    def __init__(self, bootstrap: str, topic: str, prefix: str, log_dir: Path | str | None,
                 claim: bool = False, timeout_ms: int = 60000, *,
                 checkpoint: Path | str | None = None, lineage: str = "query-0") -> None:
        """``checkpoint``: the query's checkpoint location (default: ``log_dir``, the
        decision log beside it); ``lineage``: Spark's query id (new after a reset)."""
        self.cfg = ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap})
        self.bootstrap, self.topic, self.timeout_ms = bootstrap, topic, timeout_ms
        self.ids = TransactionalIdFactory(prefix)
        self.lineage = lineage
        self.log = DecisionLog(str(log_dir), lineage) if log_dir else None
        self.driver = DriverProtocol(
            self.ids, self.log, self.wire, owner=fingerprint(str(checkpoint or log_dir)),
            transaction_timeout_ms=timeout_ms, claim_topic=topic if claim else None,
            lineage=lineage, spark_checkpoint=str(checkpoint) if checkpoint else None,
        )

    def wire(self) -> KafkaWire:
        return KafkaWire(self.cfg)

    def task(self, partition: int, values: list[bytes]) -> TxnHandoff:
        with self.wire() as wire:
            writer = self.open_task(wire, partition)
            writer.write_batch(pa.RecordBatch.from_pydict({"value": values}))
            return writer.handoff()

    def open_task(self, wire: KafkaWire, partition: int) -> TaskWriter:
        writer = TaskWriter(wire, transactional_id=self.ids.for_task(partition), topic=self.topic,
                            transaction_timeout_ms=self.timeout_ms, batch_records=50,
                            context=WriterContext(task_partition=partition,
                                                  lineage=self.lineage or ""))
        writer.open()
        return writer

    def committed(self, *, settle: bool = True) -> Counter[bytes]:
        """Committed values; with ``settle``, once no transaction is open on the topic.

        On Kafka, EndTxn answers once PrepareCommit is in the coordinator's log and writes
        the markers after: a committed transaction's records become visible a moment later.
        """
        deadline = time.monotonic() + 60
        while True:
            view = committed_view(self.bootstrap, self.topic)
            if not settle or not any(pv.open for pv in view.values()):
                return Counter(v for pv in view.values() for v in pv.committed_values)
            assert time.monotonic() < deadline, "transactions still open after 60 s"
            time.sleep(0.1)

    def aborted(self) -> Counter[bytes]:
        view = committed_view(self.bootstrap, self.topic)
        return Counter(v for pv in view.values() for v in pv.aborted_values)


def spark_checkpoint(path: Path, query_id: str = "query-0") -> str:
    """``path`` as Spark leaves a checkpoint before a batch's writer is planned: its
    ``metadata`` names the query (the sink refuses a checkpoint it does not see there)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "metadata").write_text(json.dumps({"id": query_id}) + "\n")
    return str(path)


def await_path(path: Path, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def vals(tag: str, n: int = 30) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n)]


def open_transactions_of(bootstrap: str, prefix: str) -> list[dict[str, str]]:
    """Kafka's own view (kafka-transactions list, one JVM run) of the ids under ``prefix``
    whose transaction has not ended."""
    from eos_kafka_source.apache_kafka import KafkaTools
    from eos_kafka_source.apache_kafka.tools import OPEN_STATES

    return [row for row in KafkaTools(bootstrap).transactions()
            if row.get("TransactionalId", "").startswith(prefix)
            and row.get("TransactionState") in OPEN_STATES]


def assert_once_on_kafka(h: Harness, expected: Counter[bytes]) -> None:
    """Every expected record exactly once, by the marker-resolving oracle and (on Kafka) by
    Kafka's Java read_committed consumer; no transaction of the sink's ids left open (on
    Kafka, by kafka-transactions too)."""
    from tests.brokers import ON_TANSU
    from tests.java_oracle import assert_java_agrees
    from tests.oracle import assert_no_open_transactions

    assert h.committed() == expected
    if ON_TANSU:
        assert_no_open_transactions(h.bootstrap, h.topic)
        return
    assert assert_java_agrees(h.bootstrap, h.topic) == sum(expected.values())
    assert open_transactions_of(h.bootstrap, h.ids.prefix) == []
    assert_no_open_transactions(h.bootstrap, h.topic)


class Background:
    """``call`` in a thread; :meth:`outcome` joins it, fails the test if it is still running,
    and returns the exception it raised (None if it returned)."""

    def __init__(self, call: Callable[[], object]) -> None:
        self.error: BaseException | None = None

        def run() -> None:
            try:
                call()
            except BaseException as exc:  # noqa: BLE001 - handed to the test by outcome()
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def outcome(self, timeout_s: float = 60) -> BaseException | None:
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), f"the background call did not end in {timeout_s}s"
        return self.error


def lose_task_1(sink: Harness, faults, tmp_path: Path, tasks: int = 2,  # noqa: ANN001
                tag: str = "b0t", then: str = "") -> list[TxnHandoff]:
    """Batch 0 of ``tasks`` tasks is decided, then a zombie fences task 1's transaction
    before its EndTxn: Kafka aborts it after the decision, the others commit, and commit()
    copies task 1's records from the log in a recovery transaction (docs/design.md,
    invariant 10). With ``then`` (a fault spec, armed once the zombie has struck), commit()
    is expected to fail with that injected fault instead. The zombie's own transaction is
    ended (as the next batch's task 1 would). Returns the batch's hand-offs (each task
    wrote ``vals(f"{tag}{p}")``)."""
    from eos_kafka_source.sink.driver.fencing import fence

    first = [sink.task(p, vals(f"{tag}{p}")) for p in range(tasks)]
    gate = tmp_path / "gate"
    faults(f"commit.after_decision=block:{gate}")
    committing = Background(lambda: sink.driver.commit(0, first, tasks=tasks))
    await_path(gate.with_suffix(".started"))
    sink.task(1, vals("zombie"))  # the zombie's InitProducerId aborts task 1's transaction
    faults(then)
    gate.with_suffix(".release").touch()
    error = committing.outcome()
    faults("")
    if then:
        assert error is not None and "injected fault" in str(error), error
    else:
        assert error is None, error
    with sink.wire() as wire:
        fence(wire, [sink.ids.for_task(1)], sink.timeout_ms)
    return first


@contextmanager
def crash_between_endtxns() -> Iterator[None]:
    """The driver dies between a batch's EndTxn commits: the first transaction committed,
    the others still open, and commit() raises InjectedFault. The driver sends a batch's
    EndTxns in one round, so this state is made here (a crash mid-round leaves it), not by a
    fault point in the driver; one commit only."""
    real = committer._finish
    crashed: list[bool] = []

    def first_then_crash(wire, pending, commit, deadline, known=None):  # noqa: ANN001, ANN202
        if not commit or len(pending) < 2 or crashed:
            return real(wire, pending, commit, deadline, known)
        crashed.append(True)
        real(wire, pending[:1], commit, deadline, known)
        raise InjectedFault("between two EndTxn commits: injected fault")

    committer._finish = first_then_crash  # type: ignore[assignment]
    try:
        yield
    finally:
        committer._finish = real  # type: ignore[assignment]


@contextmanager
def losing_endtxn_answers(verb: str = "commit", rounds: int | None = 1) -> Iterator[None]:
    """The answers to the first ``rounds`` EndTxn ``verb`` rounds (None: every one) are
    lost: the broker received and answered the requests, then the connection dropped before
    the driver read them, so their outcome is unknown."""
    sent = txn_module.request_spread
    lost: list[str] = []

    def losing(wire, calls, what, *args, **kwargs):  # noqa: ANN001, ANN202
        answers = sent(wire, calls, what, *args, **kwargs)
        if not what.startswith(f"EndTxn {verb}") or (rounds is not None and len(lost) >= rounds):
            return answers
        lost.append(what)
        wire.close()
        return [ConnectionDroppedError(f"{what}: the connection dropped")] * len(calls)

    txn_module.request_spread = losing  # type: ignore[assignment]
    try:
        yield
    finally:
        txn_module.request_spread = sent  # type: ignore[assignment]
