"""Test data on a real broker, written with kafka-python's own KafkaProducer.

An independent client writes what our reader reads, so tests do not validate
eoskafka with itself. Topic admin goes through ``eos_kafka_source.wire``.

    with TxnWriter(bootstrap, f"{unique}-w") as w:
        w.committed(topic, [b"a", b"b"])
        w.aborted(topic, [b"x"])
        w.begin_open(topic, [b"pending"])   # aborted on exit unless commit_open()
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaTimeoutError
from kafka.producer.future import RecordMetadata

from eos_kafka_source import wire as kwire
from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.errors import KafkaProtocolError

#: One record's headers: (name, value) pairs (kafka-python refuses None values).
Headers = Sequence[tuple[str, bytes]]

#: Producer settings shared by every helper: no batching delay, fail fast on a dead broker.
_PRODUCER_DEFAULTS: dict[str, Any] = {
    "linger_ms": 0,
    "max_block_ms": 30000,
    "request_timeout_ms": 30000,
}


@contextmanager
def wire_for(bootstrap: str, **options: str) -> Iterator[kwire.KafkaWire]:
    """A KafkaWire for ``bootstrap`` (more ``kafka.*`` options by Java name), closed after."""
    config = ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap, **options})
    w = kwire.KafkaWire(config)
    try:
        yield w
    finally:
        w.close()


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None
) -> None:
    """Create ``name`` and wait until every partition's leader serves it.

    Metadata names a leader a moment before that broker knows it leads (KRaft propagates
    the change to each broker on its own): a Fetch then answers NOT_LEADER_OR_FOLLOWER.
    Tests that read at once wait for the leaders to answer (product reads retry instead).
    """
    with wire_for(bootstrap) as w:
        kwire.create_topic(w, name, partitions, config=config)
        leaders = {(name, p): n for p, n in kwire.fetch_metadata(w, [name])[name].leaders.items()}
        deadline = time.monotonic() + 30
        while True:
            try:
                kwire.fetch_bounds(w, leaders)
                return
            except KafkaProtocolError as exc:
                if exc.code not in (5, 6) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


def _send(
    producer: KafkaProducer,
    topic: str,
    values: Sequence[bytes | None],
    partition: int | None,
    keys: Sequence[bytes | None] | None,
    headers: Sequence[Headers] | None = None,
) -> list[RecordMetadata]:
    """Send, flush, and raise the first delivery error; returns each record's metadata."""
    for name, seq in (("keys", keys), ("headers", headers)):
        if seq is not None and len(seq) != len(values):
            raise ValueError(f"{name} and values must have the same length")
    futures = [
        producer.send(
            topic, value=v, partition=partition,
            key=None if keys is None else keys[i],
            headers=None if headers is None else list(headers[i]),
        )
        for i, v in enumerate(values)
    ]
    producer.flush()
    return [f.get(timeout=30) for f in futures]


def write_plain(
    bootstrap: str,
    topic: str,
    values: Sequence[bytes | None],
    partition: int | None = None,
    keys: Sequence[bytes | None] | None = None,
    *,
    headers: Sequence[Headers] | None = None,
    idempotent: bool = False,
) -> list[RecordMetadata]:
    """Non-transactional records (producer id -1 unless ``idempotent``)."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, enable_idempotence=idempotent, acks="all",
        **_PRODUCER_DEFAULTS,
    )  # fmt: skip
    try:
        return _send(producer, topic, values, partition, keys, headers)
    finally:
        producer.close(timeout=10)


class TxnWriter:
    """One transactional KafkaProducer; never leaves a transaction open.

    ``committed``/``aborted`` run a whole transaction; ``begin_open`` writes and
    flushes inside a transaction left open until ``commit_open``/``abort_open``.
    On exit an open transaction is aborted (``KafkaProducer.close()`` would leave
    it open, and nothing on Tansu ever times it out).
    """

    def __init__(
        self,
        bootstrap: str,
        transactional_id: str,
        *,
        end_timeout_ms: int = 30000,
        **producer_config: Any,
    ) -> None:
        self.bootstrap = bootstrap
        self.transactional_id = transactional_id
        self.end_timeout_ms = end_timeout_ms
        self._config = {**_PRODUCER_DEFAULTS, **producer_config}
        self._producer: KafkaProducer | None = None
        self.in_transaction = False

    # -- lifecycle -----------------------------------------------------------------------------

    def __enter__(self) -> TxnWriter:
        self._producer = KafkaProducer(
            bootstrap_servers=self.bootstrap, transactional_id=self.transactional_id,
            **self._config,
        )  # fmt: skip
        try:
            self._producer.init_transactions()
        except BaseException:
            self._producer.close(timeout=10)
            self._producer = None
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        producer, self._producer = self._producer, None
        if producer is None:
            return
        try:
            if self.in_transaction:
                try:
                    self._end(commit=False)
                    self.in_transaction = False
                except Exception:
                    pass  # fenced or broken: fence the id below, which aborts the transaction
        finally:
            producer.close(timeout=10)
        if self.in_transaction:
            self.in_transaction = False
            self._fence()

    def _fence(self) -> None:
        """InitProducerId on our id from a fresh producer: bumps the epoch, aborts the txn."""
        fencer = KafkaProducer(
            bootstrap_servers=self.bootstrap, transactional_id=self.transactional_id,
            **self._config,
        )  # fmt: skip
        try:
            fencer.init_transactions()
        finally:
            fencer.close(timeout=10)

    @property
    def producer(self) -> KafkaProducer:
        if self._producer is None:
            raise RuntimeError("TxnWriter is not open: use it as a context manager")
        return self._producer

    @property
    def producer_id(self) -> int:
        """The producer id InitProducerId gave (kafka-python exposes it only privately)."""
        return int(self.producer._transaction_manager.producer_id_and_epoch.producer_id)

    @property
    def producer_epoch(self) -> int:
        return int(self.producer._transaction_manager.producer_id_and_epoch.epoch)

    # -- transactions --------------------------------------------------------------------------

    def committed(
        self,
        topic: str,
        values: Sequence[bytes | None],
        partition: int | None = None,
        keys: Sequence[bytes | None] | None = None,
        *,
        headers: Sequence[Headers] | None = None,
    ) -> list[RecordMetadata]:
        """One committed transaction holding ``values``."""
        meta = self.begin_open(topic, values, partition, keys, headers=headers)
        self.commit_open()
        return meta

    def aborted(
        self,
        topic: str,
        values: Sequence[bytes | None],
        partition: int | None = None,
        keys: Sequence[bytes | None] | None = None,
        *,
        headers: Sequence[Headers] | None = None,
    ) -> list[RecordMetadata]:
        """One aborted transaction whose records did reach the log (flushed before the abort)."""
        meta = self.begin_open(topic, values, partition, keys, headers=headers)
        self.abort_open()
        return meta

    def begin_open(
        self,
        topic: str,
        values: Sequence[bytes | None],
        partition: int | None = None,
        keys: Sequence[bytes | None] | None = None,
        *,
        headers: Sequence[Headers] | None = None,
    ) -> list[RecordMetadata]:
        """Begin a transaction (unless one is open), write and flush ``values``, leave it open."""
        if not self.in_transaction:
            self.producer.begin_transaction()
            self.in_transaction = True
        return _send(self.producer, topic, values, partition, keys, headers)

    def commit_open(self) -> None:
        self._require_open()
        self._end(commit=True)
        self.in_transaction = False

    def abort_open(self) -> None:
        self._require_open()
        self._end(commit=False)
        self.in_transaction = False

    def _end(self, commit: bool) -> None:
        """commit/abort_transaction with a deadline.

        KafkaProducer waits on EndTxn without a timeout, and Tansu answers a fenced
        producer's EndTxn by dropping the connection, which kafka-python retries
        forever: a fenced writer would hang the test instead of failing it.
        """
        producer = self.producer
        manager = producer._transaction_manager
        result = manager.begin_commit() if commit else manager.begin_abort()
        producer._sender.wakeup()
        if not result.wait(timeout_ms=self.end_timeout_ms):
            verb = "commit" if commit else "abort"
            raise KafkaTimeoutError(
                f"{verb} of transactional id {self.transactional_id!r} did not finish in "
                f"{self.end_timeout_ms} ms (fenced? Tansu drops a fenced producer's EndTxn)"
            )

    def forget_open(self) -> None:
        """The open transaction was ended from outside (EndTxn by another client): on exit,
        do not abort it."""
        self._require_open()
        self.in_transaction = False

    def _require_open(self) -> None:
        if not self.in_transaction:
            raise RuntimeError("no transaction is open: call begin_open() first")
