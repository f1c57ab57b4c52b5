"""``kafka.*`` options -> the connection settings every eoskafka client uses.

Parsed once, on the driver, into a frozen :class:`ClientConfig` that pickles to
executors. Users coming from Spark's Kafka source write Java client names
(``kafka.bootstrap.servers``, ``kafka.sasl.jaas.config``,
``kafka.ssl.truststore.location``); they are translated to kafka-python's
arguments here, so the rest of the code never sees Java names.

Secrets (SASL password, JAAS config, SSL key password) are kept for the wire
layer but never appear in a repr, a str or an error message.

Which ``kafka.*`` keys are honoured, and why the others are refused, is
:mod:`eos_kafka_source.client.table` (checked by :mod:`~eos_kafka_source.client.keys`);
the sign-in (SASL, OAuth, Kerberos) is :mod:`eos_kafka_source.client.sasl`, TLS versions
and cipher suites :mod:`eos_kafka_source.client.tls`.

>>> ClientConfig.from_options({"kafka.bootstrap.servers": "b1:9092"}).bootstrap_servers
('b1:9092',)
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields

from eos_kafka_source.client.kerberos import KerberosSettings
from eos_kafka_source.client.keys import (
    DEADLINES,
    PREFIX,
    WRITER_KEYS,
    check_keys,
    normalize_options,
    shown,
)
from eos_kafka_source.client.oauth import OAuthSettings
from eos_kafka_source.client.sasl import parse_sasl
from eos_kafka_source.client.tls import TlsSettings, parse_tls
from eos_kafka_source.errors import ConfigError

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DNS_LOOKUPS = ("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")
_JAVA_STORE_EXT = (".jks", ".p12", ".pfx", ".keystore", ".truststore")
_SERVER = re.compile(r"(\[[0-9A-Za-z:.%]+\]|[A-Za-z0-9._-]+):(\d{1,5})")
#: Largest message kafka-python may read; its 1 MB default breaks big fetches.
RECEIVE_MESSAGE_MAX_BYTES = 64 * 1024 * 1024


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
    #: ``kafka.connections.max.idle.ms``: an unused connection is closed after it.
    connections_max_idle_ms: int = 540_000
    #: ``kafka.client.dns.lookup`` (:data:`DNS_LOOKUPS`).
    dns_lookup: str = "use_all_dns_ips"
    #: The honoured settings the task writer reads (:data:`.keys.WRITER_KEYS`).
    extra: tuple[tuple[str, str], ...] = ()
    #: ``kafka.ssl.enabled.protocols``, ``.protocol``, ``.cipher.suites``; None: not given.
    tls: TlsSettings | None = None
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
        ``accepted`` to keep only what they take. The sign-ins that run code in this
        process (the OAUTHBEARER token source, the Kerberos keytab login) are added by the
        wire layer that connects (``wire/connection.py``): settings are plain values.
        """
        kwargs: dict[str, object] = {
            "bootstrap_servers": list(self.bootstrap_servers),
            "security_protocol": self.security_protocol,
            "ssl_check_hostname": self.ssl_check_hostname,
            "request_timeout_ms": self.request_timeout_ms,
            "socket_connection_setup_timeout_ms": self.connect_timeout_ms,
            "client_id": self.client_id,
            "receive_message_max_bytes": RECEIVE_MESSAGE_MAX_BYTES,
            "connections_max_idle_ms": self.connections_max_idle_ms,
            "client_dns_lookup": self.dns_lookup,
        }
        if self.tls is not None and self.security_protocol.endswith("SSL"):
            kwargs["ssl_context"] = self.tls.context(
                self.ssl_cafile, self.ssl_certfile, self.ssl_keyfile, self.ssl_password,
                self.ssl_check_hostname)
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
        if self.kerberos is not None:
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
        check_keys(kafka)

        protocol = kafka.get("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in _PROTOCOLS:
            raise ConfigError(f"kafka.security.protocol={protocol!r} is not one of "
                              f"{', '.join(_PROTOCOLS)}; set one of them.")
        sasl = parse_sasl(kafka, protocol)

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
        tls = parse_tls(kafka)
        if not protocol.endswith("SSL") and (tls is not None or any(
                v is not None for v in (cafile, certfile, keyfile, ssl_password))):
            raise ConfigError(f"SSL files, passwords or versions are given but "
                              f"kafka.security.protocol "
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
        idle_key = "connections.max.idle.ms"
        idle_ms = (_positive_int(f"kafka.{idle_key}", kafka[idle_key]) if idle_key in kafka
                   else cls.connections_max_idle_ms)
        if timeouts["delivery.timeout.ms"] < timeouts["request.timeout.ms"]:
            raise ConfigError(  # the Java producer refuses this too
                f"kafka.delivery.timeout.ms ({timeouts['delivery.timeout.ms']}) must be at "
                f"least kafka.request.timeout.ms ({timeouts['request.timeout.ms']}): a batch "
                "would give up before its first answer could arrive; raise it.")
        dns_lookup = kafka.get("client.dns.lookup", cls.dns_lookup).strip().lower()
        if dns_lookup not in DNS_LOOKUPS:
            raise ConfigError(f"kafka.client.dns.lookup={dns_lookup!r} is not one of "
                              f"{', '.join(DNS_LOOKUPS)}; set one of them.")
        client_id = kafka.get("client.id", "eoskafka").strip()
        if not client_id:
            raise ConfigError("kafka.client.id is empty; remove it or give a name.")
        return cls(
            bootstrap_servers=_parse_servers(kafka.get("bootstrap.servers")),
            security_protocol=protocol,
            sasl_mechanism=sasl.mechanism,
            sasl_username=sasl.username,
            sasl_password=sasl.password,
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
            connections_max_idle_ms=idle_ms,
            dns_lookup=dns_lookup,
            extra=tuple(sorted((k, v) for k, v in kafka.items() if k in WRITER_KEYS)),
            tls=tls,
            oauth=sasl.oauth,
            sasl_token_auth=sasl.token_auth,
            kerberos=sasl.kerberos,
        )



