"""Driver-side planning of Kafka reads: which partitions, which offsets, which ranges.

Runs in the long-lived Python worker Spark starts under the driver JVM for a
query (streaming) or in the planning worker of a batch read; never on
executors. No Spark imports: the Spark reader classes are thin shells over this.

Offsets come from Fetch responses (log start, high watermark, last stable
offset), never from ListOffsets "latest", which is wrong on some brokers
(docs/design.md, "The source"). Under read_committed a plan never passes the LSO, so
every transaction with records in a planned range has its marker in the log.

Rules, as in Spark's Kafka source:

* ``subscribe`` topics must exist; ``subscribePattern`` is re-evaluated at
  every :meth:`SourcePlanner.latest_offsets`, so new topics and new partitions
  join the query; ``assign`` partitions must exist.
* A partition that joins a running query starts at offset 0 (its earliest);
  if its log no longer starts at 0 that is data loss, like any other offsets
  deleted before they were read: :class:`~eos_kafka_source.errors.DataLossError`,
  or a warning and a skip with ``failOnDataLoss=false``.

>>> planner = SourcePlanner(SourceOptions.parse(opts, streaming=True))  # doctest: +SKIP
>>> start = planner.initial_offsets()
>>> end = planner.latest_offsets(start).end
>>> ranges = planner.plan(start, end)
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import (
    AuthenticationError,
    BrokerUnreachableError,
    ConfigError,
    ConnectionDroppedError,
    KafkaProtocolError,
    TopicNotFoundError,
)
from ..offsets import (
    OffsetRange,
    OffsetsForTimes,
    PartitionBounds,
    TopicPartition,
    cap_end_offsets,
    check_data_loss,
    plan_ranges,
    resolve_ending,
    resolve_starting,
    tp_name,
)
from ..options import SourceOptions
from ..wire import (
    KafkaWire,
    TopicInfo,
    fetch_bounds,
    fetch_metadata,
    leader_of,
    list_offsets_for_times,
    matching_topics,
    require_topics,
)
from ..wire.retry import LEADER_MOVED, Deadline

log = logging.getLogger(__name__)

Offsets = dict[TopicPartition, int]
_T = TypeVar("_T")
#: How long planning keeps reconnecting to a broker that dropped the connection or is down
#: (a broker restart, a rolling upgrade) before the error fails the query:
#: ``kafka.default.api.timeout.ms`` (ClientConfig.api_timeout_ms, 60 s as the Java consumer's,
#: which Spark's connector inherits). A connection to a dead node costs
#: kafka.socket.connection.setup.timeout.ms (10 s) before it is given up.


def _reconnecting(method: Callable[..., _T]) -> Callable[..., _T]:
    """Retry a planning call (read-only: Metadata, Fetch, ListOffsets) on a new connection.

    Found by the chaos harness: after a broker restart the planner's long-lived
    connection was dead and every query failed in its next ``latestOffset``.
    Spark's own Kafka source retries there too (``fetchOffset.numRetries``).
    """

    @functools.wraps(method)
    def wrapper(self: SourcePlanner, *args: Any, **kwargs: Any) -> _T:
        deadline = Deadline(self.options.client.api_timeout_s)
        answered = self._reached  # some broker of the cluster has answered us
        while True:
            try:
                result = method(self, *args, **kwargs)
                self._reached = True
                return result
            except (ConnectionDroppedError, BrokerUnreachableError) as exc:
                self.close()
                # A dropped connection to one node comes after the bootstrap answered: the
                # cluster is there, that broker is down (its partitions move). Only a
                # cluster no bootstrap server answers, or one refusing our credentials,
                # fails at once: a query must start while one broker of three is down.
                answered = answered or isinstance(exc, ConnectionDroppedError)
                if (isinstance(exc, AuthenticationError) or not answered
                        or not deadline.pause()):
                    raise
                log.warning("eoskafka source: %s; reconnecting", exc)
            except KafkaProtocolError as exc:
                # A leader that moved, or a partition just created whose leader the broker
                # we asked does not know yet (Kafka: NOT_LEADER_OR_FOLLOWER right after
                # CreatePartitions): ask for metadata again, as Kafka's consumer does.
                if exc.code not in LEADER_MOVED or not deadline.pause():
                    raise
                self.close()
                log.info("eoskafka source: %s; asking for leaders again", exc)

    return wrapper


@dataclass(frozen=True)
class Latest:
    """What :meth:`SourcePlanner.latest_offsets` found.

    ``end`` is the next batch's end (capped); ``available`` counts the offsets
    between the (data-loss adjusted) start and the uncapped latest offsets,
    ``latest``.
    """

    end: Offsets
    available: int
    latest: Offsets = field(default_factory=dict)


class SourcePlanner:
    """Plans offsets and ranges over one broker connection; ``close()`` when done.

    Not picklable (it holds a connection); keep it on the reader object that
    lives in the driver-side worker, and create it lazily.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._wire: KafkaWire | None = None
        self._reached = False  # a planning call has succeeded: later failures are transient
        self._reported_gone: set[str] = set()  # deleted topics already warned about
        #: (starts, bounds) of the last latest_offsets: the plan of the same batch, which
        #: Spark asks for next with the same starts, takes them instead of asking again.
        self._seen: tuple[Offsets, dict[TopicPartition, PartitionBounds]] | None = None

    @property
    def wire(self) -> KafkaWire:
        if self._wire is None:
            self._wire = KafkaWire(self.options.client)
        return self._wire

    def close(self) -> None:
        wire, self._wire = self._wire, None
        self._seen = None
        if wire is not None:
            wire.close()

    # -- partitions and bounds -------------------------------------------------------------

    def leaders(self, known: Mapping[TopicPartition, int] | None = None, *,
                missing_ok: bool = False) -> dict[TopicPartition, int]:
        """Every partition the subscription reads now, with its leader.

        Raises TopicNotFoundError for a ``subscribe``/``assign`` topic (or an
        assigned partition) that does not exist, unless the query has read it
        before (a topic in ``known``): such a topic was deleted while the query
        ran, and is left out here for :func:`check_data_loss` to judge, as Spark
        does (a DataLossError, or a warning with ``failOnDataLoss=false``).
        ``missing_ok`` leaves every missing topic out (for a caller that cannot know
        what the query has read; the query's own planning still refuses them).
        """
        sub = self.options.subscription
        if sub.kind == "subscribePattern":
            return _all_leaders(matching_topics(self.wire, sub.pattern or ""))
        wanted = sub.topics if sub.kind == "subscribe" else sorted({t for t, _ in sub.assigned})
        seen = {t for t, _ in (known or {})}
        info = fetch_metadata(self.wire, list(wanted))
        gone = [t for t in wanted if t not in info and (t in seen or missing_ok)]
        news = sorted(set(gone) - self._reported_gone)
        if news:
            self._reported_gone.update(news)
            log.warning("eoskafka source: topic(s) %s no longer exist (deleted while the query "
                        "ran)", ", ".join(news))
        if any(t not in info and t not in gone for t in wanted):
            info = require_topics(self.wire, [t for t in wanted if t not in gone])  # raises
        if sub.kind == "subscribe":
            return _all_leaders(info)
        present = [tp for tp in sub.assigned if tp[0] not in gone]
        missing = [tp for tp in present if tp[1] not in info[tp[0]].leaders]
        if missing:
            raise TopicNotFoundError(
                f"assign names partition(s) {', '.join(tp_name(tp) for tp in missing)} "
                "that do not exist; fix the assign option or add partitions to the topic"
            )
        return {tp: leader_of(info, tp) for tp in present}

    def bounds(
        self,
        leaders: Mapping[TopicPartition, int],
        hints: Mapping[TopicPartition, int] | None = None,
    ) -> dict[TopicPartition, PartitionBounds]:
        """Log start, high watermark and LSO of each partition (one Fetch per leader)."""
        found = fetch_bounds(self.wire, leaders, hints)
        return {
            tp: PartitionBounds(b.log_start, b.high_watermark, b.last_stable)
            for tp, b in found.items()
        }

    def _offsets_for_times(self, leaders: Mapping[TopicPartition, int]) -> OffsetsForTimes:
        def lookup(times: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
            by_leader: dict[int, dict[TopicPartition, int]] = {}
            for tp, ts in times.items():
                by_leader.setdefault(leaders[tp], {})[tp] = ts
            out: dict[TopicPartition, int | None] = {}
            for leader, wanted in by_leader.items():
                out.update(list_offsets_for_times(self.wire, leader, wanted))
            return out

        return lookup

    # -- streaming ---------------------------------------------------------------------------

    @_reconnecting
    def initial_offsets(self) -> Offsets:
        """Where a new query starts (``startingOffsets`` & co., resolved against the log now)."""
        leaders = self.leaders()
        bounds = self.bounds(leaders)
        return resolve_starting(
            self.options.starting, leaders, bounds,
            read_committed=self.options.read_committed,
            offsets_for_times=self._offsets_for_times(leaders),
        )

    @_reconnecting
    def latest_offsets(
        self,
        start: Mapping[TopicPartition, int],
        max_offsets: int | None = None,
        *,
        target: Mapping[TopicPartition, int] | None = None,
        missing_ok: bool = False,
    ) -> Latest:
        """The end of the next batch after ``start``: the LSO (read_committed) or the high
        watermark of every partition read now, capped to ``max_offsets`` in total.

        Partitions not in ``start`` are new and start at 0. ``target`` (Trigger.AvailableNow)
        bounds every end and leaves out partitions that appeared after it was taken. A
        partition whose latest offset is below its start keeps its start, unless its
        start lies beyond the log (deleted and recreated): then the end is counted from
        the log start and :meth:`plan` reports the loss.

        Under ``failOnDataLoss=false`` a missing subscribed topic is skipped even when
        ``start`` no longer lists it: the batch that skipped a deleted topic ends without
        it, and the batches after it (or a restart) must skip it again. The query's start
        (``initialOffset``) still refuses a topic that never existed.
        """
        lenient = missing_ok or not self.options.fail_on_data_loss
        leaders = self.leaders(known=start, missing_ok=lenient)
        if target is not None:
            leaders = {tp: leader for tp, leader in leaders.items() if tp in target}
        starts = {tp: start.get(tp, 0) for tp in leaders}
        bounds = self.bounds(leaders, hints=starts)
        self._seen = (starts, bounds)
        base, _ = check_data_loss(starts, bounds, fail_on_data_loss=False)
        latest = {tp: b.latest(self.options.read_committed) for tp, b in bounds.items()}
        if target is not None:
            latest = {tp: min(end, target[tp]) for tp, end in latest.items()}
        available = sum(max(0, latest[tp] - base[tp]) for tp in latest)
        return Latest(cap_end_offsets(base, latest, max_offsets), available, latest)

    @_reconnecting
    def plan(
        self, start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]
    ) -> list[OffsetRange]:
        """Ranges of the batch ``(start, end]`` of Spark's offsets, cut for input partitions.

        Deterministic: a replay of the same batch gets the same ranges, unless offsets were
        lost in between (then DataLossError, or skip and warn with failOnDataLoss=false).
        Partitions in ``end`` but not ``start`` start at 0.
        """
        starts = {tp: start.get(tp, 0) for tp in set(start) | set(end)}
        bounds = self._seen_for(starts)
        if bounds is None:
            topics = sorted({t for t, _ in starts})
            info = fetch_metadata(self.wire, topics) if topics else {}
            leaders = {
                tp: info[tp[0]].leaders[tp[1]]
                for tp in starts
                if tp[0] in info and tp[1] in info[tp[0]].leaders
            }
            bounds = self.bounds(leaders, hints=starts)
        adjusted, warnings = check_data_loss(
            starts, bounds, fail_on_data_loss=self.options.fail_on_data_loss
        )
        for warning in warnings:
            log.warning("eoskafka: %s", warning)
        ends = {tp: offset for tp, offset in end.items() if tp in adjusted}
        begins = {tp: min(adjusted[tp], offset) for tp, offset in ends.items()}
        return self.split(begins, ends)

    def _seen_for(self, starts: Offsets) -> dict[TopicPartition, PartitionBounds] | None:
        """The bounds the last :meth:`latest_offsets` fetched, if it started every partition
        of ``starts`` where they start (the same batch); used once. Saves the plan a
        Metadata and a Fetch per leader a batch. Bounds a moment old judge data loss as
        fresh ones would: offsets deleted since are found by the task that reads them
        (DataLossError, or skipped with failOnDataLoss=false), as after any plan."""
        seen, self._seen = self._seen, None
        if seen is None:
            return None
        seen_starts, bounds = seen
        if any(seen_starts.get(tp) != offset or tp not in bounds
               for tp, offset in starts.items()):
            return None
        return {tp: bounds[tp] for tp in starts}

    def split(self, start: Offsets, end: Offsets) -> list[OffsetRange]:
        return plan_ranges(
            start, end,
            min_partitions=self.options.min_partitions,
            max_records_per_partition=self.options.max_records_per_partition,
        )

    # -- batch -------------------------------------------------------------------------------

    @_reconnecting
    def batch_ranges(self) -> list[OffsetRange]:
        """The ranges of a batch read: ``startingOffsets`` (default earliest) to
        ``endingOffsets`` (default latest: the LSO under read_committed)."""
        options = self.options
        if options.ending is None:
            raise ValueError("batch_ranges needs batch options (SourceOptions streaming=False)")
        leaders = self.leaders()
        bounds = self.bounds(leaders)
        lookup = self._offsets_for_times(leaders)
        rc = options.read_committed
        start = resolve_starting(options.starting, leaders, bounds, read_committed=rc,
                                 offsets_for_times=lookup)
        end = resolve_ending(options.ending, leaders, bounds, read_committed=rc,
                             offsets_for_times=lookup)
        explicit = dict(options.ending.per_partition) if options.ending.kind == "offsets" else {}
        for tp, offset in end.items():
            if explicit.get(tp, -1) >= 0 and offset > bounds[tp].latest(rc):
                raise ConfigError(_past_latest(tp, offset, bounds[tp], rc))
        start, warnings = check_data_loss(
            start, bounds, fail_on_data_loss=options.fail_on_data_loss
        )
        for warning in warnings:
            log.warning("eoskafka: %s", warning)
        for tp, offset in sorted(start.items()):
            if offset > end[tp]:
                if explicit.get(tp, -1) >= 0:
                    raise ConfigError(
                        f"{tp_name(tp)}: the start offset {offset} is after endingOffsets "
                        f"{end[tp]}; make startingOffsets <= endingOffsets"
                    )
                start[tp] = end[tp]  # e.g. a start past an open transaction: nothing to read
        return self.split(start, {tp: end[tp] for tp in start})


def _all_leaders(info: Mapping[str, TopicInfo]) -> dict[TopicPartition, int]:
    return {
        (name, p): leader_of(info, (name, p)) for name, topic in info.items() for p in topic.leaders
    }


def _past_latest(tp: TopicPartition, offset: int, b: PartitionBounds, rc: bool) -> str:
    if rc and offset <= b.high_watermark:
        return (
            f"endingOffsets for {tp_name(tp)} is {offset}, past the last stable offset "
            f"{b.last_stable}: a transaction is still open there, so what it holds is not "
            "decided yet. End at or before the LSO (use -1 for latest), or wait for it to end"
        )
    return (
        f"endingOffsets for {tp_name(tp)} is {offset}, past the end of the log "
        f"({b.high_watermark}); use -1 for latest or an offset that exists"
    )
