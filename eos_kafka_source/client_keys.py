"""Which ``kafka.*`` keys eoskafka knows, and the helpers every option parser shares.

Every ``kafka.*`` key must be one of: a connection setting (:data:`CONNECTION_KEYS`, parsed
into :class:`~eos_kafka_source.client_config.ClientConfig`); one of :data:`PASSTHROUGH_KEYS`,
accepted so Spark jobs keep working and kept without effect unless a wire module reads it;
or one of :data:`ROLE_KEYS`, which the source and sink options judge themselves. Anything
else is refused with a "did you mean" hint (:func:`check_keys`).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping

from eos_kafka_source.errors import ConfigError
from eos_kafka_source.kerberos_config import KERBEROS_KEYS, KERBEROS_PASSTHROUGH
from eos_kafka_source.oauth_config import OAUTH_KEYS, OAUTH_PASSTHROUGH

PREFIX = "kafka."

#: Parsed into :class:`ClientConfig` fields (names without the ``kafka.`` prefix).
CONNECTION_KEYS = frozenset({
    "bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.jaas.config",
    "sasl.username", "sasl.password", "ssl.truststore.location", "ssl.truststore.type",
    "ssl.truststore.password", "ssl.ca.location", "ssl.certificate.location",
    "ssl.key.location", "ssl.key.password", "ssl.keystore.location", "ssl.keystore.type",
    "ssl.keystore.password", "ssl.endpoint.identification.algorithm", "request.timeout.ms",
    "socket.connection.setup.timeout.ms", "client.id", "default.api.timeout.ms",
    "delivery.timeout.ms", "max.block.ms",
}) | OAUTH_KEYS | KERBEROS_KEYS

#: The deadlines, as the Java client names them: (default ms, what eoskafka bounds with it).
#: Every retry loop of one operation shares one deadline (issue 16): a broker restart, a
#: moved coordinator or leader, a paused node or a short ISR is retried until it passes.
DEADLINES: dict[str, tuple[int, str]] = {
    "request.timeout.ms": (30_000, "one request: how long an answer is awaited before the "
                           "request counts as lost (the node may be paused or gone) and is "
                           "retried within its operation's deadline"),
    "socket.connection.setup.timeout.ms": (10_000, "one connection attempt to one broker"),
    "default.api.timeout.ms": (60_000, "each driver-side or metadata operation, all its "
                               "retries included: planning (latestOffset, initialOffset), "
                               "metadata and leader lookups, FindCoordinator, fencing "
                               "(InitProducerId), aborts, consumer-group offsets"),
    "delivery.timeout.ms": (120_000, "a Produce batch, all its re-sends included (a lost "
                            "leader, NOT_ENOUGH_REPLICAS, a request timeout); at least "
                            "request.timeout.ms"),
    "max.block.ms": (60_000, "a task's transactional calls before and between writes: "
                     "FindCoordinator, InitProducerId, AddPartitionsToTxn"),
}

#: Java client settings accepted and kept in ``ClientConfig.extra``. Most are tuning of a
#: client we do not run and change nothing; the sink reads a few (its produce batching,
#: compression and deadlines): docs/options.md says which, checked by tests/unit/test_docs.py.
PASSTHROUGH_KEYS = frozenset({
    # common
    "client.dns.lookup", "connections.max.idle.ms", "metadata.max.age.ms",
    "receive.buffer.bytes", "send.buffer.bytes", "reconnect.backoff.ms",
    "reconnect.backoff.max.ms", "retry.backoff.ms", "retry.backoff.max.ms",
    "socket.connection.setup.timeout.max.ms", "client.rack",
    "ssl.protocol", "ssl.enabled.protocols", "ssl.cipher.suites",
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    # consumer
    "session.timeout.ms", "heartbeat.interval.ms", "max.poll.records",
    "max.poll.interval.ms", "fetch.min.bytes", "fetch.max.bytes", "fetch.max.wait.ms",
    "max.partition.fetch.bytes", "check.crcs", "allow.auto.create.topics",
    # producer
    "linger.ms", "batch.size", "buffer.memory", "compression.type", "compression.gzip.level",
    "compression.lz4.level", "compression.zstd.level", "max.request.size",
    "retries", "max.in.flight.requests.per.connection",
})

#: Settings whose meaning depends on reading or writing; judged by SourceOptions/SinkOptions.
CONSUMER_KEYS = frozenset({"isolation.level", "group.id", "enable.auto.commit",
                           "auto.offset.reset"})
PRODUCER_KEYS = frozenset({"acks", "enable.idempotence", "transactional.id",
                           "transaction.timeout.ms"})
ROLE_KEYS = CONSUMER_KEYS | PRODUCER_KEYS

_BYTES = "keys and values are always bytes; cast or serialize in a DataFrame instead"
REJECTED = {
    "key.serializer": _BYTES, "value.serializer": _BYTES,
    "key.deserializer": _BYTES, "value.deserializer": _BYTES,
    "interceptor.classes": "Java interceptors cannot run in eoskafka's Python client",
    "partitioner.class": "partitions come from the partition column or the key hash",
    "ssl.truststore.certificates": "inline certificates are not supported; write them "
    "to a PEM file and set kafka.ssl.truststore.location",
    "ssl.keystore.certificate.chain": "inline certificates are not supported; write them "
    "to a PEM file and set kafka.ssl.certificate.location",
    "ssl.keystore.key": "inline keys are not supported; write the key to a PEM file and "
    "set kafka.ssl.key.location",
    "sasl.client.callback.handler.class": "Java callback handlers cannot run in Python",
}
_SECRET_KEYS = frozenset({"sasl.jaas.config", "sasl.password", "ssl.key.password",
                          "ssl.keystore.password", "ssl.truststore.password"})

def is_secret(key: str) -> bool:
    """Whether the value of option ``key`` must never be shown."""
    k = key.lower()
    return k.removeprefix(PREFIX) in _SECRET_KEYS or "password" in k or "secret" in k


def shown(key: str, value: str) -> str:
    """``value`` quoted for an error message, or ``'***'`` for a secret option."""
    if is_secret(key):
        return "'***'"
    return repr(value if len(value) <= 200 else value[:200] + "...")


def normalize_options(options: Mapping[str, str]) -> dict[str, str]:
    """Lower-case the keys (Spark options are case-insensitive); refuse a key
    given twice with different values."""
    out: dict[str, str] = {}
    for key, value in options.items():
        k = key.strip().lower()
        if k in out and out[k] != value:
            raise ConfigError(
                f"option {key!r} is given twice with different values (option names are "
                f"case-insensitive); keep one."
            )
        out[k] = value
    return out


def closest(key: str, known: Collection[str]) -> str | None:
    """The known name nearest to ``key`` (difflib), in its canonical spelling."""
    lowered = {k.lower(): k for k in known}
    match = difflib.get_close_matches(key.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[match[0]] if match else None


def suggest(key: str, known: Collection[str]) -> str:
    """`` Did you mean 'x'?`` for the closest known name, or ``""``."""
    match = closest(key, known)
    return f" Did you mean '{match}'?" if match else ""


def check_keys(kafka: Mapping[str, str]) -> None:
    """Refuse a ``kafka.*`` key (given without its prefix) that is unknown or unsupported,
    naming it, why, and the nearest known key."""
    known = (CONNECTION_KEYS | PASSTHROUGH_KEYS | ROLE_KEYS | OAUTH_PASSTHROUGH
             | KERBEROS_PASSTHROUGH)
    for key in sorted(kafka):
        if key in REJECTED:
            raise ConfigError(f"option kafka.{key} is not supported: {REJECTED[key]}. "
                              f"Remove it.")
        if key not in known:
            raise ConfigError(
                f"unknown option 'kafka.{key}'.{suggest(PREFIX + key, _prefixed(known))} "
                f"eoskafka accepts the connection settings (kafka.bootstrap.servers, "
                f"kafka.security.protocol, kafka.sasl.*, kafka.ssl.*) and the Java client "
                f"settings in eos_kafka_source.client_keys.PASSTHROUGH_KEYS; fix or "
                f"remove it."
            )


def _prefixed(keys: Collection[str]) -> list[str]:
    return [PREFIX + k for k in keys]
