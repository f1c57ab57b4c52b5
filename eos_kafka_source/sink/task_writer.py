"""The task side: write a task's rows inside one Kafka transaction and hand it over.

Runs on: an executor, inside ``write()``. The task initialises its
transactional id (fencing earlier attempts of the same task), registers each
partition with the transaction before producing to it, sends idempotent
batches (sequence numbers per partition) pipelined to the leaders, flushes,
and does NOT commit: it returns a :class:`TxnHandoff` for the driver.
With ``delivery.guarantee=at_least_once`` it writes plain idempotent batches
that are visible at once.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import RecordTooLargeError, for_code
from ..faults import fault_point
from ..records import encode_batch
from ..records.arrow_encode import encode_arrow
from ..records.header import pure_forced
from ..wire import (
    TXN_PROTOCOL,
    KafkaWire,
    ProducerIdentity,
    TopicInfo,
    add_partitions_to_txn,
    find_coordinator,
    init_idempotent,
    init_producer_ids,
    produce_errors,
    produce_request,
    require_topics,
)
from .columns import unpack
from .handoff import TxnHandoff
from .partitioner import Router, take, take_arrow

TopicPartition = tuple[str, int]
_MAX_IN_FLIGHT = 5  # per leader; the idempotent producer's ordering limit
_DUPLICATE_SEQUENCE = 46
_BATCH_BYTES = 900_000  # under the brokers' default max.message.bytes (1 MiB)
_MAX_REQUEST_SIZE = 1_048_576  # the Java producer's default max.request.size


Headers = list[tuple[str, bytes | None]]
#: A partition's pending records: (values, keys or None, timestamps ms, headers or None).
_Columns = tuple[pa.Array, pa.Array | None, pa.Array, list[Headers | None] | None]


class _Pending:
    """One partition's unsent records, kept as Arrow column chunks (headers as a list).

    Columns, not a tuple per record: the encoder reads Arrow columns directly, and
    millions of live tuples would make CPython's cyclic GC dominate the write path.
    """

    __slots__ = ("values", "keys", "stamps", "headers", "count")

    def __init__(self) -> None:
        self.values: list[pa.Array] = []
        self.keys: list[pa.Array | None] = []  # None: a chunk whose keys are all null
        self.stamps: list[pa.Array] = []
        self.headers: list[Headers | None] | None = None  # per record, once any has some
        self.count = 0

    def add(self, values: pa.Array, keys: pa.Array | None, stamps: pa.Array,
            headers: list[Headers] | None) -> None:
        n = len(values)
        if headers is not None and self.headers is None:
            self.headers = [None] * self.count
        if self.headers is not None:
            self.headers += headers if headers is not None else [None] * n
        self.values.append(values)
        self.keys.append(keys)
        self.stamps.append(stamps)
        self.count += n

    def columns(self) -> _Columns:
        """All records as (values, keys or None when all null, timestamps, headers)."""
        keys = None
        if any(k is not None for k in self.keys):
            keys = _concat([pa.nulls(len(v), pa.binary()) if k is None else k
                            for k, v in zip(self.keys, self.values, strict=True)])
        return _concat(self.values), keys, _concat(self.stamps), self.headers


def _concat(chunks: list[pa.Array]) -> pa.Array:
    return chunks[0] if len(chunks) == 1 else pa.concat_arrays(chunks)


class TaskWriter:
    """One task attempt's producer. Use: ``open()``, ``write_batch()``…, ``handoff()``."""

    def __init__(
        self,
        wire: KafkaWire,
        *,
        transactional_id: str | None,
        topic: str | None,
        transaction_timeout_ms: int,
        batch_records: int,
        context: dict[str, Any],
        compression: int = 0,
        batch_bytes: int = _BATCH_BYTES,
    ) -> None:
        self.wire = wire
        self.transactional_id = transactional_id
        self.topic = topic
        self.timeout_ms = transaction_timeout_ms
        self.batch_records = batch_records
        self.context = context
        self.compression = compression  # codec id of every batch (kafka.compression.type)
        self.batch_bytes = batch_bytes  # uncompressed bytes per batch (kafka.batch.size)
        self.producer: ProducerIdentity | None = None
        self.coordinator: int | None = None
        self._topics: dict[str, TopicInfo] = {}
        self._in_txn: set[TopicPartition] = set()
        self._sequence: dict[TopicPartition, int] = {}
        self._counts: dict[TopicPartition, int] = {}
        self._buffers: dict[TopicPartition, _Pending] = {}
        self._in_flight: dict[int, list[tuple[Any, dict[TopicPartition, int]]]] = {}
        self._router = Router(topic, lambda t: len(self._info(t).leaders),
                              start=context.get("task_partition", 0))
        self.bytes = 0
        extra = dict(wire.config.extra)
        self.max_request_size = int(extra.get("max.request.size", _MAX_REQUEST_SIZE))

    # -- lifecycle -------------------------------------------------------------------------

    def open(self) -> None:
        if self.transactional_id is None:
            self.producer = init_idempotent(self.wire)
            return
        self.coordinator = find_coordinator(self.wire, self.transactional_id)
        self.producer = init_producer_ids(
            self.wire, self.coordinator, [self.transactional_id], self.timeout_ms
        )[self.transactional_id]

    def write_batches(self, batches: Iterable[pa.RecordBatch]) -> None:
        for batch in batches:
            self.write_batch(batch)
            fault_point("write.after_batch", task=self.context.get("task_partition"))

    def write_batch(self, batch: pa.RecordBatch) -> None:
        self._check_record_sizes(batch)
        rows = unpack(batch)
        n = len(rows)
        if not n:
            return
        now = int(time.time() * 1000)
        stamps = rows.timestamps_ms
        if stamps is None:
            stamps = pa.repeat(pa.scalar(now, pa.int64()), n)
        elif stamps.null_count:
            stamps = stamps.fill_null(now)
        values, keys = rows.values, rows.key_array
        chunk = self._chunk_records(batch, n)
        for tp, selection in self._router.route(rows, chunk):
            pending = self._buffers.get(tp)
            if pending is None:
                pending = self._buffers[tp] = _Pending()
            pending.add(take_arrow(values, selection),
                        None if keys is None else take_arrow(keys, selection),
                        take_arrow(stamps, selection),
                        take(rows.headers, selection) if rows.headers else None)
            if pending.count >= chunk:
                self._send({tp: self._buffers.pop(tp)}, chunk)

    def _check_record_sizes(self, batch: pa.RecordBatch) -> None:
        """Refuse a record larger than ``kafka.max.request.size`` before sending anything.

        Like the Java producer's RecordTooLargeException, but naming the fix.
        """
        largest = 0
        for name in ("value", "key"):
            if name in batch.schema.names:
                column = batch.column(name)
                if pa.types.is_string(column.type) or pa.types.is_binary(column.type):
                    size = pc.max(pc.binary_length(column)).as_py()
                    largest += size or 0
        if largest > self.max_request_size:
            raise RecordTooLargeError(
                f"a record of {largest} bytes (key + value) is larger than "
                f"kafka.max.request.size={self.max_request_size}; raise that option and the "
                "topic's max.message.bytes (and the broker's message.max.bytes), or split the "
                "record. Nothing of this task was committed"
            )

    def _chunk_records(self, batch: pa.RecordBatch, n: int) -> int:
        """Records per Produce batch: ``producer.batchRecords``, fewer for big records.

        Brokers refuse batches over ``max.message.bytes`` (1 MiB by default).
        """
        size = sum(batch.column(i).nbytes for i in range(batch.num_columns)) / n
        return max(1, min(self.batch_records, int(self.batch_bytes // (size + 16))))

    def flush(self) -> None:
        buffers, self._buffers = self._buffers, {}
        if buffers:
            self._send(buffers, self.batch_records)
        for node in list(self._in_flight):
            self._drain(node, 0)
        fault_point("write.after_flush", task=self.context.get("task_partition"))

    def handoff(self) -> TxnHandoff:
        self.flush()
        assert self.producer is not None
        partitions = tuple(sorted((t, p, n) for (t, p), n in self._counts.items()))
        return TxnHandoff(
            transactional_id=self.transactional_id or "",
            producer_id=self.producer.producer_id,
            epoch=self.producer.epoch,
            txn_protocol=TXN_PROTOCOL,
            open=bool(self._in_txn),
            partitions=partitions,
            records=sum(self._counts.values()),
            bytes=self.bytes,
            task_partition=self.context.get("task_partition", -1),
            attempt=self.context.get("attempt", 0),
            task_attempt_id=self.context.get("task_attempt_id", -1),
            batch_id=self.context.get("batch_id"),
            owner=self.context.get("owner", ""),
            delivery="exactly_once" if self.transactional_id else "at_least_once",
        )

    # -- partitioning ----------------------------------------------------------------------

    def _info(self, topic: str) -> TopicInfo:
        info = self._topics.get(topic)
        if info is None:
            info = require_topics(self.wire, [topic])[topic]
            self._topics[topic] = info
        return info

    # -- sending ---------------------------------------------------------------------------

    def _send(self, buffers: dict[TopicPartition, _Pending], chunk: int) -> None:
        """Encode and send everything in ``buffers``, at most ``chunk`` records per batch.

        One batch per partition per Produce request; more rounds when a partition
        holds more than ``chunk`` records.
        """
        assert self.producer is not None
        new = [tp for tp in buffers if tp not in self._in_txn]
        if new and self.transactional_id is not None:
            assert self.coordinator is not None
            add_partitions_to_txn(
                self.wire, self.coordinator, self.transactional_id, self.producer, new
            )
        self._in_txn.update(new)
        columns = {tp: p.columns() for tp, p in buffers.items()}
        rounds = max(-(-p.count // chunk) for p in buffers.values())
        for r in range(rounds):
            first = r * chunk
            self._send_round({tp: c for tp, c in columns.items() if len(c[0]) > first},
                             first, chunk)

    def _encode(self, columns: _Columns, first: int, chunk: int, seq: int) -> tuple[bytes, int]:
        """One batch of records ``first``.. (at most ``chunk``); returns (bytes, count)."""
        assert self.producer is not None
        values, keys, stamps, headers = columns
        values = values.slice(first, chunk)
        keys = None if keys is None else keys.slice(first, chunk)
        stamps = stamps.slice(first, chunk)
        part = None if headers is None else headers[first:first + chunk]
        pid, epoch = self.producer.producer_id, self.producer.epoch
        transactional = self.transactional_id is not None
        batch = None
        if part is None or not any(part):
            part = None
            if not pure_forced():  # column-wise, no Python loop over records
                batch = encode_arrow(keys, values, stamps, producer_id=pid,
                                     producer_epoch=epoch, base_sequence=seq,
                                     transactional=transactional,
                                     compression=self.compression)
        if batch is None:
            batch = encode_batch(
                [None] * len(values) if keys is None else keys.to_pylist(),
                values.to_pylist(), stamps.to_pylist(),
                None if part is None else [h or [] for h in part],
                producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                transactional=transactional, compression=self.compression,
            )
        return batch, len(values)

    def _send_round(self, columns: dict[TopicPartition, _Columns], first: int,
                    chunk: int) -> None:
        assert self.producer is not None
        by_leader: dict[int, dict[TopicPartition, bytes]] = {}
        counts: dict[TopicPartition, int] = {}
        for tp, cols in columns.items():
            seq = self._sequence.get(tp, 0)
            batch, n = self._encode(cols, first, chunk, seq)
            self._sequence[tp] = (seq + n) & 0x7FFFFFFF
            self.bytes += len(batch)
            leader = self._info(tp[0]).leaders[tp[1]]
            by_leader.setdefault(leader, {})[tp] = batch
            counts[tp] = n
        for leader, batches in by_leader.items():
            self._drain(leader, _MAX_IN_FLIGHT - 1)
            request = produce_request(self.wire, self.transactional_id, batches, 30000)
            sent = self.wire.send(leader, request, f"Produce {self._what()}")
            self._in_flight.setdefault(leader, []).append(
                (sent, {tp: counts[tp] for tp in batches})
            )
        self.wire.flush()  # the broker appends these while the next batch is encoded

    def _drain(self, leader: int, keep: int) -> None:
        queue = self._in_flight.get(leader, [])
        while len(queue) > keep:
            sent, counts = queue.pop(0)
            response = self.wire.wait([sent], f"Produce {self._what()}")[0]
            errors = produce_errors(response)
            for tp, (code, message) in errors.items():
                if code == _DUPLICATE_SEQUENCE:
                    continue  # already appended: idempotence did its job
                if code in (10, 18):
                    raise RecordTooLargeError(
                        f"{tp[0]}-{tp[1]}: a batch of {counts[tp]} records was rejected as too "
                        "large; lower producer.batchRecords or raise the topic's "
                        "max.message.bytes (a single record must fit on its own)"
                    )
                raise for_code(code)(f"Produce to {tp[0]}-{tp[1]} by {self._what()}"
                                     + (f": {message}" if message else ""))
            for tp, n in counts.items():
                self._counts[tp] = self._counts.get(tp, 0) + n

    def _what(self) -> str:
        return self.transactional_id or "idempotent producer"
