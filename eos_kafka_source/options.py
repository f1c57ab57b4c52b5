"""Source and sink options: validated once at the edge into frozen objects.

Spark hands a data source its options as strings in a case-insensitive map
(keys arrive lower-cased in Python data sources). :meth:`SourceOptions.parse`
and :meth:`SinkOptions.parse` run on the driver, turn that map into typed,
frozen, picklable values, and raise :class:`ConfigError` naming the option, the
bad value and the fix, so nothing deeper has to re-check a string. Option names
and meanings follow Spark's Kafka source where one exists.

Rules chosen here, beyond Spark's:

* An unknown option is an error with a "did you mean" hint, never ignored.
  ``groupIdPrefix``, ``fetchOffset.numRetries``, ``fetchOffset.retryIntervalMs``
  and ``kafka.group.id`` are accepted and ignored: Spark jobs set them and they
  mean nothing here (no consumer group is used).
* An option that would have no effect is an error: trigger limits on a batch
  read, ending offsets on a stream, producer settings on a source, consumer
  settings on a sink, exactly-once settings with ``at_least_once`` delivery.
* ``startingOffsets``, ``startingTimestamp`` and ``startingOffsetsByTimestamp``
  are mutually exclusive (Spark silently applies a precedence); the same for
  the three ending options.
* ``kafka.isolation.level`` defaults to ``read_committed`` (Spark: uncommitted).

>>> opts = SourceOptions.parse({"kafka.bootstrap.servers": "b:9092",
...                             "subscribe": "t"}, streaming=True)
>>> opts.subscription.topics, opts.starting.kind
(('t',), 'latest')
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from eos_kafka_source.client_config import (
    CONSUMER_KEYS,
    PREFIX,
    PRODUCER_KEYS,
    ClientConfig,
    closest,
    normalize_options,
    shown,
)
from eos_kafka_source.errors import ConfigError
from eos_kafka_source.offsets import (
    EARLIEST,
    LATEST,
    EndingSpec,
    StartingSpec,
    TopicPartition,
    parse_offsets_json,
    tp_name,
)

SOURCE_OPTIONS = (
    "subscribe", "subscribePattern", "assign",
    "startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp",
    "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
    "minPartitions", "maxRecordsPerPartition", "failOnDataLoss", "includeHeaders",
    "fetchMaxBytes", "kafkaConsumer.pollTimeoutMs",
)
#: Spark Kafka source options accepted for compatibility; they have no effect here.
SOURCE_IGNORED = ("groupIdPrefix", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs")
SINK_OPTIONS = (
    "topic", "transactionalIdPrefix", "delivery.guarantee", "checkpointLocation",
    "decisionLogLocation", "producer.batchRecords",
)

MAX_FETCH_BYTES = 32 * 1024 * 1024
MAX_TRANSACTION_TIMEOUT_MS = 3_600_000
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_ID_PREFIX = re.compile(r"[A-Za-z0-9._-]{1,200}")
_DURATION = re.compile(r"(\d+)\s*(ms|s|m|min|h|d)?", re.I)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def _get(opts: Mapping[str, str], name: str) -> str | None:
    return opts.get(name.lower())


def _reject_unknown(opts: Mapping[str, str], allowed: Iterable[str], role: str) -> None:
    known = list(allowed)
    lowered = {k.lower() for k in known}
    unknown = sorted(k for k in opts if not k.startswith(PREFIX) and k not in lowered)
    if unknown:
        hints = ", ".join(
            f"'{k}'" + (f" (did you mean '{c}'?)" if (c := closest(k, known)) else "")
            for k in unknown)
        raise ConfigError(
            f"unknown option{'s' if len(unknown) > 1 else ''} for the eoskafka {role}: "
            f"{hints}. Names are case-insensitive; the {role} accepts "
            f"{', '.join(known)} and kafka.* settings. Fix or remove it.")


def _int(opts: Mapping[str, str], name: str, default: int | None, *, minimum: int = 1,
         maximum: int | None = None, why: str = "") -> int | None:
    raw = _get(opts, name)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        value = None
    if value is None or value < minimum or (maximum is not None and value > maximum):
        bounds = (f"between {minimum} and {maximum}" if maximum is not None
                  else "a positive integer" if minimum == 1 else f"an integer >= {minimum}")
        raise ConfigError(f"{name} must be {bounds}, got {shown(name, raw)}.{why}")
    return value


def _choice(opts: Mapping[str, str], name: str, choices: tuple[str, ...],
            default: str | None) -> str | None:
    raw = _get(opts, name)
    if raw is None:
        return default
    if raw.strip().lower() not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {shown(name, raw)}.")
    return raw.strip().lower()


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    value = _choice(opts, name, ("true", "false"), None)
    return default if value is None else value == "true"


def parse_duration_ms(name: str, raw: str) -> int:
    """``"500ms"``, ``"30s"``, ``"15m"``, ``"2h"``, ``"1d"``; a bare number is ms (as Spark)."""
    m = _DURATION.fullmatch(raw.strip())
    if not m:
        raise ConfigError(f"{name} must be a duration like 500ms, 30s, 15m, 2h or 1d, "
                          f"got {raw!r}.")
    return int(m.group(1)) * _UNIT_MS[(m.group(2) or "ms").lower()]


def _check_topic(option: str, topic: str) -> str:
    if not _TOPIC.fullmatch(topic) or topic in (".", ".."):
        raise ConfigError(f"{option}: {topic!r} is not a valid Kafka topic name (1-249 "
                          f"characters from A-Z a-z 0-9 . _ -); fix the name.")
    return topic


def _exclusive(opts: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    given = [n for n in names if _get(opts, n) is not None]
    if len(given) > 1:
        raise ConfigError(f"{' and '.join(given)} are all set, but they are alternatives; "
                          f"keep only one of {', '.join(names)}.")
    return given[0] if given else None


@dataclass(frozen=True)
class Subscription:
    """Which partitions a query reads: exactly one of ``subscribe`` (topics),
    ``subscribePattern`` (a regex over topic names, matched in full as Kafka
    does) or ``assign`` (fixed topic-partitions)."""

    kind: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

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


def _time_spec(opts: Mapping[str, str], name: str) -> dict[str, object]:
    """Fields of a spec for ``*Timestamp`` (one ms value) or ``*OffsetsByTimestamp`` (JSON)."""
    if name in ("startingTimestamp", "endingTimestamp"):
        return {"kind": "timestamp", "timestamp": _int(opts, name, None, minimum=0),
                "option": name}
    per = _per_partition(name, _get(opts, name) or "", minimum=0, what="a timestamp in ms (>= 0)")
    return {"kind": "timestamps", "per_partition": per, "option": name}


def _starting(opts: Mapping[str, str], streaming: bool) -> StartingSpec:
    name = _exclusive(opts, ("startingOffsets", "startingTimestamp",
                             "startingOffsetsByTimestamp"))
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
    names = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
    name = _exclusive(opts, names)
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


def _refuse(opts: Mapping[str, str], reasons: Mapping[str, str], role: str) -> None:
    for key in sorted(reasons):
        if PREFIX + key in opts:
            raise ConfigError(f"kafka.{key} is not allowed on the {role}: {reasons[key]}. "
                              f"Remove it.")


_SOURCE_REFUSED = {
    "enable.auto.commit": "eoskafka keeps its progress in the Spark checkpoint, not in "
                          "consumer-group offsets",
    "auto.offset.reset": "use startingOffsets to choose where a new query starts (and "
                         "failOnDataLoss for offsets that disappear)",
    **{k: "it is a producer setting and has no effect on a read" for k in PRODUCER_KEYS},
}
_SINK_REFUSED = {
    "transactional.id": "eoskafka assigns transactional ids itself; use transactionalIdPrefix",
    "isolation.level": "it is a consumer setting; the sink always writes transactionally and "
                       "readers choose their own isolation level",
    **{k: "it is a consumer setting and a write does not read"
       for k in CONSUMER_KEYS - {"isolation.level"}},
}


def _source_role_keys(opts: Mapping[str, str]) -> bool:
    """Judge the consumer/producer kafka.* keys on a read; returns read_committed."""
    _refuse(opts, _SOURCE_REFUSED, "source")
    level = _choice(opts, PREFIX + "isolation.level", ("read_committed", "read_uncommitted"),
                    "read_committed")
    return level == "read_committed"


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
    fail_on_data_loss: bool = True
    include_headers: bool = False
    read_committed: bool = True
    fetch_max_bytes: int = 8 * 1024 * 1024
    poll_timeout_ms: int = 120_000

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        """Validate Spark's option map for a streaming (``readStream``) or batch read."""
        opts = normalize_options(options)
        _reject_unknown(opts, SOURCE_OPTIONS + SOURCE_IGNORED, "source")
        client = ClientConfig.from_options(opts)
        read_committed = _source_role_keys(opts)
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
        raw_delay = _get(opts, "maxTriggerDelay")
        delay = 15 * 60_000 if raw_delay is None else parse_duration_ms("maxTriggerDelay",
                                                                        raw_delay)
        return cls(
            client=client, subscription=subscription, starting=starting, ending=ending,
            max_offsets_per_trigger=max_per, min_offsets_per_trigger=min_per,
            max_trigger_delay_ms=delay,
            min_partitions=_int(opts, "minPartitions", None),
            max_records_per_partition=_int(opts, "maxRecordsPerPartition", None),
            fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
            include_headers=_bool(opts, "includeHeaders", False),
            read_committed=read_committed,
            fetch_max_bytes=_int(
                opts, "fetchMaxBytes", 8 * 1024 * 1024, maximum=MAX_FETCH_BYTES,
                why=" A fetch must fit in one response of at most 64 MiB, with room for one "
                    "oversized record batch; use e.g. 8388608 (8 MiB)."),
            poll_timeout_ms=_int(opts, "kafkaConsumer.pollTimeoutMs", 120_000),
        )


def _sink_role_keys(opts: Mapping[str, str]) -> None:
    """Refuse kafka.* settings that would break or contradict the transactional writer."""
    _refuse(opts, _SINK_REFUSED, "sink")
    acks = opts.get(PREFIX + "acks")
    if acks is not None and acks.strip().lower() not in ("all", "-1"):
        raise ConfigError(f"kafka.acks={acks!r} is not allowed: transactions and "
                          f"idempotent writes need acks=all so no acknowledged record can be "
                          f"lost. Remove it or set kafka.acks=all.")
    if not _bool(opts, PREFIX + "enable.idempotence", True):
        raise ConfigError("kafka.enable.idempotence=false is not allowed: the sink needs the "
                          "idempotent producer to avoid duplicates on retry. Remove it.")


@dataclass(frozen=True)
class SinkOptions:
    """Everything a Kafka write needs, validated; built on the driver, pickled to
    executors with the writer.

    ``checkpoint_location`` is where the decision log lives: ``decisionLogLocation``
    if given, else the ``checkpointLocation`` Spark passes to streaming writes;
    None for a batch write without ``decisionLogLocation`` (the writer decides
    whether it can go on without one).
    """

    client: ClientConfig
    topic: str | None = None
    transactional_id_prefix: str | None = None
    delivery: str = "exactly_once"
    transaction_timeout_ms: int = 900_000
    checkpoint_location: str | None = None
    linger_records: int = 10_000

    @property
    def exactly_once(self) -> bool:
        return self.delivery == "exactly_once"

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        """Validate Spark's option map for a streaming or batch write."""
        opts = normalize_options(options)
        _reject_unknown(opts, SINK_OPTIONS, "sink")
        client = ClientConfig.from_options(opts)
        _sink_role_keys(opts)
        delivery = _choice(opts, "delivery.guarantee", ("exactly_once", "at_least_once"),
                           "exactly_once") or "exactly_once"
        if delivery == "at_least_once":
            for name in ("transactionalIdPrefix", "decisionLogLocation",
                         PREFIX + "transaction.timeout.ms"):
                if _get(opts, name) is not None:
                    raise ConfigError(f"{name} only applies to delivery.guarantee=exactly_once "
                                      f"and would have no effect with at_least_once; remove it.")
        topic = _get(opts, "topic")
        if topic is not None:
            _check_topic("topic", topic.strip())
            topic = topic.strip()
        prefix = _get(opts, "transactionalIdPrefix")
        if prefix is not None and not _ID_PREFIX.fullmatch(prefix):
            raise ConfigError(f"transactionalIdPrefix {prefix[:250]!r} is not valid: use 1-200 "
                              f"characters from A-Z a-z 0-9 . _ - (for example 'orders-app').")
        timeout = _int(
            opts, PREFIX + "transaction.timeout.ms", 900_000, maximum=MAX_TRANSACTION_TIMEOUT_MS,
            why=" Brokers refuse timeouts above their transaction.max.timeout.ms (default "
                "900000, 15 min); use at most that unless the broker allows more.")
        location = None
        for name in ("decisionLogLocation", "checkpointLocation"):
            value = _get(opts, name)
            if value is not None and not value.strip():
                raise ConfigError(f"{name} is empty; give a directory path or URI.")
            location = location or value
        return cls(
            client=client, topic=topic, transactional_id_prefix=prefix, delivery=delivery,
            transaction_timeout_ms=timeout or 900_000, checkpoint_location=location,
            linger_records=_int(opts, "producer.batchRecords", 10_000) or 10_000,
        )
