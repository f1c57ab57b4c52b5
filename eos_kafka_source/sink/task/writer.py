"""The task side: write a task's rows inside one Kafka transaction and hand it over.

Runs on: an executor, inside ``write()``. The task initialises its
transactional id (fencing earlier attempts of the same task), registers each
partition with the transaction before producing to it, sends idempotent
batches (sequence numbers per partition; cut by bytes, :mod:`.batching`) pipelined to
the leaders, re-sending them when a leader moves (:mod:`.produce`), flushes,
and does NOT commit: it returns a :class:`TxnHandoff` for the driver.
With ``delivery.guarantee=at_least_once`` it writes plain idempotent batches
that are visible at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from ...errors import NotAuthorizedError, RecordTooLargeError
from ...faults import fault_point
from ...records import encode_batch
from ...records.arrow_encode import encode_arrow
from ...records.header import pure_forced
from ...wire import (
    TXN_PROTOCOL,
    KafkaWire,
    ProducerIdentity,
    TopicInfo,
    add_partitions_to_txn,
    find_coordinator,
    init_idempotent,
    init_producer_ids,
    require_topics,
)
from ...wire.cluster import fresh_leaders, topic_configs
from ...wire.retry import Deadline
from ..handoff import TxnHandoff
from ..recall import MAX_MESSAGE_BYTES
from .batching import (
    BATCH_OVERHEAD,
    DEFAULT_MAX_MESSAGE_BYTES,
    RECORD_OVERHEAD,
    pack_requests,
    record_sizes,
    split_by_bytes,
)
from .columns import unpack
from .context import WriterContext
from .first_offsets import find_first_offsets
from .partitioner import Router, take, take_arrow
from .produce import Batch, ProducePipeline

log = logging.getLogger(__name__)
TopicPartition = tuple[str, int]
_BATCH_BYTES = 900_000  # kafka.batch.size default: under the brokers' max.message.bytes (1 MiB)
_MAX_IN_FLIGHT = 5  # per leader; the idempotent producer's ordering limit
_REQUEST_FRAMING = 1024  # a Produce request's own bytes besides its batches (header, names)
_MAX_REQUEST_SIZE = 1_048_576  # the Java producer's default max.request.size


Headers = list[tuple[str, bytes | None]]
#: A partition's pending records: (values, keys or None, timestamps ms, headers or None).
_Columns = tuple[pa.Array, pa.Array | None, pa.Array, list[Headers | None] | None]


class _Pending:
    """One partition's unsent records, kept as Arrow column chunks (headers as a list).

    Columns, not a tuple per record: the encoder reads Arrow columns directly, and
    millions of live tuples would make CPython's cyclic GC dominate the write path.
    """

    __slots__ = ("values", "keys", "stamps", "headers", "count", "bytes")

    def __init__(self) -> None:
        self.values: list[pa.Array] = []
        self.keys: list[pa.Array | None] = []  # None: a chunk whose keys are all null
        self.stamps: list[pa.Array] = []
        self.headers: list[Headers | None] | None = None  # per record, once any has some
        self.count = 0
        self.bytes = 0  # of values and keys: when to send, before the exact cut by size

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
        self.bytes += values.nbytes + (0 if keys is None else keys.nbytes)

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
        context: WriterContext | None = None,
        compression: int = 0,
        compression_level: int | None = None,
        batch_bytes: int = _BATCH_BYTES,
    ) -> None:
        self.wire = wire
        self.transactional_id = transactional_id
        self.topic = topic
        self.timeout_ms = transaction_timeout_ms
        self.batch_records = batch_records
        #: Whose transaction this is (stamped into the hand-off); a bare writer's defaults.
        self.context = context = context if context is not None else WriterContext()
        self.compression = compression  # codec id of every batch (kafka.compression.type)
        self.compression_level = compression_level  # kafka.compression.<codec>.level
        self.batch_bytes = batch_bytes  # uncompressed bytes per batch (kafka.batch.size)
        self.producer: ProducerIdentity | None = None
        self.coordinator: int | None = None
        self._topics: dict[str, TopicInfo] = {}
        self._in_txn: set[TopicPartition] = set()
        self._sequence: dict[TopicPartition, int] = {}
        self._buffers: dict[TopicPartition, _Pending] = {}
        self._batch_bytes: dict[str, int] = {}
        self._router = Router(topic, lambda t: len(self._info(t).leaders),
                              start=context.first_partition, refresh=self._refetch)
        self.bytes = 0
        extra = dict(wire.config.extra)
        self.max_request_size = int(extra.get("max.request.size", _MAX_REQUEST_SIZE))
        max_in_flight = int(extra.get("max.in.flight.requests.per.connection", _MAX_IN_FLIGHT))
        self.block_s = wire.config.max_block_ms / 1000
        self._request_budget = max(self.max_request_size - _REQUEST_FRAMING, 1)
        self.pipeline = ProducePipeline(
            wire, transactional_id, leader=self._leader, refresh=self._refresh,
            max_in_flight=max_in_flight, request_timeout_ms=wire.config.request_timeout_ms,
            delivery_timeout_s=wire.config.delivery_timeout_ms / 1000,
        )

    # -- lifecycle -------------------------------------------------------------------------

    def open(self) -> None:
        """InitProducerId, following the coordinator if it moves, within ``max.block.ms``."""
        deadline = Deadline(self.block_s)
        if self.transactional_id is None:
            self.producer = init_idempotent(self.wire, topic=self.topic, deadline_s=self.block_s)
            return
        tid = self.transactional_id
        # An earlier task's (wire/known.py): a coordinator that moved answers NOT_COORDINATOR
        # and InitProducerId looks it up again.
        self.coordinator = self.wire.known_coordinator(tid)
        if self.coordinator is None:
            self.coordinator = find_coordinator(self.wire, tid, deadline=deadline)
        try:
            self.producer = init_producer_ids(
                self.wire, self.coordinator, [tid], self.timeout_ms, deadline_s=deadline,
            )[tid]
        except BaseException:
            self.wire.forget_coordinator(tid)
            raise

    def write_batches(self, batches: Iterable[pa.RecordBatch]) -> None:
        self.write_routed((batch, None) for batch in batches)

    def write_routed(self, batches: Iterable[tuple[pa.RecordBatch, str | None]]) -> None:
        """Batches, each with the topic all its rows go to (None: the usual routing)."""
        for batch, topic in batches:
            self.write_batch(batch, topic)
            fault_point("write.after_batch", task=self.context.task_partition)

    def write_batch(self, batch: pa.RecordBatch, topic: str | None = None) -> None:
        """``topic``: every row's topic, over the ``topic`` option and column (the dead
        letters': dead_letters.py)."""
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
        chunk = self._chunk_records(values, keys, n, topic or self.topic)
        for tp, selection in self._router.route(rows, chunk, topic):
            pending = self._buffers.get(tp)
            if pending is None:
                pending = self._buffers[tp] = _Pending()
            pending.add(take_arrow(values, selection),
                        None if keys is None else take_arrow(keys, selection),
                        take_arrow(stamps, selection),
                        take(rows.headers, selection) if rows.headers else None)
            if pending.count >= chunk or pending.bytes >= self._batch_limit(tp[0]):
                self._send({tp: self._buffers.pop(tp)})

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

    def _chunk_records(self, values: pa.Array, keys: pa.Array | None, n: int,
                       topic: str | None) -> int:
        """Records per partition to gather before sending (and per sticky-partition chunk):
        ``producer.batchRecords``, fewer for big records; as many as :func:`split_by_bytes`
        puts in one batch when sizes are even (so a send is one batch, not one and a bit).
        Uneven sizes are cut by bytes when sent."""
        size = (values.nbytes + (0 if keys is None else keys.nbytes)) / n + RECORD_OVERHEAD
        limit = (self._batch_limit(topic) if topic
                 else min(DEFAULT_MAX_MESSAGE_BYTES, self._request_budget))
        budget = limit - BATCH_OVERHEAD
        return max(1, min(self.batch_records, int(budget // size)))

    def flush(self) -> None:
        buffers, self._buffers = self._buffers, {}
        if buffers:
            self._send(buffers)
        self.pipeline.flush()
        fault_point("write.after_flush", task=self.context.task_partition)

    def handoff(self) -> TxnHandoff:
        self.flush()
        assert self.producer is not None
        counts = self.pipeline.acked
        self._fill_first_offsets()
        partitions = tuple(sorted((t, p, n) for (t, p), n in counts.items()))
        return TxnHandoff(
            transactional_id=self.transactional_id or "",
            producer_id=self.producer.producer_id,
            epoch=self.producer.epoch,
            txn_protocol=TXN_PROTOCOL,
            open=bool(self._in_txn),
            partitions=partitions,
            records=sum(counts.values()),
            bytes=self.bytes,
            task_partition=self.context.handoff_partition,
            attempt=self.context.attempt,
            task_attempt_id=self.context.task_attempt_id,
            batch_id=self.context.batch_id,
            owner=self.context.owner,
            lineage=self.context.lineage,
            first_offsets=tuple(sorted((t, p, o) for (t, p), o
                                       in self.pipeline.first_offsets.items())),
            delivery="exactly_once" if self.transactional_id else "at_least_once",
        )

    def _fill_first_offsets(self) -> None:
        """A partition whose first Produce answer gave no base offset (first_offsets.py):
        ask the broker, so the hand-off says where every partition's records start."""
        firsts = self.pipeline.first_offsets
        missing = {tp: self._leader(tp) for tp in self.pipeline.acked if tp not in firsts}
        if not missing or self.transactional_id is None:
            return
        assert self.producer is not None
        firsts.update(find_first_offsets(self.wire, self.producer, missing))
        unknown = sorted(set(missing) - set(firsts))
        if unknown:
            log.warning("eoskafka: %s: no first offset found in %s; if its commit is ever "
                        "refused, its outcome cannot be read from the log",
                        self.transactional_id, unknown)

    # -- partitioning ----------------------------------------------------------------------

    def _info(self, topic: str) -> TopicInfo:
        info = self._topics.get(topic)
        if info is None:
            info = self.wire.known_topic(topic)  # an earlier task's (wire/known.py)
            if info is None:
                info = require_topics(self.wire, [topic])[topic]
            self._topics[topic] = info
        return info

    def _refetch(self, topic: str) -> int:
        """The topic's partition count, asked again (the Router, before refusing a row)."""
        info = self._topics[topic] = require_topics(self.wire, [topic])[topic]
        return len(info.leaders)

    def _leader(self, tp: TopicPartition) -> int:
        return self._info(tp[0]).leaders.get(tp[1], -1)

    def _refresh(self, deadline: Deadline) -> None:
        """Ask for the leaders again (after NOT_LEADER_OR_FOLLOWER or a lost broker)."""
        self._topics.update(fresh_leaders(self.wire, sorted(self._topics), deadline=deadline))

    def _batch_limit(self, topic: str) -> int:
        """Bytes per record batch: the topic's max.message.bytes, ``kafka.batch.size``, and one
        batch must fit in a request of ``kafka.max.request.size``."""
        limit = self._batch_bytes.get(topic)
        if limit is None:
            topic_max = MAX_MESSAGE_BYTES.get(self.wire.config, topic)  # recall.py
            if topic_max is None:
                topic_max = self._max_message_bytes(topic)
                MAX_MESSAGE_BYTES.put(self.wire.config, topic, topic_max)
            # kafka.batch.size caps it too (a record bigger than that still goes, alone).
            limit = self._batch_bytes[topic] = min(topic_max, self._request_budget,
                                                   max(self.batch_bytes, 1) + BATCH_OVERHEAD)
        return limit

    def _max_message_bytes(self, topic: str) -> int:
        try:
            configs = topic_configs(self.wire, topic, ["max.message.bytes"])
        except NotAuthorizedError as exc:
            # DESCRIBE_CONFIGS is optional (docs/acls.md): Kafka's default it is. A topic
            # set lower than that refuses a batch with RECORD_TOO_LARGE, which says so.
            log.info("eoskafka: cannot read max.message.bytes of %s, assuming %d: %s",
                     topic, DEFAULT_MAX_MESSAGE_BYTES, exc.refusal.command())
            configs = {}
        return int(configs.get("max.message.bytes", DEFAULT_MAX_MESSAGE_BYTES))

    # -- sending ---------------------------------------------------------------------------

    def _send(self, buffers: dict[TopicPartition, _Pending]) -> None:
        """Encode and send everything in ``buffers``, in batches cut by bytes and records.

        Round ``r`` sends the ``r``-th batch of every partition; a round's batches bound for
        one leader are packed into requests under ``kafka.max.request.size``.
        """
        assert self.producer is not None
        new = [tp for tp in buffers if tp not in self._in_txn]
        if new and self.transactional_id is not None:
            self.coordinator = add_partitions_to_txn(
                self.wire, self.coordinator, self.transactional_id, self.producer, new,
                deadline_s=self.block_s,
            )
        self._in_txn.update(new)
        columns = {tp: p.columns() for tp, p in buffers.items()}
        slices = {
            tp: split_by_bytes(record_sizes(c[0], c[1], c[3]), self._batch_limit(tp[0]),
                               self.batch_records)
            for tp, c in columns.items()
        }
        for r in range(max(len(s) for s in slices.values())):
            self._send_round({tp: (columns[tp], s[r]) for tp, s in slices.items() if r < len(s)})

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
                                     compression=self.compression,
                                     compression_level=self.compression_level)
        if batch is None:
            batch = encode_batch(
                [None] * len(values) if keys is None else keys.to_pylist(),
                values.to_pylist(), stamps.to_pylist(),
                None if part is None else [h or [] for h in part],
                producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                transactional=transactional, compression=self.compression,
                compression_level=self.compression_level,
            )
        return batch, len(values)

    def _send_round(self, parts: dict[TopicPartition, tuple[_Columns, tuple[int, int]]]) -> None:
        by_leader: dict[int, list[Batch]] = {}
        for tp, (cols, (first, end)) in parts.items():
            seq = self._sequence.get(tp, 0)
            data, n = self._encode(cols, first, end - first, seq)
            self._sequence[tp] = (seq + n) & 0x7FFFFFFF
            self.bytes += len(data)
            stamps = cols[2].slice(first, n)
            batch = Batch(tp, seq, n, data, pc.max(stamps).as_py() or 0)
            by_leader.setdefault(self._leader(tp), []).append(batch)
        for leader, batches in by_leader.items():
            for request in pack_requests([(b, len(b.data) + 16) for b in batches],
                                         self._request_budget):
                self.pipeline.send(leader, request)
        self.wire.flush()  # the broker appends these while the next batch is encoded
        fault_point("write.after_round", task=self.context.task_partition)
