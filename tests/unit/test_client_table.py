"""Every ``kafka.*`` key is honoured or refused (eos_kafka_source/client/table.py).

The whole table is parsed, key by key, through the source and the sink as Spark hands them
their options: an honoured key changes the parsed options on its side (or, where eoskafka
does one thing, a value asking for another is refused by name) and is refused on the other
side; a refused or not-applicable key raises eoskafka's ConfigError naming the key, why and
what to use. Nothing is accepted and dropped.
"""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from eos_kafka_source.client.table import (
    ADMIN,
    BOTH,
    CONSUMER,
    HONOURED,
    OWN,
    PRODUCER,
    SINK,
    SOURCE,
    TABLE,
    honoured,
)
from eos_kafka_source.errors import ConfigError
from eos_kafka_source.options import SinkOptions, SourceOptions

BOOT = {"bootstrap.servers": "b1:9092"}
SSL = {"security.protocol": "SSL"}
PLAIN = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u",
         "sasl.password": "p"}
PLAIN_LINE = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="{}" password="p";')
JAAS = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": PLAIN_LINE.format("alice")}
GSSAPI = {"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI",
          "sasl.kerberos.service.name": "kafka",
          "sasl.jaas.config": 'com.sun.security.auth.module.Krb5LoginModule required '
                              'useKeyTab=true keyTab="/kt/app.keytab" principal="app@EX.COM";'}
OAUTH = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
         "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
         "sasl.oauthbearer.client.credentials.client.id": "app",
         "sasl.oauthbearer.client.credentials.client.secret": "s"}
PROVIDER = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.provider": "tokens.mod:get"}

#: Honoured keys that change the parsed options: key -> (other options it needs, a value).
CHANGES: dict[str, tuple[dict[str, str], str]] = {
    "bootstrap.servers": ({}, "b2:9092"), "client.id": ({}, "app"),
    "request.timeout.ms": ({}, "20000"), "socket.connection.setup.timeout.ms": ({}, "5000"),
    "default.api.timeout.ms": ({}, "90000"), "connections.max.idle.ms": ({}, "60000"),
    "client.dns.lookup": ({}, "resolve_canonical_bootstrap_servers_only"),
    "security.protocol": ({}, "SSL"), "sasl.mechanism": (PLAIN, "SCRAM-SHA-256"),
    "sasl.jaas.config": (JAAS, PLAIN_LINE.format("bob")), "sasl.username": (PLAIN, "v"),
    "sasl.password": (PLAIN, "q"), "sasl.kerberos.service.name": (GSSAPI, "kafka2"),
    "sasl.kerberos.krb5.conf": (GSSAPI, "/etc/k.conf"),
    "sasl.oauthbearer.token.endpoint.url": (OAUTH, "https://other.example/token"),
    "sasl.oauthbearer.token.provider": (PROVIDER, "tokens.mod:other"),
    "sasl.oauthbearer.client.credentials.client.id": (OAUTH, "app2"),
    "sasl.oauthbearer.client.credentials.client.secret": (OAUTH, "s2"),
    "sasl.oauthbearer.scope": (OAUTH, "kafka"),
    "sasl.login.refresh.window.factor": (OAUTH, "0.6"),
    "sasl.login.refresh.buffer.seconds": (OAUTH, "100"),
    "sasl.login.refresh.min.period.seconds": (OAUTH, "30"),
    "sasl.login.connect.timeout.ms": (OAUTH, "5000"),
    "sasl.login.read.timeout.ms": (OAUTH, "5000"),
    "sasl.login.retry.backoff.ms": (OAUTH, "500"),
    "sasl.login.retry.backoff.max.ms": (OAUTH, "5000"),
    "ssl.truststore.location": (SSL, "/t.pem"), "ssl.ca.location": (SSL, "/t.pem"),
    "ssl.keystore.location": (SSL, "/k.pem"), "ssl.certificate.location": (SSL, "/k.pem"),
    "ssl.key.location": (SSL, "/key.pem"), "ssl.key.password": (SSL, "pw"),
    "ssl.keystore.password": (SSL, "pw"), "ssl.endpoint.identification.algorithm": (SSL, ""),
    "ssl.enabled.protocols": (SSL, "TLSv1.3"), "ssl.protocol": (SSL, "TLSv1.2"),
    "ssl.cipher.suites": (SSL, "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"),
    "isolation.level": ({}, "read_uncommitted"), "group.id": ({}, "lag-tools"),
    "max.partition.fetch.bytes": ({}, "1048576"), "transaction.timeout.ms": ({}, "60000"),
    "check.crcs": ({}, "true"),
    "compression.type": ({}, "gzip"),
    "compression.gzip.level": ({"compression.type": "gzip"}, "9"),
    "compression.lz4.level": ({"compression.type": "lz4"}, "12"),
    "compression.zstd.level": ({"compression.type": "zstd"}, "10"),
    "batch.size": ({}, "1000"), "max.request.size": ({}, "2000000"),
    "max.in.flight.requests.per.connection": ({}, "1"),
    "delivery.timeout.ms": ({}, "300000"), "max.block.ms": ({}, "30000"),
}
#: Honoured keys where eoskafka does one thing: key -> (options it needs, the value that
#: asks for it, a value asking for something else, which is refused by name).
CHECKS: dict[str, tuple[dict[str, str], str, str]] = {
    "sasl.login.callback.handler.class": (
        OAUTH, "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "com.example.MyHandler"),
    "sasl.oauthbearer.header.urlencode": (OAUTH, "true", "false"),
    "ssl.truststore.type": ({**SSL, "ssl.truststore.location": "/t.pem"}, "PEM", "JKS"),
    "ssl.keystore.type": ({**SSL, "ssl.keystore.location": "/k.pem"}, "PEM", "JKS"),
    "acks": ({}, "all", "1"), "enable.idempotence": ({}, "true", "false"),
    "linger.ms": ({}, "5", "-1"),
}


def _kafka(options: dict[str, str]) -> dict[str, str]:
    return {f"kafka.{k}": v for k, v in {**BOOT, **options}.items()}


def parse(side: str, options: dict[str, str]) -> SourceOptions | SinkOptions:
    if side == SOURCE:
        return SourceOptions.parse({**_kafka(options), "subscribe": "t"}, streaming=True)
    return SinkOptions.parse(_kafka(options))


def refused(side: str, options: dict[str, str], *needles: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(side, options)
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


def sides(key: str) -> list[str]:
    side = TABLE[key].side
    return [SOURCE, SINK] if side == BOTH else [side]


def test_the_table_is_every_key_of_kafkas_clients_and_eoskafkas_own() -> None:
    assert set(TABLE) == PRODUCER | CONSUMER | ADMIN | OWN
    assert len(PRODUCER) > 110 and len(CONSUMER) > 110 and len(ADMIN) > 90
    assert set(honoured()) == set(CHANGES) | set(CHECKS), "a new honoured key needs a case"
    for name, key in TABLE.items():
        assert key.text and key.side in (BOTH, SOURCE, SINK), name
        assert key.status == HONOURED or key.side == BOTH, name


@pytest.mark.parametrize("key", sorted(CHANGES))
def test_an_honoured_key_changes_the_parsed_options(key: str) -> None:
    context, value = CHANGES[key]
    for side in sides(key):
        assert parse(side, {**context, key: value}) != parse(side, context), (key, side)
    other = {SOURCE: SINK, SINK: SOURCE}.get(TABLE[key].side)
    if other is not None:
        refused(other, {key: value}, f"kafka.{key}", "not allowed on the")


@pytest.mark.parametrize("key", sorted(CHECKS))
def test_an_honoured_key_refuses_what_eoskafka_does_not_do(key: str) -> None:
    context, good, bad = CHECKS[key]
    for side in sides(key):
        parse(side, {**context, key: good})
        refused(side, {**context, key: bad}, f"kafka.{key}")


@pytest.mark.parametrize("key", sorted(k for k, v in TABLE.items() if v.status != HONOURED))
def test_a_refused_key_names_itself_and_what_to_use(key: str) -> None:
    for side in (SOURCE, SINK):
        refused(side, {key: "x"}, f"kafka.{key}", TABLE[key].text, "Remove it")


def test_an_unknown_key_is_refused_with_the_nearest() -> None:
    refused(SOURCE, {"ssl.enabled.protocol": "TLSv1.3"}, "unknown option",
            "kafka.ssl.enabled.protocols")


def test_group_id_on_a_batch_read_is_refused() -> None:
    options = {**_kafka({"group.id": "g"}), "subscribe": "t"}
    assert SourceOptions.parse(options, streaming=True).progress_group == "g"
    with pytest.raises(ConfigError, match="kafka.group.id applies to streaming reads only"):
        SourceOptions.parse(options, streaming=False)


def test_fetch_max_bytes_and_its_java_name_are_one_setting() -> None:
    def fetch(**options: str) -> int:
        return SourceOptions.parse({**_kafka({}), "subscribe": "t", **options},
                                   streaming=True).fetch_max_bytes
    assert fetch(**{"kafka.max.partition.fetch.bytes": "1000"}) == fetch(fetchMaxBytes="1000")
    with pytest.raises(ConfigError, match="same setting"):
        fetch(fetchMaxBytes="1000", **{"kafka.max.partition.fetch.bytes": "2000"})


def test_the_client_package_imports_only_itself_and_errors() -> None:
    """client/ sits under everything else (options, wire, cli): no import cycle can start
    there. A fresh interpreter, so other tests' imports do not count. errors.py builds its
    classes from kafka_codes.py, a leaf; the package's face (its __init__) loads the
    version and the log set-up, two leaves."""
    code = ("import sys, eos_kafka_source.client.config, eos_kafka_source.client.table; "
            "print(sorted(m for m in sys.modules if m.startswith('eos_kafka_source')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    loaded = set(ast.literal_eval(out))
    assert {m for m in loaded if not m.startswith("eos_kafka_source.client")} == {
        "eos_kafka_source", "eos_kafka_source._version", "eos_kafka_source.logs",
        "eos_kafka_source.errors", "eos_kafka_source.kafka_codes"}


@pytest.mark.parametrize("key", ["ssl.enabled.protocols", "ssl.cipher.suites"])
def test_an_empty_tls_list_means_the_defaults_as_in_java(key: str) -> None:
    """Java's client applies these lists only when they are not empty."""
    assert parse(SOURCE, {**SSL, key: ""}) == parse(SOURCE, SSL)
    assert parse(SOURCE, {**SSL, key: " , "}) == parse(SOURCE, SSL)
