"""SASL and TLS through the test-only front door: the working paths on Tansu sessions.

Tansu 0.6.0 can neither log anyone in nor serve TLS (tests/broker/test_security_tansu.py
pins both). The working paths are tested against Apache Kafka's own listeners
(tests/broker/test_security_kafka.py, ``EOSKAFKA_TEST_BROKER=kafka``). So that the
default suite on Tansu still exercises them, the tests here (``tansu_only``) run them
through :mod:`tests.secure_front`: a TLS + SASL front door (PLAIN, SCRAM-SHA-256/512 as
Kafka's broker answers them; TLS with the test CA's certificates) in front of a plain
Tansu that advertises it, so every connection the plugin opens goes through it, and
the front records which requests each role sent as whom. An unreachable broker's error
is checked on every broker kind.
"""

from __future__ import annotations

import json
import pickle
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from eos_kafka_source.broker import free_port
from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.datasource import EosKafkaDataSource
from eos_kafka_source.errors import AuthenticationError, BrokerUnreachableError
from eos_kafka_source.options import SinkOptions, SourceOptions
from eos_kafka_source.sink.handoff import TxnHandoff
from eos_kafka_source.sink.spark_writer import EosKafkaStreamWriter
from eos_kafka_source.source.partition_reader import read_partition
from eos_kafka_source.source.partitions import KafkaInputPartition
from eos_kafka_source.source.schema import kafka_schema
from eos_kafka_source.wire import KafkaWire, create_topic, fetch_metadata, known
from eos_kafka_source.wire.kept import close_kept
from tests.kafka_security import (  # the same secrets as on Apache Kafka's listeners
    CORE,
    FAST_S,
    KEY_PASSWORD,
    MECHANISMS,
    PASSWORD,
    USER,
    WRONG,
    assert_clean,
    assert_logs_clean,
    assert_short_failure,
    cli_args,
    run_cli,
)
from tests.secure_front import (
    API_KEYS,
    Connection,
    SecureFront,
    make_certificates,
    sasl_options,
    secured_broker,
)
from tests.sink_harness import spark_checkpoint

#: Requests the plugin sends, by role: the sink's driver (before a batch: recovery and
#: fencing; at commit), its tasks, the source's planning and its tasks.
SINK_PREPARE = {"FindCoordinator", "InitProducerId"}
SINK_COMMIT = {"EndTxn"}
SINK_TASK = {"Metadata", "FindCoordinator", "InitProducerId", "AddPartitionsToTxn", "Produce"}
SOURCE = {"Metadata", "Fetch"}
#: Connect timeout of these tests: a refusal that waited for it would take a minute.
TIMEOUT_MS = "60000"


def options_for(bootstrap: str, mechanism: str, password: str = PASSWORD, *,
                tls: Path | None = None, **more: str) -> dict[str, str]:
    more = {"kafka.socket.connection.setup.timeout.ms": TIMEOUT_MS, **more}
    return sasl_options(bootstrap, mechanism, USER, password, ca=tls, **more)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_certificates(tmp_path_factory.mktemp("certs"), key_password=KEY_PASSWORD)


@pytest.fixture(scope="module")
def sasl_ssl(certs: dict[str, Path]) -> Iterator[SecureFront]:
    """TLS, then SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) for ``alice``."""
    with secured_broker(certs=certs, users={USER: PASSWORD}) as front:
        yield front


@pytest.fixture(scope="module")
def tls_only(certs: dict[str, Path]) -> Iterator[SecureFront]:
    with secured_broker(certs=certs) as front:
        yield front


@pytest.fixture(scope="module")
def mutual_tls(certs: dict[str, Path]) -> Iterator[SecureFront]:
    """TLS that requires a client certificate signed by the test CA."""
    with secured_broker(certs=certs, client_certs=True) as front:
        yield front


@pytest.fixture(scope="module")
def sasl_plaintext() -> Iterator[SecureFront]:
    with secured_broker(users={USER: PASSWORD}) as front:
        yield front


# -- the plugin end to end over a secured door ----------------------------------------------------

VALUE_SCHEMA = StructType([StructField("value", BinaryType())])


def next_role(front: SecureFront) -> None:
    """Each role runs in its own Python process under Spark: none finds another's kept
    connections (wire/kept.py)."""
    close_kept()
    front.reset()


def run_sink(options: dict[str, str], checkpoint: Path, values: list[bytes],
             front: SecureFront) -> tuple[EosKafkaStreamWriter, TxnHandoff, dict[str, Phase]]:
    """The streaming sink's three roles, in order, as Spark runs them (outside Spark):
    planning worker (recovery, fencing), a task (write, hand-off), commit worker."""
    seen: dict[str, Phase] = {}
    opts = {**options, "checkpointLocation": spark_checkpoint(checkpoint)}
    next_role(front)
    planner = EosKafkaDataSource(opts).streamWriter(VALUE_SCHEMA, False)
    assert isinstance(planner, EosKafkaStreamWriter)
    seen["driver: prepare"] = snapshot(front)
    next_role(front)
    known.forget_all()  # an executor is another process: it knows nothing the driver learned
    task = pickle.loads(pickle.dumps(planner))  # what an executor gets
    handoff = task.write(iter([pa.RecordBatch.from_pydict({"value": values})]))
    seen["task: write"] = snapshot(front)
    next_role(front)
    committer = pickle.loads(pickle.dumps(planner))  # Spark's commit worker does not prepare
    committer.commit([pickle.loads(pickle.dumps(handoff))], 0)
    seen["driver: commit"] = snapshot(front)
    return planner, handoff, seen


def run_source(options: dict[str, str], topic: str,
               front: SecureFront) -> tuple[list[KafkaInputPartition], list[bytes],
                                            dict[str, Phase]]:
    """The batch source: planning on the driver, then each partition read as a task."""
    seen: dict[str, Phase] = {}
    opts = {**options, "subscribe": topic}
    next_role(front)
    reader = EosKafkaDataSource(opts).reader(kafka_schema(False))
    parts = [p for p in reader.partitions() if isinstance(p, KafkaInputPartition)]
    seen["driver: plan"] = snapshot(front)
    next_role(front)
    values: list[bytes] = []
    for part in parts:
        for batch in read_partition(pickle.loads(pickle.dumps(part))):
            values += batch.column("value").to_pylist()
    seen["task: read"] = snapshot(front)
    return parts, values, seen


@dataclass(frozen=True)
class Phase:
    """What went through the front during one role's work."""

    requests: set[str]
    connections: list[Connection]
    refused: list[str]


def snapshot(front: SecureFront) -> Phase:
    by_key = {v: k for k, v in API_KEYS.items()}
    return Phase({by_key.get(k, str(k)) for k in front.requests}, list(front.connections),
                 list(front.refused))


def new_topic(options: dict[str, str], unique: str, partitions: int = 2) -> str:
    with KafkaWire(ClientConfig.from_options(options)) as wire:
        create_topic(wire, unique, partitions)
    return unique


@pytest.mark.tansu_only
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_source_and_sink_over_sasl_ssl(
    mechanism: str, sasl_ssl: SecureFront, certs: dict[str, Path], unique: str,
    tmp_path: Path, debug_logs: pytest.LogCaptureFixture,
) -> None:
    """Correct credentials: the sink commits exactly what it wrote and the source reads
    it back, every request of every role going through TLS + SASL as ``alice``."""
    options = options_for(sasl_ssl.bootstrap_servers, mechanism, tls=certs["ca"])
    topic = new_topic(options, unique)
    values = [f"v{i}".encode() for i in range(50)]

    writer, handoff, sink_seen = run_sink({**options, "topic": topic}, tmp_path / "ckpt",
                                          values, sasl_ssl)
    parts, read, source_seen = run_source(options, topic, sasl_ssl)

    assert sorted(read) == sorted(values)
    assert handoff.records == len(values)
    seen = {**sink_seen, **source_seen}
    assert SINK_PREPARE <= seen["driver: prepare"].requests
    assert SINK_TASK <= seen["task: write"].requests
    assert SINK_COMMIT <= seen["driver: commit"].requests
    assert SOURCE <= seen["driver: plan"].requests and SOURCE <= seen["task: read"].requests
    for role, phase in seen.items():  # each role connected, and only over TLS as alice
        assert phase.connections and not phase.refused, role
        assert all(c.tls and c.user == USER and c.mechanism == mechanism
                   for c in phase.connections), role

    # Secrets: never shown, whatever is printed or stored.
    sink_opts = SinkOptions.parse({**options, "topic": topic})
    source_opts = SourceOptions.parse({**options, "subscribe": topic}, streaming=False)
    assert_clean(repr(sink_opts.client), str(sink_opts.client), repr(sink_opts), str(sink_opts),
                 repr(source_opts), str(source_opts), repr(writer), *map(repr, parts),
                 *map(str, parts), repr(handoff), str(handoff), handoff.describe(),
                 json.dumps(handoff.to_json()), pickle.dumps(handoff))
    stored = [p for p in (tmp_path / "ckpt").rglob("*") if p.is_file()]
    assert any("decisions" in p.parts for p in stored), stored  # the decision was recorded
    for path in stored:
        assert_clean(path.read_bytes())
    assert_logs_clean(debug_logs)
    assert any(r.name.startswith("kafka.protocol") for r in debug_logs.records)
    if mechanism == "PLAIN":  # kafka-python logged the SaslAuthenticate bytes: redacted
        assert any("SaslAuthenticate" in r.getMessage() and "***" in r.getMessage()
                   for r in debug_logs.records)

    # What executors receive must carry the password (they connect), and only there.
    assert CORE.encode() in pickle.dumps(parts[0])
    assert CORE.encode() in pickle.dumps(writer)


@pytest.mark.tansu_only
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password_fails_fast_and_clean(
    mechanism: str, sasl_ssl: SecureFront, certs: dict[str, Path], unique: str,
    tmp_path: Path, debug_logs: pytest.LogCaptureFixture,
) -> None:
    """Every role refuses at once with EOSKAFKA_AUTHENTICATION_FAILED and no secret."""
    good = options_for(sasl_ssl.bootstrap_servers, mechanism, tls=certs["ca"])
    topic = new_topic(good, unique)
    bad = options_for(sasl_ssl.bootstrap_servers, mechanism, WRONG, tls=certs["ca"])
    part = KafkaInputPartition(topic, 0, 0, 10, ClientConfig.from_options(bad))
    attempts: dict[str, Callable[[], Any]] = {
        "source driver": lambda: EosKafkaDataSource({**bad, "subscribe": topic}).reader(
            kafka_schema(False)).partitions(),
        "source task": lambda: list(read_partition(part)),
        "sink driver": lambda: EosKafkaDataSource(
            {**bad, "topic": topic, "checkpointLocation": str(tmp_path / "c")}
        ).streamWriter(VALUE_SCHEMA, False),
        "sink task": lambda: EosKafkaDataSource({**bad, "topic": topic}).writer(
            VALUE_SCHEMA, False).write(iter([pa.RecordBatch.from_pydict({"value": [b"x"]})])),
    }
    for role, attempt in attempts.items():
        started = time.monotonic()
        with pytest.raises(AuthenticationError) as info:
            attempt()
        assert_short_failure(info.value, started)
        message = str(info.value)
        assert "EOSKAFKA_AUTHENTICATION_FAILED" in message, role
        assert mechanism in message and USER in message and "kafka.sasl.jaas.config" in message
    assert sasl_ssl.refused and not any(CORE in r for r in sasl_ssl.refused)
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert_clean(path.read_bytes())
    assert_logs_clean(debug_logs)


@pytest.mark.tansu_only
def test_tls_only(tls_only: SecureFront, certs: dict[str, Path], unique: str,
                  tmp_path: Path, debug_logs: pytest.LogCaptureFixture) -> None:
    """security.protocol=SSL with a PEM truststore: the whole plugin over TLS; a key
    password (``ssl.key.password``) stays hidden too."""
    options = {"kafka.bootstrap.servers": tls_only.bootstrap_servers,
               "kafka.security.protocol": "SSL",
               "kafka.ssl.ca.location": str(certs["ca"])}
    topic = new_topic(options, unique)
    _, handoff, sink_seen = run_sink({**options, "topic": topic}, tmp_path / "ckpt",
                                     [b"a", b"b"], tls_only)
    _, read, source_seen = run_source(options, topic, tls_only)
    assert sorted(read) == [b"a", b"b"] and handoff.records == 2
    assert "EndTxn" in sink_seen["driver: commit"].requests
    assert "Fetch" in source_seen["task: read"].requests
    for role, phase in {**sink_seen, **source_seen}.items():
        assert phase.connections and all(c.tls for c in phase.connections), role
    hidden = ClientConfig.from_options({**options, "kafka.ssl.key.password": PASSWORD})
    assert hidden.ssl_password == PASSWORD
    assert_clean(repr(hidden), str(hidden))
    assert_logs_clean(debug_logs)


@pytest.mark.tansu_only
@pytest.mark.parametrize("case", ["other CA", "host not in the certificate"])
def test_untrusted_certificate_fails_fast(case: str, tls_only: SecureFront,
                                          certs: dict[str, Path]) -> None:
    host = "localhost" if case.startswith("host") else "127.0.0.1"
    options = {"kafka.bootstrap.servers": f"{host}:{tls_only.port}",
               "kafka.security.protocol": "SSL",
               "kafka.ssl.truststore.location": str(certs["other_ca" if case == "other CA"
                                                          else "ca"]),
               "kafka.socket.connection.setup.timeout.ms": TIMEOUT_MS}
    started = time.monotonic()
    with pytest.raises(AuthenticationError, match="TLS handshake") as info:
        fetch_metadata(KafkaWire(ClientConfig.from_options(options)), [])
    assert_short_failure(info.value, started)
    assert "CERTIFICATE_VERIFY_FAILED" in str(info.value)
    if case.startswith("host"):  # the documented way out: do not check the host name
        options["kafka.ssl.endpoint.identification.algorithm"] = ""
        with KafkaWire(ClientConfig.from_options(options)) as wire:
            assert fetch_metadata(wire, []) is not None


@pytest.mark.tansu_only
def test_mutual_tls(mutual_tls: SecureFront, certs: dict[str, Path], unique: str,
                    tmp_path: Path, debug_logs: pytest.LogCaptureFixture) -> None:
    """A client certificate with an encrypted PEM key: ssl.certificate.location,
    ssl.key.location and ssl.key.password reach every connection; the key password is
    as hidden as the SASL one."""
    server = {"kafka.bootstrap.servers": mutual_tls.bootstrap_servers,
              "kafka.security.protocol": "SSL", "kafka.ssl.ca.location": str(certs["ca"]),
              "kafka.socket.connection.setup.timeout.ms": TIMEOUT_MS}
    options = {**server, "kafka.ssl.keystore.type": "PEM",
               "kafka.ssl.keystore.location": str(certs["client_cert"]),
               "kafka.ssl.key.location": str(certs["client_key"]),
               "kafka.ssl.key.password": KEY_PASSWORD}
    topic = new_topic(options, unique, partitions=1)
    _, handoff, _ = run_sink({**options, "topic": topic}, tmp_path / "ckpt", [b"m"], mutual_tls)
    _, read, _ = run_source(options, topic, mutual_tls)
    assert read == [b"m"] and handoff.records == 1
    assert_clean(repr(ClientConfig.from_options(options)), repr(SinkOptions.parse(options)))

    started = time.monotonic()
    with pytest.raises(AuthenticationError, match="kafka.ssl.key.password") as info:
        new_topic({**options, "kafka.ssl.key.password": f"wrong-{KEY_PASSWORD}"}, "x")
    assert_short_failure(info.value, started)
    started = time.monotonic()
    with pytest.raises(BrokerUnreachableError):  # no client certificate: refused
        new_topic({**server, "kafka.socket.connection.setup.timeout.ms": "1500"}, "x")
    assert time.monotonic() - started < 1.5 + FAST_S
    assert any("certificate" in r for r in mutual_tls.refused)
    assert_logs_clean(debug_logs)


@pytest.mark.tansu_only
def test_sasl_without_tls(sasl_plaintext: SecureFront, unique: str, tmp_path: Path,
                          debug_logs: pytest.LogCaptureFixture) -> None:
    """SASL_PLAINTEXT with kafka.sasl.username / kafka.sasl.password instead of JAAS."""
    options = {"kafka.bootstrap.servers": sasl_plaintext.bootstrap_servers,
               "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
               "kafka.sasl.username": USER, "kafka.sasl.password": PASSWORD}
    topic = new_topic(options, unique, partitions=1)
    _, handoff, sink_seen = run_sink({**options, "topic": topic}, tmp_path / "ckpt", [b"x"],
                                     sasl_plaintext)
    _, read, source_seen = run_source(options, topic, sasl_plaintext)
    assert read == [b"x"] and handoff.records == 1
    for role, phase in {**sink_seen, **source_seen}.items():
        assert phase.connections and all(
            not c.tls and c.mechanism == "PLAIN" and c.user == USER
            for c in phase.connections), role
    assert_logs_clean(debug_logs)


def test_unreachable_broker_error_names_no_secret(debug_logs: pytest.LogCaptureFixture) -> None:
    options = options_for(f"127.0.0.1:{free_port()}", "PLAIN",
                           **{"kafka.socket.connection.setup.timeout.ms": "1000"})
    started = time.monotonic()
    with pytest.raises(BrokerUnreachableError) as info:
        list(read_partition(KafkaInputPartition("t", 0, 0, 1, ClientConfig.from_options(options))))
    assert not isinstance(info.value, AuthenticationError)
    assert time.monotonic() - started < 1 + FAST_S
    assert "EOSKAFKA_BROKER_UNREACHABLE" in str(info.value)
    assert_clean(str(info.value), repr(info.value))
    assert_logs_clean(debug_logs)


# -- the eoskafka command ------------------------------------------------------------------------


@pytest.mark.tansu_only
def test_cli_never_prints_secrets(sasl_ssl: SecureFront, certs: dict[str, Path], unique: str,
                                  tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  debug_logs: pytest.LogCaptureFixture) -> None:
    """-vv shows kafka-python's request log (SaslAuthenticate included), --json the
    documents, txns the decision log: the password appears in none of them."""
    options = options_for(sasl_ssl.bootstrap_servers, "PLAIN", tls=certs["ca"])
    topic = new_topic(options, unique, partitions=1)
    run_sink({**options, "topic": topic}, tmp_path / "ckpt", [b"k"], sasl_ssl)
    capsys.readouterr()
    base = cli_args(options)

    code, out, err = run_cli(capsys, "audit", *base, "--topic", topic, "-vv")
    assert code == 0, err
    assert "SaslAuthenticate" in err and "***" in err  # the request was logged, redacted
    code, out, _ = run_cli(capsys, "txns", *base, "--checkpoint", str(tmp_path / "ckpt"),
                           "--json")
    assert code == 0 and json.loads(out)["batches"]
    code, out, _ = run_cli(capsys, "txns", *base, "--checkpoint", str(tmp_path / "ckpt"))
    assert code == 0 and topic in out

    wrong = cli_args(options_for(sasl_ssl.bootstrap_servers, "SCRAM-SHA-512", WRONG,
                                 tls=certs["ca"]))
    code, _, err = run_cli(capsys, "audit", *wrong, "--topic", topic, "-vv")
    assert code == 2 and "EOSKAFKA_AUTHENTICATION_FAILED" in err
    code, out, _ = run_cli(capsys, "audit", *wrong, "--topic", topic, "--json")
    assert code == 2
    assert json.loads(out)["error"]["condition"] == "EOSKAFKA_AUTHENTICATION_FAILED"
    garbled = ["--config",
               f'kafka.sasl.jaas.config=PlainLoginModule required password="{PASSWORD}"']
    code, _, err = run_cli(capsys, "audit", "-b", sasl_ssl.bootstrap_servers, "--topic", topic,
                       "--config", "kafka.security.protocol=SASL_SSL", *garbled)
    assert code == 2 and "EOSKAFKA_INVALID_OPTION" in err
    assert_logs_clean(debug_logs)
