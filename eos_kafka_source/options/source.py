"""Source options: subscription, starting/ending offsets, triggers, reading."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict

from ..client.config import ClientConfig
from ..client.keys import PREFIX, normalize_options, refuse_other_side
from ..client.table import SOURCE
from ..errors import ConfigError
from ..formats.options import ReadFormats
from ..offsets import (
    EARLIEST,
    LATEST,
    EndingSpec,
    StartingSpec,
    TopicPartition,
    parse_offsets_json,
    tp_name,
)
from ._common import (
    MAX_FETCH_BYTES,
    SOURCE_IGNORED,
    SOURCE_OPTIONS,
    _bool,
    _check_topic,
    _choice,
    _get,
    _int,
    _reject_unknown,
    parse_duration_ms,
)

log = logging.getLogger(__name__)

#: The sink's default ``kafka.transaction.timeout.ms`` (options/sink.py), the budget of one
#: exactly-once micro-batch from its first write to the driver's commit.
DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000
#: The slowest end-to-end rate the default read bound plans for (records/s): 16x below
#: Kafka -> Spark local[2] -> Kafka measured on 2 cores (docs/performance.md, 162k/s).
PLANNED_RATE = 10_000
#: A batch read under the default bound should need at most this share of the budget,
#: leaving the rest to task retries, a slow executor and the driver's commit.
BUDGET_SHARE = 1 / 9


def read_bound(transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS,
               rate: int = PLANNED_RATE) -> int:
    """``maxOffsetsPerTrigger`` that keeps a batch within :data:`BUDGET_SHARE` of a
    transaction timeout at ``rate`` records/s (1,000,000 for the defaults).

    >>> read_bound(), read_bound(60_000), read_bound(900_000, rate=50_000)
    (1000000, 66667, 5000000)
    """
    return max(1, int(rate * transaction_timeout_ms / 1000 * BUDGET_SHARE + 0.5))


#: What a streaming read takes per micro-batch when ``maxOffsetsPerTrigger`` is not set,
#: so a first batch over a large backlog cannot outlive the sink's transaction timeout
#: (docs/operations.md "Sizing the transaction timeout"). Spark's own source has no bound.
DEFAULT_MAX_OFFSETS_PER_TRIGGER = read_bound()


@dataclass(frozen=True)
class Subscription:
    """Which partitions a query reads: exactly one of ``subscribe`` (topics),
    ``subscribePattern`` (a regex over topic names, matched in full as Kafka
    does) or ``assign`` (fixed topic-partitions)."""

    kind: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    @property
    def named_topics(self) -> tuple[str, ...]:
        """The topics named by ``subscribe`` or ``assign``; none for a pattern."""
        return self.topics or tuple(dict.fromkeys(t for t, _ in self.assigned))

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` belongs to the subscription."""
        if self.kind == "subscribePattern":
            return re.fullmatch(self.pattern or "", topic) is not None
        if self.kind == "assign":
            return any(t == topic for t, _ in self.assigned)
        return topic in self.topics

    @classmethod
    def parse(cls, opts: Mapping[str, str]) -> Subscription:
        """From an option map whose keys are already lower-cased (normalize_options)."""
        names = ("subscribe", "subscribePattern", "assign")
        given = [n for n in names if _get(opts, n) is not None]
        if len(given) != 1:
            got = " and ".join(given) if given else "none of them"
            raise ConfigError(f"set exactly one of subscribe, subscribePattern, assign "
                              f"(got {got}); for example .option('subscribe', 'topic1,topic2').")
        name = given[0]
        raw = _get(opts, name) or ""
        if name == "subscribe":
            topics = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
            if not topics:
                raise ConfigError(f"subscribe names no topic ({raw!r}); give a comma-separated "
                                  f"list like 'topic1,topic2'.")
            return cls("subscribe", topics=tuple(_check_topic(name, t) for t in topics))
        if name == "subscribePattern":
            try:
                re.compile(raw)
            except re.error as exc:
                raise ConfigError(f"subscribePattern {raw!r} is not a valid regular expression "
                                  f"({exc}); fix the pattern.") from None
            if not raw.strip():
                raise ConfigError("subscribePattern is empty; give a regex like 'events-.*'.")
            return cls("subscribePattern", pattern=raw)
        return cls("assign", assigned=_parse_assign(raw))


def _parse_assign(raw: str) -> tuple[TopicPartition, ...]:
    example = 'write it as {"topic1":[0,1],"topic2":[0]}'
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"assign is not valid JSON ({exc.msg}): {raw!r}; {example}.") from None
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"assign must be a non-empty JSON object, got {raw!r}; {example}.")
    out: list[TopicPartition] = []
    for topic, parts in data.items():
        _check_topic("assign", topic)
        ok = isinstance(parts, list) and parts and all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts)
        if not ok:
            raise ConfigError(f"assign: topic {topic!r} must map to a non-empty list of "
                              f"partition numbers >= 0, got {json.dumps(parts)}; {example}.")
        out.extend((topic, p) for p in parts)
    return tuple(sorted(set(out)))


def _per_partition(name: str, raw: str, *, minimum: int, what: str
                   ) -> tuple[tuple[TopicPartition, int], ...]:
    values = parse_offsets_json(raw, name)
    for tp, value in values.items():
        _check_topic(name, tp[0])
        if value < minimum:
            raise ConfigError(f"{name}: {value} for {tp_name(tp)} is not {what}.")
    return tuple(sorted(values.items()))


def _check_spec_partitions(name: str, spec: tuple[tuple[TopicPartition, int], ...],
                           sub: Subscription) -> None:
    """Catch early what resolving would reject later: names outside the subscription."""
    named = {tp for tp, _ in spec}
    if sub.kind == "assign" and named != set(sub.assigned):
        raise ConfigError(f"{name} must name exactly the assigned partitions "
                          f"({', '.join(tp_name(tp) for tp in sub.assigned)}), got "
                          f"{', '.join(tp_name(tp) for tp in sorted(named))}; make them match.")
    outside = sorted({t for t, _ in named if not sub.matches(t)})
    if outside:
        raise ConfigError(f"{name} names topic(s) {', '.join(outside)} that the query does not "
                          f"subscribe to; remove them or add them to the subscription.")


class _TimeSpec(TypedDict):
    kind: str
    timestamp: int | None
    per_partition: tuple[tuple[TopicPartition, int], ...]
    option: str


def _time_spec(opts: Mapping[str, str], name: str) -> _TimeSpec:
    """Fields of a spec for ``*Timestamp`` (one ms value) or ``*OffsetsByTimestamp`` (JSON)."""
    if name in ("startingTimestamp", "endingTimestamp"):
        return {"kind": "timestamp", "timestamp": _int(opts, name, None, minimum=0),
                "per_partition": (), "option": name}
    per = _per_partition(name, _get(opts, name) or "", minimum=0, what="a timestamp in ms (>= 0)")
    return {"kind": "timestamps", "timestamp": None, "per_partition": per, "option": name}


def _by_precedence(opts: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    """The first of ``names`` that is set, as Spark resolves them (its
    ``getKafkaOffsetRangeLimit``: global timestamp, then per-partition timestamps,
    then offsets); the others are ignored, with a warning saying so."""
    given = [n for n in names if _get(opts, n) is not None]
    if len(given) > 1:
        log.warning("eoskafka: %s is set, so %s %s ignored (Spark's precedence: %s)",
                    given[0], " and ".join(given[1:]), "is" if len(given) == 2 else "are",
                    " > ".join(names))
    return given[0] if given else None


def _starting(opts: Mapping[str, str], streaming: bool) -> StartingSpec:
    name = _by_precedence(opts, ("startingTimestamp", "startingOffsetsByTimestamp",
                                 "startingOffsets"))
    strategy = _choice(opts, "startingOffsetsByTimestampStrategy", ("error", "latest"), None)
    if strategy is not None and name not in ("startingTimestamp", "startingOffsetsByTimestamp"):
        raise ConfigError("startingOffsetsByTimestampStrategy only applies with "
                          "startingTimestamp or startingOffsetsByTimestamp; remove it.")
    if name is None:
        return StartingSpec("latest" if streaming else "earliest")
    if name != "startingOffsets":
        return StartingSpec(**_time_spec(opts, name), on_no_match=strategy or "error")
    raw = _get(opts, name) or ""
    word = raw.strip().lower()
    if word in ("earliest", "latest"):
        if word == "latest" and not streaming:
            raise ConfigError("startingOffsets='latest' is not allowed for a batch read (it "
                              "would read nothing); use 'earliest' or JSON offsets.")
        return StartingSpec(word)
    per = _per_partition(name, raw, minimum=EARLIEST,
                         what="an offset (>= 0, or -2 earliest, -1 latest)")
    if not streaming and any(v == LATEST for _, v in per):
        raise ConfigError("startingOffsets uses -1 (latest) for a batch read, which would "
                          "read nothing from that partition; use -2 or an offset.")
    return StartingSpec("offsets", per_partition=per)


def _ending(opts: Mapping[str, str], streaming: bool) -> EndingSpec | None:
    name = _by_precedence(opts, ("endingTimestamp", "endingOffsetsByTimestamp",
                                 "endingOffsets"))
    if streaming:
        if name is not None:
            raise ConfigError(f"{name} applies to batch reads only; a stream has no end. "
                              f"Remove it (use Trigger.AvailableNow to stop when caught up).")
        return None
    if name is None:
        return EndingSpec("latest")
    if name != "endingOffsets":
        return EndingSpec(**_time_spec(opts, name))
    raw = _get(opts, name) or ""
    word = raw.strip().lower()
    if word == "latest":
        return EndingSpec("latest")
    if word == "earliest":
        raise ConfigError("endingOffsets='earliest' is not allowed (it would read nothing); "
                          "use 'latest' or JSON offsets.")
    per = _per_partition(name, raw, minimum=LATEST, what="an offset (>= 0, or -1 latest)")
    return EndingSpec("offsets", per_partition=per)


def _source_role_keys(opts: Mapping[str, str], streaming: bool) -> bool:
    """Judge the consumer/producer kafka.* keys on a read; returns read_committed."""
    refuse_other_side(opts, SOURCE)
    if not streaming and _get(opts, PREFIX + "group.id") is not None:
        raise ConfigError("kafka.group.id applies to streaming reads only (each committed "
                          "batch's end offsets go to that group, for Kafka's lag tools); a "
                          "batch read commits no progress. Remove it.")
    level = _choice(opts, PREFIX + "isolation.level", ("read_committed", "read_uncommitted"),
                    "read_committed")
    return level == "read_committed"


def _fetch_bytes(opts: Mapping[str, str]) -> int:
    """``fetchMaxBytes``, or the Java consumer's name for it:
    ``kafka.max.partition.fetch.bytes``."""
    names = [n for n in ("fetchMaxBytes", PREFIX + "max.partition.fetch.bytes")
             if _get(opts, n) is not None]
    if len(names) == 2 and _get(opts, names[0]) != _get(opts, names[1]):
        raise ConfigError("fetchMaxBytes and kafka.max.partition.fetch.bytes are the same "
                          "setting (bytes per partition fetch) and differ; keep one.")
    return _int(opts, names[0] if names else "fetchMaxBytes", 8 * 1024 * 1024,
                maximum=MAX_FETCH_BYTES,
                why=" A fetch must fit in one response of at most 64 MiB, with room for one "
                    "oversized record batch; use e.g. 8388608 (8 MiB).")


@dataclass(frozen=True)
class SourceOptions:
    """Everything a Kafka read needs, validated; built on the driver, pickled to
    executors with the reader. ``ending`` is None exactly for streaming reads."""

    client: ClientConfig
    subscription: Subscription
    starting: StartingSpec
    ending: EndingSpec | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    #: At most this many input partitions a batch (ranges packed: source/packing.py);
    #: None: one per range, as Spark's connector.
    max_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    read_committed: bool = True
    fetch_max_bytes: int = 8 * 1024 * 1024
    poll_timeout_ms: int = 120_000
    #: True when ``max_offsets_per_trigger`` is :data:`DEFAULT_MAX_OFFSETS_PER_TRIGGER`
    #: because the option was not set (streaming reads only).
    default_read_bound: bool = False
    #: ``kafka.group.id`` on a streaming read: the group each batch's end offsets are
    #: committed to once Spark has committed the batch, for Kafka's lag tools (advisory:
    #: the checkpoint stays the truth and nothing is ever read back from the group).
    progress_group: str | None = None
    #: ``kafka.check.crcs``: verify each batch's CRC-32C as it is read.
    check_crcs: bool = False
    #: ``valueFormat``/``keyFormat`` and the schema options; None when both are raw.
    formats: ReadFormats | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        """Validate Spark's option map for a streaming (``readStream``) or batch read."""
        opts = normalize_options(options)
        _reject_unknown(opts, SOURCE_OPTIONS + SOURCE_IGNORED, "source")
        client = ClientConfig.from_options(opts)
        read_committed = _source_role_keys(opts, streaming)
        subscription = Subscription.parse(opts)
        starting = _starting(opts, streaming)
        ending = _ending(opts, streaming)
        for spec in (starting, ending):
            if spec is not None and spec.per_partition:
                _check_spec_partitions(spec.option, spec.per_partition, subscription)
        if not streaming:
            for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
                if _get(opts, name) is not None:
                    raise ConfigError(f"{name} applies to streaming reads only and would have "
                                      f"no effect on a batch read; remove it.")
        max_per = _int(opts, "maxOffsetsPerTrigger", None)
        min_per = _int(opts, "minOffsetsPerTrigger", None)
        if max_per is not None and min_per is not None and min_per > max_per:
            raise ConfigError(f"minOffsetsPerTrigger ({min_per}) is greater than "
                              f"maxOffsetsPerTrigger ({max_per}); lower it or raise the max.")
        default_bound = streaming and max_per is None
        if default_bound:  # never below minOffsetsPerTrigger, which must stay reachable
            max_per = max(DEFAULT_MAX_OFFSETS_PER_TRIGGER, min_per or 0)
        min_parts = _int(opts, "minPartitions", None)
        max_parts = _int(opts, "maxPartitions", None)
        if min_parts is not None and max_parts is not None and min_parts > max_parts:
            raise ConfigError(f"minPartitions ({min_parts}) is greater than maxPartitions "
                              f"({max_parts}); lower minPartitions or raise maxPartitions.")
        raw_delay = _get(opts, "maxTriggerDelay")
        delay = 15 * 60_000 if raw_delay is None else parse_duration_ms("maxTriggerDelay",
                                                                        raw_delay)
        return cls(
            client=client, subscription=subscription, starting=starting, ending=ending,
            max_offsets_per_trigger=max_per, min_offsets_per_trigger=min_per,
            max_trigger_delay_ms=delay, default_read_bound=default_bound,
            min_partitions=min_parts,
            max_records_per_partition=_int(opts, "maxRecordsPerPartition", None),
            max_partitions=max_parts,
            fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
            include_headers=_bool(opts, "includeHeaders", False),
            read_committed=read_committed,
            fetch_max_bytes=_fetch_bytes(opts),
            poll_timeout_ms=_int(opts, "kafkaConsumer.pollTimeoutMs", 120_000),
            progress_group=(_get(opts, PREFIX + "group.id") or None) if streaming else None,
            check_crcs=_bool(opts, PREFIX + "check.crcs", False),
            formats=ReadFormats.parse(opts, subscription.named_topics),
        )
