"""Which ``kafka.*`` keys eoskafka knows, and the helpers every option parser shares.

Every ``kafka.*`` key is in :data:`~eos_kafka_source.client.table.TABLE`, honoured or
refused with why and what to use instead (:func:`check_keys`); a key that is not is
refused with a "did you mean" hint. Keys honoured on one side only (a producer setting on
a read) are refused by the source and sink options (:func:`refuse_other_side`).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping

from eos_kafka_source.client.table import HONOURED, NOT_APPLICABLE, TABLE, other_side
from eos_kafka_source.errors import ConfigError

PREFIX = "kafka."

#: The deadlines, as the Java client names them: (default ms, what eoskafka bounds with it).
#: Every retry loop of one operation shares one deadline, so the operation as a whole ends
#: when the user's setting says: a broker restart, a moved coordinator or leader, a paused
#: node or a short ISR is retried until it passes.
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

#: Honoured settings the task writer reads from ``ClientConfig.extra`` (validated by
#: SinkOptions): kept there because recovery's writer has no SinkOptions.
WRITER_KEYS = frozenset({"max.request.size", "max.in.flight.requests.per.connection"})
_SECRET_KEYS = frozenset({"sasl.jaas.config", "sasl.password", "ssl.key.password",
                          "ssl.keystore.password", "ssl.truststore.password"})

def is_secret(key: str) -> bool:
    """Whether the value of option ``key`` must never be shown."""
    k = key.lower()
    return (k.removeprefix(PREFIX) in _SECRET_KEYS or "password" in k or "secret" in k
            or k.endswith(("user.info", "auth.token")))  # schema.registry.* sign-ins


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
    """Refuse a ``kafka.*`` key (given without its prefix) that is unknown or not honoured,
    naming it, why, and what to use (or the nearest known key)."""
    for key in sorted(kafka):
        entry = TABLE.get(key)
        if entry is None:
            raise ConfigError(
                f"unknown option 'kafka.{key}'.{suggest(PREFIX + key, _prefixed(TABLE))} "
                f"eoskafka knows every setting of Kafka's Java clients (docs/options.md "
                f"lists what each does here); fix or remove it."
            )
        if entry.status == NOT_APPLICABLE:
            raise ConfigError(f"option kafka.{key} does not apply to eoskafka: {entry.text}. "
                              f"Remove it.")
        if entry.status != HONOURED:
            raise ConfigError(f"option kafka.{key} is not supported: {entry.text}. "
                              f"Remove it.")


def refuse_other_side(opts: Mapping[str, str], role: str) -> None:
    """Refuse ``kafka.*`` keys of ``opts`` honoured only on the other side (``role``: the
    table's SOURCE or SINK)."""
    for key in sorted(opts):
        why = other_side(key[len(PREFIX):], role) if key.startswith(PREFIX) else None
        if why is not None:
            name = "source" if role == "source" else "sink"
            raise ConfigError(f"{key} is not allowed on the {name}: {why}. Remove it.")


def _prefixed(keys: Collection[str]) -> list[str]:
    return [PREFIX + k for k in keys]
