"""The first error a user reads from a write that cannot work.

The driver checks what it can before any task starts (brokers answer, credentials
are accepted, the topic exists), so the write fails with our condition in the
first lines of Spark's message, and no Spark job runs at all: before these checks,
every task attempt failed first and the cause sat deep in "Writing job failed".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from eos_kafka_source.broker import free_port
from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.wire import KafkaWire, create_topic
from tests.kafka_helpers import create_topic as create_test_topic
from tests.secure_front import SecureFront, make_certificates, sasl_options, secured_broker

pytestmark = pytest.mark.spark

#: Spark's header line, our hook's one frame (two lines), then our error: see errors.user_facing.
HEAD_LINES = 4


def _head(exc: BaseException) -> str:
    return "\n".join(str(exc).strip().splitlines()[:HEAD_LINES])


def _write(spark, options: dict[str, str]) -> None:
    """A local DataFrame, no shuffle: any Spark job in the group would be the write itself."""
    (spark.createDataFrame([(f"v{i}",) for i in range(20)], "value string")
     .write.format("eoskafka").mode("append").options(**options).save())


def _jobs_run(spark, group: str) -> list[int]:
    return list(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SecureFront, Path]]:
    certs = make_certificates(tmp_path_factory.mktemp("certs"))
    with secured_broker(certs=certs, users={"alice": "right-password"}) as f:
        yield f, certs["ca"]


@pytest.mark.smoke
@pytest.mark.parametrize("case", ["no broker", "missing topic", "wrong password"])
def test_batch_write_fails_on_the_driver_naming_the_problem(
    spark, bootstrap: str, unique: str, case: str, request: pytest.FixtureRequest
) -> None:
    if case == "no broker":
        servers = f"127.0.0.1:{free_port()}"
        options = {"kafka.bootstrap.servers": servers, "topic": unique,
                   "kafka.socket.connection.setup.timeout.ms": "2000"}
        needles = ["EOSKAFKA_BROKER_UNREACHABLE", servers]
    elif case == "missing topic":
        options = {"kafka.bootstrap.servers": bootstrap, "topic": unique}
        needles = ["EOSKAFKA_TOPIC_NOT_FOUND", unique, "create them first"]
    else:
        front, ca = request.getfixturevalue("front")
        good = sasl_options(front.bootstrap_servers, "PLAIN", "alice", "right-password", ca=ca)
        with KafkaWire(ClientConfig.from_options(good)) as wire:
            create_topic(wire, unique, 1)
        options = {**sasl_options(front.bootstrap_servers, "PLAIN", "alice", "wrong", ca=ca),
                   "topic": unique}
        needles = ["EOSKAFKA_AUTHENTICATION_FAILED", "kafka.sasl.jaas.config"]
    spark.sparkContext.setJobGroup(unique, "preflight")
    try:
        with pytest.raises(Exception) as info:
            _write(spark, options)
    finally:
        spark.sparkContext.setJobGroup("", "")
    head = _head(info.value)
    for needle in needles:
        assert needle in head, f"{needle!r} not in the first {HEAD_LINES} lines:\n{head}"
    assert "Writing job failed" not in str(info.value)
    assert _jobs_run(spark, unique) == [], "a Spark job ran before the check failed"


def test_stream_write_to_a_missing_topic_fails_before_any_batch(
    spark, bootstrap: str, unique: str, tmp_path: Path
) -> None:
    source = f"{unique}-in"
    create_test_topic(bootstrap, source)
    query = (
        spark.readStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source).option("startingOffsets", "earliest").load()
        .writeStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
        .option("topic", unique).option("checkpointLocation", str(tmp_path / "chk"))
        .trigger(availableNow=True).start()
    )
    with pytest.raises(Exception) as info:
        query.awaitTermination()
    text = str(info.value)
    assert "EOSKAFKA_TOPIC_NOT_FOUND" in text and unique in text
    assert not query.recentProgress, "a micro-batch ran before the check failed"



@pytest.mark.smoke
def test_register_twice_is_harmless(spark) -> None:  # noqa: ANN001
    """A notebook cell run twice: pyspark 4.0 refused the second registration with
    DATA_SOURCE_ALREADY_EXISTS (found by CI's smoke set on 4.0 through the README snippet)."""
    import eos_kafka_source

    eos_kafka_source.register(spark)
    eos_kafka_source.register(spark)
    assert spark.read.format("eoskafka").option("kafka.bootstrap.servers", "unused:1") \
        .option("subscribe", "t").load().columns[:2] == ["key", "value"]
