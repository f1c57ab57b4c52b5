"""Shared option parsing: names, typed getters, unknown-option errors."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import overload

from ..client.keys import (
    PREFIX,
    closest,
    shown,
)
from ..client.table import TABLE
from ..errors import ConfigError
from ..formats.options import REGISTRY_PREFIX, SINK_FORMAT_OPTIONS, SOURCE_FORMAT_OPTIONS

SOURCE_OPTIONS = (
    "subscribe", "subscribePattern", "assign",
    "startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp",
    "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
    "minPartitions", "maxRecordsPerPartition", "maxPartitions", "failOnDataLoss", "includeHeaders",
    "fetchMaxBytes", "kafkaConsumer.pollTimeoutMs",
    # Schema'd payloads (formats/options.py); schema.registry.* keys are the registry's.
    *SOURCE_FORMAT_OPTIONS,
)
#: Spark Kafka source options accepted for compatibility; they have no effect here.
SOURCE_IGNORED = ("groupIdPrefix", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs")
SINK_OPTIONS = (
    "topic", "transactionalIdPrefix", "delivery.guarantee", "checkpointLocation",
    "decisionLogLocation", "producer.batchRecords", "deadLetterTopic",
    # Spark passes a named query's name (DataStreamWriter.queryName) to its sink.
    "queryName",
    # Spark users pass the source's includeHeaders to the sink too; as in Spark's sink, a
    # headers column is written whenever the input has one, so the option only validates.
    "includeHeaders",
    *SINK_FORMAT_OPTIONS,
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
    unknown = sorted(k for k in opts if not k.startswith((PREFIX, REGISTRY_PREFIX))
                     and k not in lowered)
    if unknown:
        hints = ", ".join(f"'{k}'{_hint(k, known)}" for k in unknown)
        raise ConfigError(
            f"unknown option{'s' if len(unknown) > 1 else ''} for the eoskafka {role}: "
            f"{hints}. Names are case-insensitive; Kafka's client settings take the prefix "
            f"'kafka.', a schema registry's 'schema.registry.'; the options page "
            f"(docs/options.md) lists the {role}'s. Fix or remove it.")


def _hint(key: str, known: list[str]) -> str:
    """A Kafka client setting given without its ``kafka.`` prefix is answered with its
    prefixed name (``bootstrap.servers``: ``kafka.bootstrap.servers``); otherwise the
    nearest option name, if one is near."""
    if key in TABLE:
        return f" (a Kafka client setting: did you mean '{PREFIX}{key}'?)"
    near = closest(key, known)
    return f" (did you mean '{near}'?)" if near else ""


@overload
def _int(opts: Mapping[str, str], name: str, default: int, *, minimum: int = 1,
         maximum: int | None = None, why: str = "") -> int: ...
@overload
def _int(opts: Mapping[str, str], name: str, default: None, *, minimum: int = 1,
         maximum: int | None = None, why: str = "") -> int | None: ...
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

