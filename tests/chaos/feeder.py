"""Input: transactional producers (kafka-python) writing unique ids, some transactions aborted.

Each feeder is a thread with its own transactional id. A transaction holds
100-800 records ``{"id": n, "feeder": f, "txn": t}`` (key = id) on one or two
input partitions; one in five is aborted on purpose. A broker kill makes the
outcome of the transaction in flight unknown: the feeder records its ids as
"uncertain", drops the producer and starts a new one on the same id, whose
InitProducerId aborts the old transaction if it was still open. The truth for
the verdict is the input topic's own committed view; the ledger cross-checks it.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from dataclasses import dataclass, field

from kafka import KafkaProducer

ABORT_RATE = 0.2
_PRODUCER = {"linger_ms": 5, "max_block_ms": 10000, "request_timeout_ms": 10000,
             "retry_backoff_ms": 100, "reconnect_backoff_max_ms": 500}

log = logging.getLogger("chaos.feeder")


def _end_transaction(producer: KafkaProducer, *, commit: bool, timeout_ms: int = 30000) -> None:
    """commit_transaction()/abort_transaction() with a deadline. kafka-python's own wait
    forever; on a 3-node Kafka both feeders hung there after leader kills (chaos soak,
    seed 52), which stalled the input for good. A timeout is an unknown outcome: the
    caller reopens the id, whose InitProducerId finishes or aborts the transaction."""
    manager = producer._transaction_manager  # noqa: SLF001 (no public call takes a timeout)
    result = manager.begin_commit() if commit else manager.begin_abort()
    producer._sender.wakeup()  # noqa: SLF001
    if not result.wait(timeout_ms=timeout_ms):
        raise TimeoutError(f"EndTxn ({'commit' if commit else 'abort'}) unanswered after "
                           f"{timeout_ms} ms")


class IdBlocks:
    """Unique input ids, handed out in contiguous blocks (thread-safe)."""

    def __init__(self) -> None:
        self._next = 0
        self._lock = threading.Lock()

    def take(self, n: int) -> range:
        with self._lock:
            first, self._next = self._next, self._next + n
        return range(first, first + n)


@dataclass
class Ledger:
    """What the feeders know about their transactions' outcomes (ids)."""

    committed: set[int] = field(default_factory=set)
    aborted: set[int] = field(default_factory=set)
    uncertain: set[int] = field(default_factory=set)
    transactions: int = 0
    failures: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, outcome: str, ids: range) -> None:
        with self.lock:
            getattr(self, outcome).update(ids)
            self.transactions += 1
            self.failures += outcome == "uncertain"


class Feeder(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, index: int, prefix: str, seed: int,
                 ids: IdBlocks, ledger: Ledger, partitions: int, pause_s: float = 3.0) -> None:
        super().__init__(name=f"feeder-{index}", daemon=True)
        self.bootstrap, self.topic, self.index = bootstrap, topic, index
        self.transactional_id = f"{prefix}-feeder-{index}"
        self.rng = random.Random(seed * 1000 + index)
        self.ids, self.ledger, self.pause_s = ids, ledger, pause_s
        self.partitions = partitions
        self._stop_event = threading.Event()
        self.producer: KafkaProducer | None = None
        self.sealer: KafkaProducer | None = None
        self.error: BaseException | None = None

    def stop(self) -> None:
        self._stop_event.set()

    def _open(self) -> KafkaProducer:
        producer = KafkaProducer(bootstrap_servers=self.bootstrap,
                                 transactional_id=self.transactional_id, **_PRODUCER)
        try:
            producer.init_transactions()  # aborts what the previous incarnation left open
        except BaseException:
            _close(producer, 1, self.name)
            raise
        return producer

    def _transaction(self, producer: KafkaProducer, number: int) -> None:
        ids = self.ids.take(self.rng.randint(100, 800))
        abort = self.rng.random() < ABORT_RATE
        try:
            # One or two partitions per transaction: every one is a multi-batch transaction
            # with its own markers, and the broker's s3:// storage gets fewer objects.
            targets = self.rng.sample(range(self.partitions), min(self.partitions,
                                                                  self.rng.randint(1, 2)))
            producer.begin_transaction()
            sent = []
            for n, i in enumerate(ids):
                value = json.dumps({"id": i, "feeder": self.index, "txn": number}).encode()
                sent.append(producer.send(self.topic, value=value, key=str(i).encode(),
                                          partition=targets[n % len(targets)]))
            producer.flush(timeout=15)
            for future in sent:  # flush() returns on failed deliveries too: never commit those
                future.get(timeout=1)
            _end_transaction(producer, commit=not abort)
        except BaseException:
            self.ledger.record("uncertain", ids)
            raise
        self.ledger.record("aborted" if abort else "committed", ids)

    def run(self) -> None:
        number = 0
        while not self._stop_event.is_set():
            try:
                if self.producer is None:
                    self.producer = self._open()
                self._transaction(self.producer, number)
                number += 1
                self._stop_event.wait(self.rng.uniform(0, 2 * self.pause_s))
            except Exception as exc:  # broker killed: start over on the same id
                log.info("%s: %s: %s; reopening", self.name, type(exc).__name__, exc)
                self._drop()
                self._stop_event.wait(0.2)
        self._drop(clean=True)

    def _drop(self, clean: bool = False) -> None:
        producer, self.producer = self.producer, None
        if producer is not None:
            _close(producer, 2 if clean else 0, self.name)

    def seal(self, partitions: int) -> None:
        """After stop: one last committed transaction touching every partition, on a fresh
        producer (its InitProducerId aborts anything left open). The producer stays open for
        :meth:`heal`; :meth:`close` ends it. Called from the main thread."""
        deadline = time.monotonic() + 120
        while True:
            try:
                self.sealer = self._open()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        self.heal(partitions, "seal")

    def heal(self, partitions: int, tag: str = "heal") -> None:
        """One more committed transaction, one record per partition, on the sealing producer
        (no re-initialisation): Tansu's stuck LSO moves again when the id writes again."""
        assert self.sealer is not None
        ids = self.ids.take(partitions)
        self.sealer.begin_transaction()
        for p, i in zip(range(partitions), ids, strict=True):
            value = json.dumps({"id": i, "feeder": self.index, "txn": tag}).encode()
            self.sealer.send(self.topic, value=value, key=str(i).encode(), partition=p)
        self.sealer.flush(timeout=30)
        _end_transaction(self.sealer, commit=True)
        self.ledger.record("committed", ids)

    def close(self) -> None:
        sealer, self.sealer = self.sealer, None
        if sealer is not None:
            sealer.close(timeout=5)


def _close(producer: KafkaProducer, timeout_s: float, name: str) -> None:
    """Close a producer of a broker that may be dead (nothing left to flush anyway), and stop
    it even when close() gives up. kafka-python's close flushes first and raises on a timeout
    before it stops its sender thread: the thread would live on against the dead broker, and
    the producer's ``__del__`` would print the same timeout again (noise in CI's log).
    Private attributes: the harness only, never the package."""
    try:
        producer.close(timeout=timeout_s)
    except Exception as exc:  # noqa: BLE001 - a dead broker; the caller's error is the one
        log.info("%s: close: %s; stopping its sender", name, exc)
        sender = getattr(producer, "_sender", None)
        if sender is not None:
            sender.force_close()
        producer._closed = True
