"""Least-privilege ACLs on Kafka's StandardAuthorizer (docs/design.md invariant 11).

One Kafka node for the module with ``allow.everyone.if.no.acl.found=false`` and a
SASL/PLAIN listener with one user per case: ``full`` holds exactly the ACLs
docs/acls.md documents, ``no-<acl>`` all of them but one, ``nobody`` none. The
PLAINTEXT listener is the tests' admin (ANONYMOUS is a super user). Every user has
its own resources (``<user>.in``, ``<user>.out``, group ``<user>.g``, prefix
``<user>.p``), so the ACLs are made once and the cases cannot see each other.

Each role runs as Spark runs it, below Spark: the source plans and reads, the stream
reader commits ``kafka.group.id`` offsets, the sink's driver prepares, a pickled
writer writes as a task, the driver commits; then the CLI commands. A missing ACL
must fail at once with EOSKAFKA_NOT_AUTHORIZED naming the resource, the operation
and the ``kafka-acls.sh`` line, and leave no transaction open.
"""

from __future__ import annotations

import logging
import pickle
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from eos_kafka_source.apache_kafka import KafkaCluster, KafkaTools, ListenerSpec
from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.datasource import EosKafkaDataSource
from eos_kafka_source.errors import NotAuthorizedError
from eos_kafka_source.sink.driver.claims import claim_group
from eos_kafka_source.sink.driver.fencing import fence
from eos_kafka_source.sink.naming import TransactionalIdFactory
from eos_kafka_source.sink.task.context import WriterContext
from eos_kafka_source.sink.task.writer import TaskWriter
from eos_kafka_source.source.partition_reader import read_partition
from eos_kafka_source.source.partitions import KafkaInputPartition
from eos_kafka_source.source.schema import kafka_schema
from eos_kafka_source.wire import KafkaWire, create_topic, hanging
from eos_kafka_source.wire.groups import fetch_offset
from tests.brokers import KAFKA_VERSION
from tests.kafka_helpers import write_plain
from tests.kafka_security import jaas, run_cli
from tests.oracle import committed_view
from tests.sink_harness import spark_checkpoint

pytestmark = pytest.mark.kafka_only

PASSWORD = "acl-test-pw"
VALUE_SCHEMA = StructType([StructField("value", BinaryType())])
FAST_S = 20.0  # a refusal takes milliseconds; the slack is for a busy host


@dataclass(frozen=True)
class Need:
    """One documented ACL: the roles that need it, and how kafka-acls names it."""

    key: str
    roles: tuple[str, ...]
    kind: str          # TOPIC, GROUP, TRANSACTIONAL_ID
    suffix: str        # the resource is "<user><suffix>"
    operation: str     # READ, WRITE
    prefixed: bool = False

    def resource(self, user: str) -> str:
        return f"{user}{self.suffix}"

    def acl(self, user: str) -> ACL:
        return ACL(f"User:{user}", "*", ACLOperation[self.operation], ACLPermissionType.ALLOW,
                   ResourcePattern(ResourceType[self.kind], self.resource(user),
                                   ACLResourcePatternType.PREFIXED if self.prefixed
                                   else ACLResourcePatternType.LITERAL))


#: docs/acls.md, as data: every ACL a role needs, nothing more (READ and WRITE imply DESCRIBE).
NEEDS = [
    Need("source-read", ("source", "group", "lag"), "TOPIC", ".in", "READ"),
    Need("group-read", ("group",), "GROUP", ".g", "READ"),
    Need("sink-write", ("sink", "batch", "alo", "dlq"), "TOPIC", ".out", "WRITE"),
    Need("sink-read", ("sink", "txns", "audit", "dlq"), "TOPIC", ".out", "READ"),
    Need("ids-write", ("sink", "batch", "fence", "dlq"), "TRANSACTIONAL_ID", ".p", "WRITE",
         prefixed=True),
    Need("groups-read", ("sink", "batch", "dlq"), "GROUP", ".p", "READ", prefixed=True),
    Need("dlq-write", ("dlq",), "TOPIC", ".dlq", "WRITE"),
    Need("dlq-read", ("dlq",), "TOPIC", ".dlq", "READ"),
]
#: The module cluster's transaction.max.timeout.ms (20 minutes, not Kafka's 15).
MAX_TIMEOUT_MS = 1_200_000
USERS = ["full", "nobody", *(f"no-{n.key}" for n in NEEDS)]
FLAGS = {"TOPIC": "--topic", "GROUP": "--group", "TRANSACTIONAL_ID": "--transactional-id"}


@dataclass
class AclKafka:
    cluster: KafkaCluster
    admin: str  # PLAINTEXT bootstrap: ANONYMOUS, a super user

    def options(self, user: str) -> dict[str, str]:
        return {"kafka.bootstrap.servers": self.cluster.listener_bootstrap("SASL_PLAINTEXT"),
                "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
                "kafka.sasl.jaas.config": jaas("PLAIN", user, PASSWORD)}

    def cli_args(self, user: str) -> list[str]:
        opts = self.options(user)
        args = ["-b", opts.pop("kafka.bootstrap.servers")]
        for key, value in opts.items():
            args += ["--config", f"{key}={value}"]
        return args


@pytest.fixture(scope="module")
def acl_kafka() -> Iterator[AclKafka]:
    users = " ".join(f'user_{u}="{PASSWORD}"' for u in USERS)
    listener = ListenerSpec("SASL_PLAINTEXT", "SASL_PLAINTEXT", {
        "sasl.enabled.mechanisms": "PLAIN",
        "plain.sasl.jaas.config":
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"})
    cluster = KafkaCluster(version=KAFKA_VERSION, listeners=[listener], lean_jvm=True,
                           broker_config={
                               "authorizer.class.name":
                                   "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                               "super.users": "User:ANONYMOUS",
                               "allow.everyone.if.no.acl.found": "false",
                               # not Kafka's default: the hanging judge's read is seen
                               "transaction.max.timeout.ms": str(MAX_TIMEOUT_MS)})
    with cluster:
        admin = cluster.bootstrap_servers
        prepare(admin)
        yield AclKafka(cluster, admin)
        open_left = [row for row in KafkaTools(admin).open_transactions()]
        assert open_left == [], f"transactions left open: {open_left}"


def prepare(admin: str) -> None:
    """Through ``admin`` (a super user's PLAINTEXT bootstrap): every user's topics, its
    input records and the ACLs of each user (``full``: all of docs/acls.md, ``no-<acl>``:
    all but one), for any listener whose principals are named as :data:`USERS`."""
    with KafkaWire(ClientConfig.from_options({"kafka.bootstrap.servers": admin})) as wire:
        for user in USERS:
            for suffix in (".in", ".out", ".dlq"):
                create_topic(wire, f"{user}{suffix}", 2)
    for user in USERS:
        write_plain(admin, f"{user}.in", [f"{user}-{i}".encode() for i in range(20)])
    client = KafkaAdminClient(bootstrap_servers=admin)
    try:
        acls = [n.acl("full") for n in NEEDS]
        acls += [m.acl(f"no-{n.key}") for n in NEEDS for m in NEEDS if m is not n]
        result = client.create_acls(acls)
        assert not result["failed"], result["failed"]
    finally:
        client.close()


# -- the roles, as Spark runs them --------------------------------------------------------------

def role_source(k: AclKafka, user: str, tmp: Path) -> Any:
    reader = EosKafkaDataSource({**k.options(user), "subscribe": f"{user}.in"}).reader(
        kafka_schema(False))
    values = []
    for part in reader.partitions():
        assert isinstance(part, KafkaInputPartition)
        for batch in read_partition(pickle.loads(pickle.dumps(part))):
            values += batch.column("value").to_pylist()
    assert sorted(values) == sorted(f"{user}-{i}".encode() for i in range(20))


def role_group(k: AclKafka, user: str, tmp: Path) -> Any:
    """A streaming source with ``kafka.group.id``: plan one batch and commit it."""
    reader = EosKafkaDataSource({**k.options(user), "subscribe": f"{user}.in",
                                 "startingOffsets": "earliest",
                                 "kafka.group.id": f"{user}.g"}).streamReader(
        kafka_schema(False))
    reader.initialOffset()
    reader.commit(reader.latestOffset())
    reader.stop()
    with KafkaWire(ClientConfig.from_options({"kafka.bootstrap.servers": k.admin})) as wire:
        committed = fetch_offset(wire, f"{user}.g", f"{user}.in", 0)
    assert committed is not None, "kafka.group.id offsets were not committed"


def role_sink(k: AclKafka, user: str, tmp: Path) -> Any:
    """The streaming sink: the driver prepares (claim, fencing), a pickled copy writes as a
    task, another commits as Spark's commit worker."""
    options = {**k.options(user), "topic": f"{user}.out",
               "transactionalIdPrefix": f"{user}.p.{tmp.name}",
               "checkpointLocation": spark_checkpoint(tmp / "ckpt")}
    planner = EosKafkaDataSource(options).streamWriter(VALUE_SCHEMA, False)
    task = pickle.loads(pickle.dumps(planner))
    handoff = task.write(iter([pa.RecordBatch.from_pydict({"value": [b"a", b"b"]})]))
    pickle.loads(pickle.dumps(planner)).commit([pickle.loads(pickle.dumps(handoff))], 0)


DEAD_LETTER_SCHEMA = StructType([
    StructField("value", BinaryType()),
    StructField("deadLetter", StructType([StructField("value", BinaryType()),
                                          StructField("error", StringType())]))])


def role_dlq(k: AclKafka, user: str, tmp: Path) -> Any:
    """The streaming sink with ``deadLetterTopic``: a good row to the output topic and a
    dead letter to the dead-letter topic, in one task's transaction."""
    options = {**k.options(user), "topic": f"{user}.out", "deadLetterTopic": f"{user}.dlq",
               "transactionalIdPrefix": f"{user}.p.{tmp.name}",
               "checkpointLocation": spark_checkpoint(tmp / "ckpt")}
    planner = EosKafkaDataSource(options).streamWriter(DEAD_LETTER_SCHEMA, False)
    task = pickle.loads(pickle.dumps(planner))
    dead = pa.array([None, {"value": b"raw", "error": "bad"}],
                    pa.struct([("value", pa.binary()), ("error", pa.string())]))
    batch = pa.RecordBatch.from_arrays([pa.array([b"a", b"b"]), dead],
                                       names=["value", "deadLetter"])
    handoff = task.write(iter([batch]))
    pickle.loads(pickle.dumps(planner)).commit([pickle.loads(pickle.dumps(handoff))], 0)


def role_batch(k: AclKafka, user: str, tmp: Path, **more: str) -> Any:
    """A batch write (exactly-once unless ``more`` says otherwise): tasks, then the driver."""
    options = {**k.options(user), "topic": f"{user}.out", **more}
    if not more:
        options["transactionalIdPrefix"] = f"{user}.p.{tmp.name}"
    writer = EosKafkaDataSource(options).writer(VALUE_SCHEMA, False)
    task = pickle.loads(pickle.dumps(writer))
    message = task.write(iter([pa.RecordBatch.from_pydict({"value": [b"c"]})]))
    writer.commit([pickle.loads(pickle.dumps(message))])


def role_alo(k: AclKafka, user: str, tmp: Path) -> Any:
    """The at-least-once sink: an idempotent producer, no transactional id."""
    role_batch(k, user, tmp, **{"delivery.guarantee": "at_least_once"})


def role_fence(k: AclKafka, user: str, tmp: Path) -> Any:
    return _cli(k, user, "fence", "--prefix", f"{user}.p.{tmp.name}", "--pool-size", "2")


def role_txns(k: AclKafka, user: str, tmp: Path) -> Any:
    return _cli(k, user, "txns", "--topic", f"{user}.out")


def role_lag(k: AclKafka, user: str, tmp: Path) -> Any:
    """``eoskafka lag`` on a checkpoint whose offset log planned batch 0 of ``<user>.in``."""
    offsets = tmp / "ckpt" / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "0").write_text(f'v1\n{{"batchWatermarkMs":0}}\n{{"{user}.in":{{"0":5}}}}\n')
    return _cli(k, user, "lag", "--checkpoint", str(tmp / "ckpt"))


def role_audit(k: AclKafka, user: str, tmp: Path) -> Any:
    return _cli(k, user, "audit", "--topic", f"{user}.out", "--from-beginning")


_CAPSYS: list[pytest.CaptureFixture[str]] = []


def _cli(k: AclKafka, user: str, *argv: str) -> None:
    code, out, err = run_cli(_CAPSYS[-1], *argv, *k.cli_args(user))
    if code != 0:
        raise CliFailed(code, out + err)


class CliFailed(Exception):
    def __init__(self, code: int, text: str) -> None:
        super().__init__(f"exit {code}: {text}")
        self.code, self.text = code, text


ROLES: dict[str, Callable[[AclKafka, str, Path], Any]] = {
    "source": role_source, "group": role_group, "sink": role_sink, "batch": role_batch,
    "alo": role_alo, "fence": role_fence, "dlq": role_dlq,
    "txns": role_txns, "audit": role_audit, "lag": role_lag,
}


@pytest.fixture(autouse=True)
def _capsys(capsys: pytest.CaptureFixture[str]) -> Iterator[None]:
    _CAPSYS.append(capsys)
    yield
    _CAPSYS.pop()


def refused(k: AclKafka, role: str, user: str, tmp: Path,
            caplog: pytest.LogCaptureFixture) -> str:
    """Run ``role`` as ``user``; the first line of the refusal it failed with (or, for the
    advisory ``kafka.group.id`` commit, the warning it logged)."""
    started = time.monotonic()
    caplog.clear()
    try:
        ROLES[role](k, user, tmp)
    except NotAuthorizedError as exc:
        text = str(exc)
    except CliFailed as exc:
        assert exc.code == 2, exc.text
        text = exc.text
    except AssertionError:
        if role != "group":
            raise
        warnings = [r.getMessage() for r in caplog.records if "NOT_AUTHORIZED" in r.getMessage()]
        assert warnings, "the kafka.group.id commit failed without saying why"
        text = warnings[0].split("): ", 1)[1]
    else:
        pytest.fail(f"{role} as {user} succeeded")
    assert time.monotonic() - started < FAST_S, f"{role} took {time.monotonic() - started:.1f}s"
    first = text.strip().splitlines()[0]
    assert "[EOSKAFKA_NOT_AUTHORIZED]" in first, text
    return first


# -- the tests ----------------------------------------------------------------------------------

@pytest.mark.parametrize("role", list(ROLES))
def test_the_documented_acls_suffice(role: str, acl_kafka: AclKafka, tmp_path: Path) -> None:
    ROLES[role](acl_kafka, "full", tmp_path)
    if role == "sink":
        prefix = f"full.p.{tmp_path.name}"
        with KafkaWire(ClientConfig.from_options(acl_kafka.options("full"))) as wire:
            assert fetch_offset(wire, claim_group(prefix), "full.out", 0) is not None
    if role == "dlq":
        dead = [r.value for pv in committed_view(acl_kafka.admin, "full.dlq").values()
                for r in pv.committed]
        assert b"raw" in dead


def refusals_name_the_user(k: AclKafka, need: Need, tmp: Path,
                           caplog: pytest.LogCaptureFixture) -> None:
    """``no-<acl>`` (every documented ACL but ``need``) runs each role that needs it: the
    first thing it reads names the user, the operation, the resource and the kafka-acls
    line that grants it, and nothing is left open. Shared by every sign-in's matrix."""
    user = f"no-{need.key}"
    caplog.set_level(logging.WARNING, "eos_kafka_source")
    for role in need.roles:
        first = refused(k, role, user, tmp / role, caplog)
        assert f"User:{user} may not " in first, (role, first)
        assert f"--allow-principal User:{user}" in first, (role, first)
        assert f"{FLAGS[need.kind]} {need.resource(user)}" in first, (role, first)
        assert ("--resource-pattern-type prefixed" in first) == need.prefixed, (role, first)
        op = first.split(" may not ", 1)[1].split(" ", 1)[0]
        assert op in (need.operation, "DESCRIBE"), (role, first)
    assert open_producers(k, f"{user}.out") == set()
    assert open_producers(k, f"{user}.dlq") == set()


@pytest.mark.parametrize("need", NEEDS, ids=lambda n: n.key)
def test_each_missing_acl_fails_fast_naming_it(need: Need, acl_kafka: AclKafka, tmp_path: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    refusals_name_the_user(acl_kafka, need, tmp_path, caplog)


@pytest.mark.parametrize("role", list(ROLES))
def test_nobody_reads_writes_and_fences_nothing(role: str, acl_kafka: AclKafka, tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "eos_kafka_source")
    refused(acl_kafka, role, "nobody", tmp_path, caplog)
    assert open_producers(acl_kafka, "nobody.out") == set()


def test_the_hanging_judge_reads_the_max_timeout_with_cluster_describe_configs(
        acl_kafka: AclKafka, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """docs/acls.md's optional CLUSTER DESCRIBE_CONFIGS: with the minimum set the judge of
    hanging transactions takes Kafka's 15 minutes and an INFO line names the ACL; granted,
    it reads the cluster's own transaction.max.timeout.ms."""
    caplog.set_level(logging.INFO, "eos_kafka_source.wire.hanging")

    def limit() -> int:
        monkeypatch.setattr(hanging, "_max_timeouts", {})  # remembered per cluster
        with KafkaWire(ClientConfig.from_options(acl_kafka.options("full"))) as wire:
            return hanging.max_transaction_timeout_ms(wire)

    assert limit() == hanging.DEFAULT_MAX_TIMEOUT_MS
    said = [r.getMessage() for r in caplog.records if hanging.MAX_TIMEOUT_KEY in r.getMessage()]
    assert said and "User:full may not DESCRIBE_CONFIGS the cluster" in said[0], said
    assert "--operation DescribeConfigs --cluster" in said[0], said
    pattern = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster",
                              ACLResourcePatternType.LITERAL)
    grant = ACL("User:full", "*", ACLOperation.DESCRIBE_CONFIGS, ACLPermissionType.ALLOW,
                pattern)
    client = KafkaAdminClient(bootstrap_servers=acl_kafka.admin)
    try:
        assert not client.create_acls([grant])["failed"]
        assert limit() == MAX_TIMEOUT_MS
    finally:  # ``full`` holds exactly the documented minimum again
        client.delete_acls([ACLFilter("User:full", "*", ACLOperation.DESCRIBE_CONFIGS,
                                      ACLPermissionType.ALLOW, ResourcePatternFilter(
                                          ResourceType.CLUSTER, "kafka-cluster",
                                          ACLResourcePatternType.LITERAL))])
        client.close()


@pytest.mark.parametrize("user", ["nobody", "full"])
def test_fence_cannot_touch_ids_it_was_not_granted(user: str, acl_kafka: AclKafka,
                                                   tmp_path: Path, capsys) -> None:
    """An admin's open transaction on a prefix ``user`` has no rights on: ``eoskafka fence``
    fails loudly (exit 2, the ACL it lacks) and the transaction stays open until the admin
    ends it."""
    victim = f"victim.{user}.{tmp_path.name}"
    ids = TransactionalIdFactory(victim)
    admin = ClientConfig.from_options({"kafka.bootstrap.servers": acl_kafka.admin})
    with KafkaWire(admin) as wire:
        writer = TaskWriter(wire, transactional_id=ids.for_task(0), topic="full.out",
                            transaction_timeout_ms=60000, batch_records=50,
                            context=WriterContext(task_partition=0, lineage="victim"))
        writer.open()
        writer.write_batch(pa.RecordBatch.from_pydict({"value": [b"victim"]}))
        victim_pid = writer.handoff().producer_id
        try:
            code, out, err = run_cli(capsys, "fence", "--prefix", victim, "--pool-size", "1",
                                     *acl_kafka.cli_args(user))
            assert code == 2, out + err
            assert "[EOSKAFKA_NOT_AUTHORIZED]" in err and f"transactional id '{victim}-0'" in err
            assert open_producers(acl_kafka, "full.out") == {victim_pid}, \
                "the unprivileged fence touched the transaction"
        finally:
            fence(wire, [ids.for_task(0)], 60000)  # the admin ends it
    assert open_producers(acl_kafka, "full.out") == set()


def open_producers(k: AclKafka, topic: str) -> set[int]:
    """Producers with a transaction open on ``topic``, read from its log as the admin (the
    module's teardown asks Kafka's own kafka-transactions too, once)."""
    return {pid for pv in committed_view(k.admin, topic).values() for pid in pv.open_producers}


@pytest.mark.spark
def test_spark_stream_with_the_documented_acls_then_a_missing_one(acl_kafka: AclKafka,
                                                                   tmp_path: Path, spark) -> None:
    """End to end in Spark as ``full``: a stream from ``full.in`` to ``full.out`` (claim,
    fencing, commit) and a batch read back. Then the same query as ``no-ids-write``: the
    refusal is what the user reads first in Spark's error."""

    def run(user: str, checkpoint: Path) -> None:
        options = acl_kafka.options(user)
        query = (spark.readStream.format("eoskafka").options(**options)
                 .option("subscribe", f"{user}.in").option("startingOffsets", "earliest").load()
                 .selectExpr("value").writeStream.format("eoskafka").options(**options)
                 .option("topic", f"{user}.out")
                 .option("transactionalIdPrefix", f"{user}.p.spark")
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        try:
            query.awaitTermination(300)
        finally:
            query.stop()

    run("full", tmp_path / "full")
    read = (spark.read.format("eoskafka").options(**acl_kafka.options("full"))
            .option("subscribe", "full.out").load().selectExpr("CAST(value AS STRING) v"))
    assert {f"full-{i}" for i in range(20)} <= {r.v for r in read.collect()}
    with pytest.raises(Exception) as info:
        run("no-ids-write", tmp_path / "missing")
    text = str(info.value)
    assert "[EOSKAFKA_NOT_AUTHORIZED] User:no-ids-write may not " in text
    assert "--transactional-id no-ids-write.p.spark --resource-pattern-type prefixed" in text
    assert open_producers(acl_kafka, "no-ids-write.out") == set()
