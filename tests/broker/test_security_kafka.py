"""SASL and TLS against Apache Kafka's own listeners (tests/kafka_security.py).

The session's Kafka serves SASL_PLAINTEXT (PLAIN, SCRAM-SHA-512), SSL, SSL with client
certificates (MTLS) and SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) beside PLAINTEXT.
Kafka advertises, to a client that bootstrapped on a listener, that listener's
addresses only, so a client configured for one listener reaches the coordinator and
the partition leaders through it too: every role below logs in on every connection
it opens, or fails. Roles run as Spark runs them, outside Spark: the driver plans or
prepares, the pickled reader or writer runs the task, the driver commits.
"""

from __future__ import annotations

import json
import pickle
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.datasource import EosKafkaDataSource
from eos_kafka_source.errors import AuthenticationError, BrokerUnreachableError
from eos_kafka_source.options import SinkOptions, SourceOptions
from eos_kafka_source.sink.spark_writer import EosKafkaStreamWriter
from eos_kafka_source.source.partition_reader import read_partition
from eos_kafka_source.source.partitions import KafkaInputPartition
from eos_kafka_source.source.schema import kafka_schema
from eos_kafka_source.wire import KafkaWire, create_topic, fetch_metadata
from tests.kafka_security import (
    CORE,
    ENABLED,
    FAST_S,
    KEY_PASSWORD,
    USER,
    WRONG,
    SecureKafka,
    assert_clean,
    assert_logs_clean,
    assert_short_failure,
    cli_args,
    run_cli,
)
from tests.sink_harness import spark_checkpoint

pytestmark = pytest.mark.kafka_only

#: (listener, mechanism): every SASL mechanism each SASL listener enables, and the TLS ones.
LOGINS = [*((name, m) for name, ms in ENABLED.items() for m in ms),
          ("SSL", None), ("MTLS", None)]
SASL_LOGINS = [(name, m) for name, m in LOGINS if m]
VALUE_SCHEMA = StructType([StructField("value", BinaryType())])


def login_id(case: tuple[str, str | None]) -> str:
    return "-".join(c for c in case if c)


def new_topic(options: dict[str, str], name: str, partitions: int = 2) -> str:
    with KafkaWire(ClientConfig.from_options(options)) as wire:
        create_topic(wire, name, partitions)
    return name


def advertised_ports(options: dict[str, str]) -> set[int]:
    with KafkaWire(ClientConfig.from_options(options)) as wire:
        fetch_metadata(wire, [])
        return {b.port for b in wire.client.cluster.brokers()}


def run_sink(options: dict[str, str], checkpoint: Path, values: list[bytes]) -> list[Any]:
    """The streaming sink's roles in order: the driver prepares (recovery, fencing), a
    pickled copy writes as a task, another commits as Spark's commit worker. Returns
    what was shown or stored on the way: the writer and the hand-off."""
    planner = EosKafkaDataSource({**options, "checkpointLocation": spark_checkpoint(checkpoint)}
                                 ).streamWriter(VALUE_SCHEMA, False)
    assert isinstance(planner, EosKafkaStreamWriter)
    task = pickle.loads(pickle.dumps(planner))
    handoff = task.write(iter([pa.RecordBatch.from_pydict({"value": values})]))
    assert handoff.records == len(values)
    pickle.loads(pickle.dumps(planner)).commit([pickle.loads(pickle.dumps(handoff))], 0)
    return [planner, handoff]


def run_source(options: dict[str, str], topic: str) -> tuple[list[bytes], list[Any]]:
    """The batch source: planning on the driver, each partition read as a pickled task."""
    reader = EosKafkaDataSource({**options, "subscribe": topic}).reader(kafka_schema(False))
    parts = [p for p in reader.partitions() if isinstance(p, KafkaInputPartition)]
    values: list[bytes] = []
    for part in parts:
        for batch in read_partition(pickle.loads(pickle.dumps(part))):
            values += batch.column("value").to_pylist()
    return values, parts


def first_contacts(options: dict[str, str], topic: str,
                   tmp_path: Path) -> dict[str, Callable[[], Any]]:
    """Each role's first connection: source planning and task, sink prepare and task."""
    part = KafkaInputPartition(topic, 0, 0, 10, ClientConfig.from_options(options))
    return {
        "source driver": lambda: EosKafkaDataSource({**options, "subscribe": topic}).reader(
            kafka_schema(False)).partitions(),
        "source task": lambda: list(read_partition(pickle.loads(pickle.dumps(part)))),
        "sink driver": lambda: EosKafkaDataSource(
            {**options, "topic": topic, "checkpointLocation": str(tmp_path / "c")}
        ).streamWriter(VALUE_SCHEMA, False),
        "sink task": lambda: EosKafkaDataSource({**options, "topic": topic}).writer(
            VALUE_SCHEMA, False).write(iter([pa.RecordBatch.from_pydict({"value": [b"x"]})])),
    }


def assert_files_clean(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            assert_clean(path.read_bytes())


@pytest.mark.parametrize("case", LOGINS, ids=login_id)
def test_source_and_sink_log_in(case: tuple[str, str | None], secure_kafka: SecureKafka,
                                unique: str, tmp_path: Path,
                                debug_logs: pytest.LogCaptureFixture) -> None:
    """The sink commits what it wrote and the source reads it back, every role connecting
    through the listener; no secret in any repr, hand-off, stored file or log line."""
    listener, mechanism = case
    options = secure_kafka.options(listener, mechanism)
    listener_port = int(secure_kafka.bootstrap(listener).rsplit(":", 1)[1])
    assert advertised_ports(options) == {listener_port}  # so every connection uses it
    topic = new_topic(options, unique)
    values = [f"v{i}".encode() for i in range(30)]

    shown = run_sink({**options, "topic": topic}, tmp_path / "ckpt", values)
    read, parts = run_source(options, topic)

    assert sorted(read) == sorted(values)
    sink_opts = SinkOptions.parse({**options, "topic": topic})
    source_opts = SourceOptions.parse({**options, "subscribe": topic}, streaming=False)
    handoff = shown[1]
    assert_clean(repr(sink_opts), str(sink_opts), repr(source_opts), *map(repr, shown),
                 *map(str, shown), *map(repr, parts), handoff.describe(),
                 json.dumps(handoff.to_json()), pickle.dumps(handoff))
    assert any("decisions" in p.parts for p in (tmp_path / "ckpt").rglob("*"))
    assert_files_clean(tmp_path)
    assert_logs_clean(debug_logs)
    for key in ("client_key", "server_key"):  # key material: never read into any output
        body = [line for line in secure_kafka.certs[key].read_text().splitlines()
                if line and not line.startswith("-----")]
        stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
        assert not any(line in debug_logs.text or line.encode() in stored for line in body)
    if mechanism == "PLAIN":  # kafka-python logged the SaslAuthenticate bytes, masked
        assert any("SaslAuthenticate" in r.getMessage() and "***" in r.getMessage()
                   for r in debug_logs.records)
    if listener != "SSL":  # executors must get the password (they connect), and they do
        assert CORE.encode() in pickle.dumps(parts[0])


@pytest.mark.parametrize("case", SASL_LOGINS, ids=login_id)
def test_wrong_password_fails_fast_and_clean(case: tuple[str, str], secure_kafka: SecureKafka,
                                             unique: str, tmp_path: Path,
                                             debug_logs: pytest.LogCaptureFixture) -> None:
    """Kafka refuses the credentials: every role fails at once with
    EOSKAFKA_AUTHENTICATION_FAILED, the first line naming the mechanism, the user and
    the option to fix, and no secret anywhere."""
    listener, mechanism = case
    topic = new_topic(secure_kafka.options(listener, mechanism), unique, partitions=1)
    bad = secure_kafka.options(listener, mechanism, password=WRONG)
    for role, attempt in first_contacts(bad, topic, tmp_path).items():
        started = time.monotonic()
        with pytest.raises(AuthenticationError) as info:
            attempt()
        assert_short_failure(info.value, started)
        first = str(info.value).splitlines()[0]
        assert first.startswith("[EOSKAFKA_AUTHENTICATION_FAILED]"), role
        assert f"refused SASL {mechanism} authentication as user '{USER}'" in first, role
        assert "kafka.sasl.jaas.config" in first, role
        # Kafka's own reason (it arrives with the end of the connection: see
        # eos_kafka_source/wire/_kafka_python_fixes.py), not "socket disconnected".
        assert "SaslAuthenticationFailed" in first and "Authentication failed" in first, role
    assert_files_clean(tmp_path)
    assert_logs_clean(debug_logs)


@pytest.mark.parametrize("listener", ["SSL", "SASL_SSL", "MTLS"])
def test_unknown_ca_fails_fast(listener: str, secure_kafka: SecureKafka, unique: str,
                               tmp_path: Path) -> None:
    """A truststore without the CA that signed the broker's certificate: every role fails
    at the TLS handshake, at once, saying which option to check."""
    topic = new_topic(secure_kafka.options(listener), unique, partitions=1)
    untrusting = secure_kafka.options(listener, ca="other_ca")
    for role, attempt in first_contacts(untrusting, topic, tmp_path).items():
        started = time.monotonic()
        with pytest.raises(AuthenticationError) as info:
            attempt()
        assert_short_failure(info.value, started)
        first = str(info.value).splitlines()[0]
        assert "TLS handshake" in first and "CERTIFICATE_VERIFY_FAILED" in first, role
        assert "kafka.ssl.truststore.location" in first, role


def test_host_not_in_the_certificate(secure_kafka: SecureKafka) -> None:
    """The certificate names 127.0.0.1, not localhost: refused at once; turning the check
    off (the documented way out) connects."""
    port = secure_kafka.bootstrap("SSL").rsplit(":", 1)[1]
    options = secure_kafka.options("SSL", **{"kafka.bootstrap.servers": f"localhost:{port}"})
    started = time.monotonic()
    with pytest.raises(AuthenticationError, match="TLS handshake") as info:
        fetch_metadata(KafkaWire(ClientConfig.from_options(options)), [])
    assert_short_failure(info.value, started)
    assert "CERTIFICATE_VERIFY_FAILED" in str(info.value)
    options["kafka.ssl.endpoint.identification.algorithm"] = ""
    with KafkaWire(ClientConfig.from_options(options)) as wire:
        assert fetch_metadata(wire, []) is not None


def test_mutual_tls_refusals(secure_kafka: SecureKafka,
                             debug_logs: pytest.LogCaptureFixture) -> None:
    """ssl.client.auth=required: no client certificate, or a key password that does not
    decrypt the key, fails at once; the key password is never shown."""
    good = secure_kafka.options("MTLS")
    no_cert = {k: v for k, v in good.items()
               if not k.startswith(("kafka.ssl.keystore", "kafka.ssl.key."))}
    started = time.monotonic()
    with pytest.raises(AuthenticationError, match="TLS handshake") as info:
        fetch_metadata(KafkaWire(ClientConfig.from_options(no_cert)), [])
    assert_short_failure(info.value, started)
    assert "client certificates" in str(info.value)
    started = time.monotonic()
    with pytest.raises(AuthenticationError, match="kafka.ssl.key.password") as info:
        fetch_metadata(KafkaWire(ClientConfig.from_options(
            {**good, "kafka.ssl.key.password": f"wrong-{KEY_PASSWORD}"})), [])
    assert_short_failure(info.value, started)
    assert_clean(repr(ClientConfig.from_options(good)), repr(SinkOptions.parse(good)))
    assert_logs_clean(debug_logs)


def test_sasl_client_to_a_listener_without_sasl(secure_kafka: SecureKafka) -> None:
    """Kafka answers SaslHandshake on a PLAINTEXT listener with ILLEGAL_SASL_STATE: the
    error says the listener does no SASL, not "wrong password" (no credential was sent)."""
    options = secure_kafka.options(
        "SASL_PLAINTEXT", "PLAIN",
        **{"kafka.bootstrap.servers": secure_kafka.cluster.bootstrap_servers})
    started = time.monotonic()
    with pytest.raises(AuthenticationError) as info:
        fetch_metadata(KafkaWire(ClientConfig.from_options(options)), [])
    assert_short_failure(info.value, started)
    first = str(info.value).splitlines()[0]
    assert "does not accept SASL PLAIN" in first and "IllegalSaslState" in first
    assert "kafka.security.protocol" in first and "refused" not in first


def test_mechanism_the_listener_does_not_enable(secure_kafka: SecureKafka) -> None:
    """Kafka answers UNSUPPORTED_SASL_MECHANISM and closes at once: the error says the
    listener does not accept that mechanism, not that the password is wrong."""
    assert "SCRAM-SHA-256" not in ENABLED["SASL_PLAINTEXT"]
    options = secure_kafka.options("SASL_PLAINTEXT", "SCRAM-SHA-256")
    started = time.monotonic()
    with pytest.raises(AuthenticationError) as info:
        fetch_metadata(KafkaWire(ClientConfig.from_options(options)), [])
    assert_short_failure(info.value, started)
    first = str(info.value).splitlines()[0]
    assert "does not accept SASL SCRAM-SHA-256" in first
    assert "UnsupportedSaslMechanism" in first and "sasl.enabled.mechanisms" in first


@pytest.mark.parametrize("case", ["TLS client to PLAINTEXT", "plain client to SSL",
                                  "plain client to SASL_PLAINTEXT"])
def test_wrong_protocol_fails_within_the_deadline(case: str, secure_kafka: SecureKafka) -> None:
    """Kafka closes the connection (or never answers the request) when the client does
    not speak the listener's protocol: ambiguous with a broker that is going away, so
    retried, and reported as unreachable when kafka.socket.connection.setup.timeout.ms
    ends, never later, naming the protocol setting to check."""
    timeout = {"kafka.socket.connection.setup.timeout.ms": "3000"}
    options = {
        "TLS client to PLAINTEXT": secure_kafka.options(
            "SSL", **{"kafka.bootstrap.servers": secure_kafka.cluster.bootstrap_servers},
            **timeout),
        "plain client to SSL": {"kafka.bootstrap.servers": secure_kafka.bootstrap("SSL"),
                                **timeout},
        "plain client to SASL_PLAINTEXT": {
            "kafka.bootstrap.servers": secure_kafka.bootstrap("SASL_PLAINTEXT"), **timeout},
    }[case]
    started = time.monotonic()
    with pytest.raises(BrokerUnreachableError) as info:
        fetch_metadata(KafkaWire(ClientConfig.from_options(options)), [])
    assert not isinstance(info.value, AuthenticationError)
    assert time.monotonic() - started < 3 + FAST_S
    assert "kafka.security.protocol is the listener's" in str(info.value)


# -- the eoskafka command ------------------------------------------------------------------------


@pytest.mark.parametrize("case", [("SASL_PLAINTEXT", "SCRAM-SHA-512"), ("SSL", None),
                                  ("MTLS", None), ("SASL_SSL", "PLAIN")], ids=login_id)
def test_cli_logs_in_and_prints_no_secret(case: tuple[str, str | None],
                                          secure_kafka: SecureKafka, unique: str,
                                          tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          debug_logs: pytest.LogCaptureFixture) -> None:
    """``audit`` (-vv: kafka-python's request log) and ``txns`` (text and --json) over the
    listener; a wrong password or an unknown CA exits 2 with the condition, at once."""
    listener, mechanism = case
    options = secure_kafka.options(listener, mechanism)
    topic = new_topic(options, unique, partitions=1)
    run_sink({**options, "topic": topic}, tmp_path / "ckpt", [b"k1", b"k2"])
    capsys.readouterr()

    code, out, err = run_cli(capsys, "audit", *cli_args(options), "--topic", topic, "--json", "-vv")
    assert code == 0, err
    assert json.loads(out)["partitions"], out
    if mechanism == "PLAIN":
        assert "SaslAuthenticate" in err and "***" in err  # logged, masked
    code, out, _ = run_cli(capsys, "txns", *cli_args(options), "--checkpoint",
                       str(tmp_path / "ckpt"), "--json")
    assert code == 0 and json.loads(out)["batches"]
    code, out, _ = run_cli(capsys, "txns", *cli_args(options), "--checkpoint",
                       str(tmp_path / "ckpt"))
    assert code == 0 and topic in out

    refused = (secure_kafka.options(listener, mechanism, password=WRONG) if mechanism
               else secure_kafka.options(listener, ca="other_ca"))
    for extra in (["-vv"], ["--json"]):
        started = time.monotonic()
        code, out, err = run_cli(capsys, "audit", *cli_args(refused), "--topic", topic, *extra)
        assert code == 2 and time.monotonic() - started < FAST_S
        assert "EOSKAFKA_AUTHENTICATION_FAILED" in (out if "--json" in extra else err)
    if mechanism:  # a JAAS line that cannot be parsed: refused, its value not shown
        garbled = {**options, "kafka.sasl.jaas.config": f'PlainLoginModule password="{CORE}"'}
        code, _, err = run_cli(capsys, "audit", *cli_args(garbled), "--topic", topic)
        assert code == 2 and "EOSKAFKA_INVALID_OPTION" in err
    assert_logs_clean(debug_logs)
