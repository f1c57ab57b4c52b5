"""``format("eoskafka")`` through Spark over SASL and TLS, and what Spark shows of a secret.

On Apache Kafka (``kafka_only``) the session broker's own listeners serve it
(tests/kafka_security.py): one batch write and read per kind of listener. A batch
write has tasks produce and the driver commit (EndTxn), so both log in; Spark's
driver and executor Python workers are separate processes that reach the listener
only with the ``kafka.*`` options Spark hands them.

Tansu 0.6.0 can neither log anyone in nor speak TLS (tests/broker/test_security_tansu.py
pins both), so on Tansu sessions (``tansu_only``) the broker is a plain Tansu behind
tests/secure_front.py: TLS with a certificate made by the ``openssl`` CLI, then SASL
PLAIN as Kafka's broker answers it.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.wire import KafkaWire, create_topic
from tests.kafka_security import CORE, PASSWORD, USER, WRONG, SecureKafka, make_certificates
from tests.secure_front import SecureFront, sasl_options, secured_broker

pytestmark = pytest.mark.spark


def collect_values(df) -> list[str]:
    return sorted(bytes(r.value).decode() for r in df.select("value").collect())


def assert_explain_clean(df) -> None:
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        df.explain(True)
    assert CORE not in shown.getvalue()


# -- Apache Kafka's listeners ----------------------------------------------------------------------


@pytest.mark.kafka_only
@pytest.mark.parametrize("case", [("SASL_PLAINTEXT", "SCRAM-SHA-512"), ("SSL", None),
                                  ("SASL_SSL", "PLAIN")], ids=lambda c: "-".join(filter(None, c)))
def test_batch_write_and_read_on_kafka(spark, secure_kafka: SecureKafka, unique: str,
                                       case: tuple[str, str | None]) -> None:
    opts = secure_kafka.options(*case)
    with KafkaWire(ClientConfig.from_options(opts)) as wire:
        create_topic(wire, unique, 2)
    rows = [(f"v{i}",) for i in range(40)]
    (spark.createDataFrame(rows, "value string").write.format("eoskafka").mode("append")
     .options(**opts).option("topic", unique).save())
    df = spark.read.format("eoskafka").options(**opts).option("subscribe", unique).load()

    assert collect_values(df) == sorted(v for (v,) in rows)
    assert_explain_clean(df)


def _assert_wrong_password_fails(spark, good: dict[str, str], bad: dict[str, str],
                                 unique: str, role: str) -> None:
    """A read or write with ``bad`` credentials fails the job with our condition, naming the
    option to fix and never showing the password."""
    with KafkaWire(ClientConfig.from_options(good)) as wire:
        create_topic(wire, unique, 1)
    with pytest.raises(Exception) as info:  # Spark wraps ours in its own
        if role == "read":
            spark.read.format("eoskafka").options(**bad).option("subscribe", unique).load() \
                .collect()
        else:
            (spark.createDataFrame([("x",)], "value string").write.format("eoskafka")
             .mode("append").options(**bad).option("topic", unique).save())
    text = str(info.value)
    assert "EOSKAFKA_AUTHENTICATION_FAILED" in text and "kafka.sasl.jaas.config" in text
    assert CORE not in text


@pytest.mark.kafka_only
@pytest.mark.parametrize("role", ["read", "write"])
def test_wrong_password_fails_the_job_on_kafka(spark, secure_kafka: SecureKafka, unique: str,
                                               role: str) -> None:
    good = secure_kafka.options("SASL_SSL", "SCRAM-SHA-512")
    bad = secure_kafka.options("SASL_SSL", "SCRAM-SHA-512", password=WRONG)
    _assert_wrong_password_fails(spark, good, bad, unique, role)


# -- Tansu behind the test-only front door ---------------------------------------------------------


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def front(ca: dict[str, Path]) -> Iterator[SecureFront]:
    with secured_broker(certs=ca, users={USER: PASSWORD}) as f:
        yield f


def options(front: SecureFront, ca: dict[str, Path], password: str = PASSWORD) -> dict[str, str]:
    return sasl_options(front.bootstrap_servers, "PLAIN", USER, password, ca=ca["ca"])


@pytest.mark.tansu_only
def test_batch_write_and_read_over_sasl_ssl(spark, front: SecureFront, ca: dict[str, Path],
                                            unique: str) -> None:
    opts = options(front, ca)
    with KafkaWire(ClientConfig.from_options(opts)) as wire:
        create_topic(wire, unique, 2)
    front.reset()
    rows = [(f"v{i}",) for i in range(40)]
    (spark.createDataFrame(rows, "value string").write.format("eoskafka").mode("append")
     .options(**opts).option("topic", unique).save())
    df = spark.read.format("eoskafka").options(**opts).option("subscribe", unique).load()
    assert collect_values(df) == sorted(v for (v,) in rows)
    assert front.connections and not front.refused
    assert all(c.tls and c.user == USER and c.mechanism == "PLAIN" for c in front.connections)
    assert_explain_clean(df)


@pytest.mark.tansu_only
@pytest.mark.parametrize("role", ["read", "write"])
def test_wrong_password_fails_the_job_without_showing_it(
        spark, front: SecureFront, ca: dict[str, Path], unique: str, role: str) -> None:
    good, bad = options(front, ca), options(front, ca, WRONG)
    _assert_wrong_password_fails(spark, good, bad, unique, role)
