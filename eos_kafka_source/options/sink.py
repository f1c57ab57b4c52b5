"""Sink options: topic, dead-letter topic, delivery guarantee, transactional ids,
transaction timeout."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..client.config import ClientConfig
from ..client.keys import PREFIX, normalize_options, refuse_other_side
from ..client.table import SINK
from ..errors import ConfigError
from ..formats.options import WriteFormats
from ._common import (
    _ID_PREFIX,
    MAX_TRANSACTION_TIMEOUT_MS,
    SINK_OPTIONS,
    _bool,
    _check_topic,
    _choice,
    _get,
    _int,
    _reject_unknown,
)


def _sink_role_keys(opts: Mapping[str, str]) -> None:
    """Refuse kafka.* settings that would break or contradict the transactional writer."""
    refuse_other_side(opts, SINK)
    _int(opts, PREFIX + "max.request.size", 0, why=" It caps a Produce request's bytes, "
         "like the Java producer's; e.g. 1048576.")
    _int(opts, PREFIX + "max.in.flight.requests.per.connection", 0, maximum=5,
         why=" The idempotent producer keeps order with at most 5 requests in flight.")
    acks = opts.get(PREFIX + "acks")
    if acks is not None and acks.strip().lower() not in ("all", "-1"):
        raise ConfigError(f"kafka.acks={acks!r} is not allowed: transactions and "
                          f"idempotent writes need acks=all so no acknowledged record can be "
                          f"lost. Remove it or set kafka.acks=all.")
    if not _bool(opts, PREFIX + "enable.idempotence", True):
        raise ConfigError("kafka.enable.idempotence=false is not allowed: the sink needs the "
                          "idempotent producer to avoid duplicates on retry. Remove it.")


#: ``kafka.compression.type`` -> the record batch codec id (attributes bits 0-2).
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
#: Bytes of records per produce batch when ``kafka.batch.size`` is not set: under the
#: brokers' default max.message.bytes (1 MiB). Java's 16 KiB default suits a producer
#: that sends as records arrive; a task holds its rows already, and bigger batches win.
DEFAULT_BATCH_BYTES = 900_000


def _codec(opts: Mapping[str, str]) -> int:
    """``kafka.compression.type``, refused early when its codec cannot be loaded here."""
    name = _choice(opts, PREFIX + "compression.type", tuple(CODECS), "none") or "none"
    codec = CODECS[name]
    if codec:
        from ..records.encode import compress

        compress(codec, b"probe")  # ConfigError naming the package to install
    return codec


#: ``kafka.compression.<codec>.level`` (KIP-390, Kafka 3.8): codec id -> (name, lowest,
#: highest) as the Java producer accepts them (gzip also takes -1, its default).
LEVELS = {1: ("gzip", 1, 9), 3: ("lz4", 1, 17), 4: ("zstd", -131072, 22)}


def _level(opts: Mapping[str, str], codec: int) -> int | None:
    """The level of the codec in use; a level for another codec would do nothing: refused."""
    level = None
    for cid, (name, lowest, highest) in LEVELS.items():
        key = f"{PREFIX}compression.{name}.level"
        if _get(opts, key) is None:
            continue
        if cid != codec:
            used = next(n for n, c in CODECS.items() if c == codec)
            raise ConfigError(f"{key} only applies with kafka.compression.type={name} (this "
                              f"write uses {used}); remove it or set the codec's own level.")
        if name == "gzip" and (_get(opts, key) or "").strip() == "-1":
            return None  # Java's "default" (zlib's 6)
        level = _int(opts, key, None, minimum=lowest, maximum=highest,
                     why=" It is the Java producer's setting of the same name (KIP-390).")
    return level


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
    #: Codec of every produce batch (``kafka.compression.type``; 0 = none).
    compression: int = 0
    #: ``kafka.compression.<codec>.level``; None: the Java producer's default level.
    compression_level: int | None = None
    #: Cap on a produce batch's uncompressed record bytes (``kafka.batch.size``; 0 means
    #: one record per batch, as in Java). ``kafka.linger.ms`` needs no field: a task
    #: batches from rows it already holds and flushes at its end, so it never waits.
    batch_bytes: int = DEFAULT_BATCH_BYTES
    #: ``valueFormat``/``keyFormat`` and the schema options; None when both are raw.
    formats: WriteFormats | None = None
    #: ``deadLetterTopic``: where rows with a ``deadLetter`` go, raw (sink/task/dead_letters.py).
    dead_letter_topic: str | None = None

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
        dead_letter_topic = _dead_letter_topic(opts, topic)
        prefix = _get(opts, "transactionalIdPrefix")
        if prefix is not None and not _ID_PREFIX.fullmatch(prefix):
            raise ConfigError(f"transactionalIdPrefix {prefix[:250]!r} is not valid: use 1-200 "
                              f"characters from A-Z a-z 0-9 . _ - (for example 'orders-app').")
        timeout = _int(
            opts, PREFIX + "transaction.timeout.ms", 900_000, maximum=MAX_TRANSACTION_TIMEOUT_MS,
            why=" Brokers refuse timeouts above their transaction.max.timeout.ms (default "
                "900000, 15 min); use at most that unless the broker allows more.")
        _bool(opts, "includeHeaders", False)  # accepted as Spark's sink does; see SINK_OPTIONS
        _int(opts, PREFIX + "linger.ms", 0, minimum=0)  # valid, and met without waiting
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
            compression=(codec := _codec(opts)),
            compression_level=_level(opts, codec),
            batch_bytes=_int(opts, PREFIX + "batch.size", DEFAULT_BATCH_BYTES, minimum=0,
                             why=" It caps a produce batch's bytes, like the Java "
                                 "producer's; e.g. 1048576.") or 0,
            formats=WriteFormats.parse(opts),
            dead_letter_topic=dead_letter_topic,
        )


def _dead_letter_topic(opts: Mapping[str, str], topic: str | None) -> str | None:
    """``deadLetterTopic``: a valid topic name, and not the good records' own topic."""
    raw = _get(opts, "deadLetterTopic")
    if raw is None:
        return None
    name = _check_topic("deadLetterTopic", raw.strip())
    if name == topic:
        raise ConfigError(f"deadLetterTopic is the topic option's topic ({name}): the records "
                          f"that did not decode would be mixed with the good ones. Name "
                          f"another topic, e.g. {name}-dlq.")
    return name
