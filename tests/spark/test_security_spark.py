"""``format("eoskafka")`` through Spark over SASL_SSL, and what Spark shows of a secret.

Tansu 0.6.0 can neither log anyone in nor speak TLS (tests/broker/test_security.py
pins both), so the broker here is a plain Tansu behind tests/secure_front.py: TLS
with a certificate made by the ``openssl`` CLI, then SASL PLAIN (the mechanism that
puts the password itself on the wire) as Kafka's broker answers it. Spark's driver
worker and executor workers are separate Python processes: they reach the front only
with the ``kafka.*`` options Spark hands them.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from eos_kafka_source.client_config import ClientConfig
from eos_kafka_source.wire import KafkaWire, create_topic
from tests.secure_front import SecureFront, make_certificates, sasl_options, secured_broker

pytestmark = pytest.mark.spark

USER = "alice"
CORE = "9rT4vW2Y"  # survives every escaping: "CORE not in text" finds any spelling
PASSWORD = f"Sp'{CORE}-k3y-\u00e9"


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def front(ca: dict[str, Path]) -> Iterator[SecureFront]:
    with secured_broker(certs=ca, users={USER: PASSWORD}) as f:
        yield f


def options(front: SecureFront, ca: dict[str, Path], password: str = PASSWORD) -> dict[str, str]:
    return sasl_options(front.bootstrap_servers, "PLAIN", USER, password, ca=ca["ca"])


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
    got = sorted(bytes(r.value).decode() for r in df.select("value").collect())

    assert got == sorted(v for (v,) in rows)
    assert front.connections and not front.refused
    assert all(c.tls and c.user == USER and c.mechanism == "PLAIN" for c in front.connections)
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        df.explain(True)
    assert CORE not in shown.getvalue()


@pytest.mark.parametrize("role", ["read", "write"])
def test_wrong_password_fails_the_job_without_showing_it(
        spark, front: SecureFront, ca: dict[str, Path], unique: str, role: str) -> None:
    good, bad = options(front, ca), options(front, ca, f"wrong-{PASSWORD}")
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
