"""``kafka.*`` options -> the connection settings every eoskafka client uses.

Parsed once, on the driver, into a frozen :class:`ClientConfig` that pickles to
executors. Users coming from Spark's Kafka source write Java client names
(``kafka.bootstrap.servers``, ``kafka.sasl.jaas.config``,
``kafka.ssl.truststore.location``); they are translated to kafka-python's
arguments here, so the rest of the code never sees Java names.

Secrets (SASL password, JAAS config, SSL key password) are kept for the wire
layer but never appear in a repr, a str or an error message.

Every ``kafka.*`` key must be one of: a connection setting parsed here; one of
:data:`PASSTHROUGH_KEYS`, accepted so Spark jobs keep working and kept in
``extra`` without effect unless a wire module reads it; or one of
:data:`ROLE_KEYS`, which the source and sink options judge themselves.
Anything else is an error with a "did you mean" hint.

>>> ClientConfig.from_options({"kafka.bootstrap.servers": "b1:9092"}).bootstrap_servers
('b1:9092',)
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields

from eos_kafka_source.errors import ConfigError
from eos_kafka_source.kerberos_config import (
    KERBEROS_KEYS,
    KERBEROS_PASSTHROUGH,
    KerberosSettings,
    parse_kerberos,
)
from eos_kafka_source.oauth_config import (
    OAUTH_KEYS,
    OAUTH_PASSTHROUGH,
    OAuthSettings,
    parse_oauth,
)

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
_REJECTED = {
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
_MSK_IAM = ("kafka.sasl.mechanism=AWS_MSK_IAM is not supported as such; AWS's Python signer "
            "(aws-msk-iam-sasl-signer-python) signs in over OAUTHBEARER: set "
            "kafka.sasl.mechanism=OAUTHBEARER and kafka.sasl.oauthbearer.token.provider to a "
            "callable returning MSKAuthTokenProvider.generate_auth_token(region) "
            "(docs/security.md#aws-msk-iam).")

_SECRET_KEYS = frozenset({"sasl.jaas.config", "sasl.password", "ssl.key.password",
                          "ssl.keystore.password", "ssl.truststore.password"})
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")
_JAVA_STORE_EXT = (".jks", ".p12", ".pfx", ".keystore", ".truststore")
_SERVER = re.compile(r"(\[[0-9A-Za-z:.%]+\]|[A-Za-z0-9._-]+):(\d{1,5})")
_JAAS = re.compile(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b(.*)", re.S)
_JAAS_PAIR = re.compile(r'\s*([\w.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')
_JAAS_HELP = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="USER" password="PASSWORD";')

#: Largest message kafka-python may read; its 1 MB default breaks big fetches.
RECEIVE_MESSAGE_MAX_BYTES = 64 * 1024 * 1024


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


def _positive_int(key: str, value: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        number = 0
    if number <= 0:
        raise ConfigError(f"{key} must be a positive integer of milliseconds, got "
                          f"{shown(key, value)}; for example {key}=30000.")
    return number


def _parse_servers(value: str | None) -> tuple[str, ...]:
    key = "kafka.bootstrap.servers"
    fix = f"Set .option('{key}', 'host1:9092,host2:9092')."
    if value is None or not value.strip():
        raise ConfigError(f"{key} is required and was not given. {fix}")
    servers = []
    for item in (s.strip() for s in value.split(",")):
        if not item:
            continue
        address = item.split("://", 1)[-1]  # tolerate "PLAINTEXT://host:9092"
        m = _SERVER.fullmatch(address)
        if not m or not 0 < int(m.group(2)) < 65536:
            raise ConfigError(f"{key} entry {item!r} is not host:port (port 1-65535). {fix}")
        servers.append(address)
    if not servers:
        raise ConfigError(f"{key} names no broker in {value!r}. {fix}")
    return tuple(servers)


def _parse_jaas(value: str) -> tuple[str, dict[str, str]]:
    """``(login module's class name, its options)`` from a JAAS line."""
    key = "kafka.sasl.jaas.config"
    bad = ConfigError(f"{key} could not be parsed (value hidden). Write it as {_JAAS_HELP}")
    m = _JAAS.fullmatch(value.strip())
    if not m:
        raise bad
    module, body, pos, pairs = m.group(1), m.group(3).strip(), 0, {}
    body = body[:-1] if body.endswith(";") else body
    while pos < len(body):
        pm = _JAAS_PAIR.match(body, pos)
        if not pm:
            raise bad
        raw = pm.group(2) if pm.group(2) is not None else pm.group(3)
        pairs[pm.group(1)] = re.sub(r"\\(.)", r"\1", raw)
        pos = pm.end()
        while pos < len(body) and body[pos].isspace():
            pos += 1
    kind = module.rsplit(".", 1)[-1]
    if kind not in ("PlainLoginModule", "ScramLoginModule", "OAuthBearerLoginModule",
                    "Krb5LoginModule"):
        raise ConfigError(
            f"{key} uses login module {kind}; eoskafka supports PlainLoginModule, "
            f"ScramLoginModule, OAuthBearerLoginModule and Krb5LoginModule (mechanisms "
            f"{', '.join(_MECHANISMS)})."
        )
    return kind, pairs


def _user_password(kind: str, pairs: Mapping[str, str]) -> tuple[str, str]:
    """``(username, password)`` of a PLAIN or SCRAM JAAS line."""
    key = "kafka.sasl.jaas.config"
    if "username" not in pairs or "password" not in pairs:
        raise ConfigError(f"{key} must set both username and password. "
                          f"Write it as {_JAAS_HELP}")
    return pairs["username"], pairs["password"]


def _store_path(kafka: Mapping[str, str], what: str) -> str | None:
    """A PEM path from ``ssl.<what>.location``, refusing Java key stores."""
    location = kafka.get(f"ssl.{what}.location")
    if location is None:
        return None
    key = f"kafka.ssl.{what}.location"
    store_type = kafka.get(f"ssl.{what}.type", "").strip().upper()
    if store_type not in ("", "PEM", "JKS", "PKCS12"):
        raise ConfigError(f"kafka.ssl.{what}.type={store_type!r} is not supported; "
                          f"eoskafka reads PEM files only: set it to PEM.")
    java = store_type in ("JKS", "PKCS12") or (
        not store_type and location.strip().lower().endswith(_JAVA_STORE_EXT))
    if java:
        fix = ("keytool -exportcert -rfc -keystore STORE -alias ALIAS > ca.pem"
               if what == "truststore" else
               "openssl pkcs12 -in STORE.p12 -out client.pem (after keytool "
               "-importkeystore -deststoretype PKCS12 for JKS)")
        raise ConfigError(
            f"{key}={location!r} is a {store_type or 'Java'} key store; eoskafka's Python "
            f"client reads PEM files only. Convert it ({fix}) and point {key} at the PEM "
            f"file with kafka.ssl.{what}.type=PEM."
        )
    return location


@dataclass(frozen=True, repr=False)
class ClientConfig:
    """How to reach and authenticate to the brokers; plain values, picklable.

    Built on the driver by :meth:`from_options`, shipped inside pickled readers
    and writers to executors. ``repr``/``str`` hide the secrets.
    """

    bootstrap_servers: tuple[str, ...]
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = None
    ssl_check_hostname: bool = True
    request_timeout_ms: int = 30000
    connect_timeout_ms: int = 10000
    #: ``kafka.default.api.timeout.ms``, ``kafka.delivery.timeout.ms``, ``kafka.max.block.ms``:
    #: the deadline of one operation, retries included (:data:`DEADLINES`).
    api_timeout_ms: int = 60000
    delivery_timeout_ms: int = 120000
    max_block_ms: int = 60000
    client_id: str = "eoskafka"
    extra: tuple[tuple[str, str], ...] = ()
    #: Where OAUTHBEARER tokens come from (``kafka.sasl.mechanism=OAUTHBEARER``), else None.
    oauth: OAuthSettings | None = None
    #: SCRAM as a Kafka delegation token (``tokenauth="true"`` in the ScramLoginModule line):
    #: the user name is the token id, the password its HMAC (base64).
    sasl_token_auth: bool = False
    #: Kerberos with a keytab (``kafka.sasl.mechanism=GSSAPI``), else None; ``sasl_username``
    #: is then its principal.
    kerberos: KerberosSettings | None = None

    @property
    def principal(self) -> str | None:
        """Who signs in, as messages show it: the SASL user, the OAuth client, or the
        Kerberos principal's Kafka user name."""
        if self.kerberos is not None:
            return self.kerberos.kafka_user
        return self.oauth.principal if self.oauth is not None else self.sasl_username

    @property
    def api_timeout_s(self) -> float:
        """``kafka.default.api.timeout.ms`` in seconds: one operation's deadline."""
        return self.api_timeout_ms / 1000

    def __repr__(self) -> str:
        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("sasl_password", "ssl_password") and value is not None:
                value = "***"
            parts.append(f"{f.name}={value!r}")
        return f"ClientConfig({', '.join(parts)})"

    __str__ = __repr__

    def to_kafka_python(self, accepted: Collection[str] | None = None) -> dict[str, object]:
        """Keyword arguments for kafka-python 3.x clients.

        ``KafkaNetClient`` takes them all. ``KafkaProducer``, ``KafkaConsumer``
        and ``KafkaAdminClient`` reject unknown keys (e.g.
        ``socket_connection_setup_timeout_ms``): pass their ``DEFAULT_CONFIG`` as
        ``accepted`` to keep only what they take.
        """
        kwargs: dict[str, object] = {
            "bootstrap_servers": list(self.bootstrap_servers),
            "security_protocol": self.security_protocol,
            "ssl_check_hostname": self.ssl_check_hostname,
            "request_timeout_ms": self.request_timeout_ms,
            "socket_connection_setup_timeout_ms": self.connect_timeout_ms,
            "client_id": self.client_id,
            "receive_message_max_bytes": RECEIVE_MESSAGE_MAX_BYTES,
        }
        optional = {
            "sasl_mechanism": self.sasl_mechanism,
            "sasl_plain_username": self.sasl_username,
            "sasl_plain_password": self.sasl_password,
            "ssl_cafile": self.ssl_cafile,
            "ssl_certfile": self.ssl_certfile,
            "ssl_keyfile": self.ssl_keyfile,
            "ssl_password": self.ssl_password,
        }
        kwargs.update({k: v for k, v in optional.items() if v is not None})
        if self.oauth is not None:  # this process's cached token source (wire/oauth.py)
            from eos_kafka_source.wire.oauth import token_provider

            kwargs["sasl_oauth_token_provider"] = token_provider(self.oauth)
        if self.kerberos is not None:  # signs in with the keytab (wire/kerberos.py)
            from eos_kafka_source.wire.kerberos import use

            use(self.kerberos)
            kwargs["sasl_kerberos_service_name"] = self.kerberos.service_name
        if accepted is not None:
            kwargs = {k: v for k, v in kwargs.items() if k in accepted}
        return kwargs

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> ClientConfig:
        """Read the ``kafka.*`` keys of ``options`` (others are ignored here).

        Raises :class:`ConfigError` for a missing or malformed
        ``kafka.bootstrap.servers``, unknown or unsupported keys, Java key
        stores, and SASL/SSL settings that contradict each other.
        """
        opts = normalize_options(options)
        kafka = {k[len(PREFIX):]: v for k, v in opts.items() if k.startswith(PREFIX)}
        known = (CONNECTION_KEYS | PASSTHROUGH_KEYS | ROLE_KEYS | OAUTH_PASSTHROUGH
                 | KERBEROS_PASSTHROUGH)
        for key in sorted(kafka):
            if key in _REJECTED:
                raise ConfigError(f"option kafka.{key} is not supported: {_REJECTED[key]}. "
                                  f"Remove it.")
            if key not in known:
                raise ConfigError(
                    f"unknown option 'kafka.{key}'.{suggest(PREFIX + key, _prefixed(known))} "
                    f"eoskafka accepts the connection settings (kafka.bootstrap.servers, "
                    f"kafka.security.protocol, kafka.sasl.*, kafka.ssl.*) and the Java client "
                    f"settings in eos_kafka_source.client_config.PASSTHROUGH_KEYS; fix or "
                    f"remove it."
                )

        protocol = kafka.get("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in _PROTOCOLS:
            raise ConfigError(f"kafka.security.protocol={protocol!r} is not one of "
                              f"{', '.join(_PROTOCOLS)}; set one of them.")
        mechanism = kafka.get("sasl.mechanism")
        if mechanism is not None:
            mechanism = mechanism.strip().upper()
            if mechanism == "AWS_MSK_IAM":
                raise ConfigError(_MSK_IAM)
            if mechanism not in _MECHANISMS:
                raise ConfigError(f"kafka.sasl.mechanism={mechanism!r} is not supported; "
                                  f"use one of {', '.join(_MECHANISMS)}.")

        username, password = kafka.get("sasl.username"), kafka.get("sasl.password")
        token_auth = "false"
        module, pairs = (_parse_jaas(kafka["sasl.jaas.config"]) if "sasl.jaas.config" in kafka
                         else (None, {}))
        oauth_keys = sorted(k for k in kafka if k in OAUTH_KEYS)
        oauth = kerberos = None
        if mechanism is None and module == "OAuthBearerLoginModule":
            mechanism = "OAUTHBEARER"
        if mechanism is None and module == "Krb5LoginModule":
            mechanism = "GSSAPI"  # the Java client's default mechanism
        kerberos_keys = sorted(k for k in kafka if k in KERBEROS_KEYS)
        if kerberos_keys and mechanism != "GSSAPI":
            raise ConfigError(f"kafka.{kerberos_keys[0]} is a GSSAPI (Kerberos) setting but "
                              f"kafka.sasl.mechanism is {mechanism}; set "
                              "kafka.sasl.mechanism=GSSAPI, or remove it.")
        if mechanism == "GSSAPI":
            if username is not None or password is not None or oauth_keys:
                raise ConfigError("kafka.sasl.username/kafka.sasl.password and the "
                                  "kafka.sasl.oauthbearer.* settings are not for GSSAPI, "
                                  "which signs in with a keytab: remove them.")
            kerberos = parse_kerberos(kafka, module, pairs)
            username = kerberos.principal
        elif mechanism == "OAUTHBEARER":
            if username is not None or password is not None:
                raise ConfigError("kafka.sasl.username/kafka.sasl.password are for PLAIN and "
                                  "SCRAM; OAUTHBEARER signs in with a token: remove them.")
            oauth = parse_oauth(kafka, module, pairs)
        elif oauth_keys:
            raise ConfigError(f"kafka.{oauth_keys[0]} is an OAUTHBEARER setting but "
                              f"kafka.sasl.mechanism is {mechanism}; set "
                              "kafka.sasl.mechanism=OAUTHBEARER, or remove it.")
        elif module is not None:
            if username is not None or password is not None:
                raise ConfigError("kafka.sasl.jaas.config and kafka.sasl.username/"
                                  "kafka.sasl.password are both set; keep one of the two.")
            if module in ("OAuthBearerLoginModule", "Krb5LoginModule"):
                fix = "OAUTHBEARER" if module == "OAuthBearerLoginModule" else "GSSAPI"
                raise ConfigError(f"kafka.sasl.jaas.config uses {module} but "
                                  f"kafka.sasl.mechanism is {mechanism}; set "
                                  f"kafka.sasl.mechanism={fix}.")
            username, password = _user_password(module, pairs)
            token_auth = pairs.get("tokenauth", "false").strip().lower()
            if token_auth not in ("true", "false") or (
                    token_auth == "true" and module != "ScramLoginModule"):
                raise ConfigError('kafka.sasl.jaas.config: tokenauth="true" (sign in as a '
                                  "delegation token) goes with ScramLoginModule and "
                                  "kafka.sasl.mechanism SCRAM-SHA-256 or SCRAM-SHA-512.")
            if mechanism is None and module == "PlainLoginModule":
                mechanism = "PLAIN"
            if (module == "PlainLoginModule") != (mechanism == "PLAIN"):
                raise ConfigError(
                    f"kafka.sasl.jaas.config uses {module} but kafka.sasl.mechanism is "
                    f"{mechanism}; PlainLoginModule goes with PLAIN, ScramLoginModule "
                    f"with SCRAM-SHA-256 or SCRAM-SHA-512: set kafka.sasl.mechanism."
                )
        elif (username is None) != (password is None):
            raise ConfigError("kafka.sasl.username and kafka.sasl.password must be set "
                              "together; one of them is missing.")
        if protocol.startswith("SASL_"):
            if username is None and oauth is None:
                raise ConfigError(f"kafka.security.protocol={protocol} needs credentials: set "
                                  f"kafka.sasl.jaas.config (or kafka.sasl.username and "
                                  f"kafka.sasl.password) and kafka.sasl.mechanism.")
            if mechanism is None:
                raise ConfigError(f"kafka.sasl.mechanism is required with "
                                  f"kafka.security.protocol={protocol}; set one of "
                                  f"{', '.join(_MECHANISMS)}.")
        elif username is not None or mechanism is not None or oauth is not None:
            raise ConfigError(f"SASL settings are given but kafka.security.protocol is "
                              f"{protocol}, so they would be ignored; set "
                              f"kafka.security.protocol=SASL_SSL (or SASL_PLAINTEXT).")

        cafile = _store_path(kafka, "truststore")
        if "ssl.ca.location" in kafka:
            if cafile is not None and cafile != kafka["ssl.ca.location"]:
                raise ConfigError("kafka.ssl.truststore.location and kafka.ssl.ca.location "
                                  "name different files; keep one.")
            cafile = kafka["ssl.ca.location"]
        certfile = _store_path(kafka, "keystore")
        if "ssl.certificate.location" in kafka:
            if certfile is not None and certfile != kafka["ssl.certificate.location"]:
                raise ConfigError("kafka.ssl.keystore.location and "
                                  "kafka.ssl.certificate.location name different files; "
                                  "keep one.")
            certfile = kafka["ssl.certificate.location"]
        keyfile = kafka.get("ssl.key.location")
        ssl_password = kafka.get("ssl.key.password", kafka.get("ssl.keystore.password"))
        if not protocol.endswith("SSL") and any(
                v is not None for v in (cafile, certfile, keyfile, ssl_password)):
            raise ConfigError(f"SSL files or passwords are given but kafka.security.protocol "
                              f"is {protocol}, so they would be ignored; set "
                              f"kafka.security.protocol=SSL (or SASL_SSL).")
        algorithm = kafka.get("ssl.endpoint.identification.algorithm", "https").strip()
        if algorithm.lower() not in ("", "https"):
            raise ConfigError(
                f"kafka.ssl.endpoint.identification.algorithm={algorithm!r} is not valid; use "
                f"'https' (check the broker host name, the default) or '' (do not check)."
            )

        timeouts = {name: _positive_int(f"kafka.{name}", kafka[name]) if name in kafka
                    else default for name, (default, _) in DEADLINES.items()}
        if timeouts["delivery.timeout.ms"] < timeouts["request.timeout.ms"]:
            raise ConfigError(  # the Java producer refuses this too
                f"kafka.delivery.timeout.ms ({timeouts['delivery.timeout.ms']}) must be at "
                f"least kafka.request.timeout.ms ({timeouts['request.timeout.ms']}): a batch "
                "would give up before its first answer could arrive; raise it.")
        client_id = kafka.get("client.id", "eoskafka").strip()
        if not client_id:
            raise ConfigError("kafka.client.id is empty; remove it or give a name.")
        return cls(
            bootstrap_servers=_parse_servers(kafka.get("bootstrap.servers")),
            security_protocol=protocol,
            sasl_mechanism=mechanism,
            sasl_username=username,
            sasl_password=password,
            ssl_cafile=cafile,
            ssl_certfile=certfile,
            ssl_keyfile=keyfile,
            ssl_password=ssl_password,
            ssl_check_hostname=algorithm != "",
            request_timeout_ms=timeouts["request.timeout.ms"],
            connect_timeout_ms=timeouts["socket.connection.setup.timeout.ms"],
            api_timeout_ms=timeouts["default.api.timeout.ms"],
            delivery_timeout_ms=timeouts["delivery.timeout.ms"],
            max_block_ms=timeouts["max.block.ms"],
            client_id=client_id,
            extra=tuple(sorted((k, v) for k, v in kafka.items() if k in PASSTHROUGH_KEYS)),
            oauth=oauth,
            sasl_token_auth=token_auth == "true",
            kerberos=kerberos,
        )


def _prefixed(keys: Collection[str]) -> list[str]:
    return [PREFIX + k for k in keys]
