"""The ``eoskafka`` command line against the embedded broker, run in-process via ``main()``.

Checkpoints are built by driving the sink's protocol classes (TaskWriter for the
tasks, DriverProtocol for the driver) as tests/broker/test_sink_protocol.py does;
topic contents are written by kafka-python and checked with the independent oracle.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from eos_kafka_source.broker import free_port
from eos_kafka_source.cli import main
from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.sink.decisions.log import DecisionLog
from eos_kafka_source.sink.driver.fencing import fence
from eos_kafka_source.sink.driver.protocol import DriverProtocol
from eos_kafka_source.sink.handoff import TxnHandoff
from eos_kafka_source.sink.naming import TransactionalIdFactory
from eos_kafka_source.sink.task.context import WriterContext
from eos_kafka_source.sink.task.writer import TaskWriter
from eos_kafka_source.wire import KafkaWire
from eos_kafka_source.wire.cluster import create_topic as create_topic_on
from tests.brokers import ON_TANSU
from tests.kafka_helpers import TxnWriter, create_topic, write_plain
from tests.oracle import (
    assert_no_open_transactions,
    await_markers,
    committed_values,
    committed_view,
)

SECRET = "s3cret-pa55"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        f'username="alice" password="{SECRET}";')
REPO = Path(__file__).resolve().parents[2]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = cli(capsys, *argv, "--json")
    doc = json.loads(out)
    assert doc["version"] == 1
    return code, doc


def open_producers(bootstrap: str, topic: str) -> int:
    """Producers with an open transaction on any partition of ``topic``."""
    return len({pid for pv in committed_view(bootstrap, topic).values()
                for pid in pv.open_producers})


class Sink:
    """One query's sink: tasks write through TaskWriter, the driver commits."""

    def __init__(self, bootstrap: str, topic: str, prefix: str, checkpoint: Path) -> None:
        self.cfg = ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap})
        self.topic, self.checkpoint = topic, str(checkpoint)
        self.ids = TransactionalIdFactory(prefix)
        self.log = DecisionLog(self.checkpoint)
        self.driver = DriverProtocol(self.ids, self.log, self.wire, owner=self.checkpoint,
                                     transaction_timeout_ms=60000)

    def wire(self) -> KafkaWire:
        return KafkaWire(self.cfg)

    def task(self, partition: int, values: list[bytes]) -> TxnHandoff:
        """A task attempt that writes and hands over an open transaction."""
        with self.wire() as wire:
            writer = TaskWriter(wire, transactional_id=self.ids.for_task(partition),
                                topic=self.topic, transaction_timeout_ms=60000,
                                batch_records=50, context=WriterContext(task_partition=partition))
            writer.open()
            writer.write_batch(pa.RecordBatch.from_pydict({"value": values}))
            return writer.handoff()


def _vals(tag: str, n: int = 10) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n)]


@pytest.fixture
def sink(bootstrap: str, unique: str, tmp_path: Path) -> Iterator[Sink]:
    create_topic(bootstrap, unique, partitions=2)
    s = Sink(bootstrap, unique, unique, tmp_path / "ckpt")
    s.driver.prepare(new_run=True)
    yield s
    with s.wire() as wire:  # whatever a failed test left open on these ids
        fence(wire, s.ids.pool(8), 60000)


# -- usage, errors, secrets -------------------------------------------------------------------


def test_help_and_usage_errors(capsys) -> None:
    code, out, _ = cli(capsys, "--help")
    assert code == 0 and "txns" in out and "exit status" in out
    for command in ("broker", "txns", "fence", "abort", "audit", "lag", "migrate"):
        code, out, _ = cli(capsys, command, "--help")
        assert code == 0 and "examples:" in out
    assert cli(capsys)[0] == 2
    code, _, err = cli(capsys, "fence", "--dry-run")
    assert code == 2 and err.startswith("eoskafka: error:") and "--prefix" in err
    code, _, err = cli(capsys, "txns", "--topic", "x", "-b", "")
    assert code == 2 and "--bootstrap-server" in err


def test_connection_error_exits_2_without_traceback(capsys) -> None:
    dead = f"127.0.0.1:{free_port()}"
    code, out, err = cli(capsys, "audit", "-b", dead, "--topic", "t",
                         "-c", "socket.connection.setup.timeout.ms=500")
    assert code == 2 and "EOSKAFKA_BROKER_UNREACHABLE" in err
    code, out, err = cli(capsys, "txns", "-b", dead, "--topic", "t", "--json",
                         "-c", "kafka.socket.connection.setup.timeout.ms=500")
    assert code == 2 and json.loads(out)["error"]["condition"] == "EOSKAFKA_BROKER_UNREACHABLE"


def test_missing_topic_and_checkpoint_are_errors(capsys, bootstrap, unique, tmp_path) -> None:
    code, _, err = cli(capsys, "audit", "-b", bootstrap, "--topic", f"{unique}-absent")
    assert code == 2 and "TOPIC_NOT_FOUND" in err
    empty = tmp_path / "not-a-checkpoint"
    code, _, err = cli(capsys, "txns", "--checkpoint", str(empty))
    assert code == 2 and "no eoskafka decision log" in err
    assert not empty.exists()  # inspecting never creates a log


def test_secrets_never_printed(capsys, bootstrap) -> None:
    # Rejected: SASL settings without a SASL protocol.
    code, out, err = cli(capsys, "fence", "--prefix", "p", "--pool-size", "1", "-b", bootstrap,
                         "-c", f"kafka.sasl.jaas.config={JAAS}", "--json")
    assert code == 2 and SECRET not in out + err and "SASL" in err
    # Accepted but failing to connect (the broker speaks no SASL): the error hides it too.
    sasl = ["-c", "kafka.security.protocol=SASL_PLAINTEXT", "-c", f"sasl.jaas.config={JAAS}",
            "-c", "socket.connection.setup.timeout.ms=1000", "-c", "request.timeout.ms=1000"]
    code, out, err = cli(capsys, "audit", "-b", bootstrap, "--topic", "t", "-vv", *sasl)
    assert code == 2 and SECRET not in out + err
    # Accepted, no connection needed: the full output.
    code, out, err = cli(capsys, "fence", "--prefix", "p", "--pool-size", "2", "--dry-run",
                         "-b", bootstrap, "-v", *sasl)
    assert code == 0 and SECRET not in out + err and "p-1" in out
    # Malformed entries are named by position, never shown.
    code, out, err = cli(capsys, "fence", "--prefix", "p", "--pool-size", "1", "-b", bootstrap,
                         "-c", f"password{SECRET}")
    assert code == 2 and SECRET not in out + err and "--config #1" in err
    code, out, err = cli(capsys, "fence", "--prefix", "p", "--pool-size", "1", "-b", bootstrap,
                         "-c", f"ssl.key.password={SECRET}")
    assert code == 2 and SECRET not in out + err


# -- broker -----------------------------------------------------------------------------------


def _first_line(proc: subprocess.Popen[str], deadline_s: float = 30.0) -> str:
    """The first stdout line of ``proc``, without blocking past the deadline."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout=deadline_s):
            raise AssertionError("eoskafka broker printed nothing")
    return proc.stdout.readline()


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return True
    return False


@pytest.mark.parametrize("signum, as_json", [(signal.SIGTERM, False), (signal.SIGINT, True)])
def test_broker_command_runs_until_signalled(signum: int, as_json: bool, unique: str) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "eos_kafka_source.cli", "broker", "--port", str(port)]
    proc = subprocess.Popen(argv + (["--json"] if as_json else []), cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = _first_line(proc).strip()
        address = json.loads(line)["bootstrap_servers"] if as_json else line
        assert address == f"127.0.0.1:{port}"
        create_topic(address, unique)  # a working Kafka broker behind the address
        write_plain(address, unique, [b"v"])
        proc.send_signal(signum)
        assert proc.wait(timeout=30) == 0
        assert _refused(port)  # the broker process is gone with it
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _, err = proc.communicate()
    assert "Traceback" not in err and "stopping the broker" in err


@pytest.mark.kafka_only
def test_broker_command_runs_apache_kafka(unique: str) -> None:
    argv = [sys.executable, "-m", "eos_kafka_source.cli", "broker", "--kafka", "--json"]
    proc = subprocess.Popen(argv, cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        address = json.loads(_first_line(proc, deadline_s=120).strip())["bootstrap_servers"]
        create_topic(address, unique)
        write_plain(address, unique, [b"v"])
        assert committed_values(address, unique) == [b"v"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 0
        assert _refused(int(address.rsplit(":", 1)[1]))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _, err = proc.communicate()
    assert "Traceback" not in err and "Apache Kafka 4.4" in err


def _stderr_until(proc: subprocess.Popen[str], needle: str, deadline_s: float) -> str:
    """Read ``proc``'s stderr line by line until one contains ``needle``; that line."""
    assert proc.stderr is not None
    seen: list[str] = []
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stderr, selectors.EVENT_READ)
        end = time.monotonic() + deadline_s
        while (left := end - time.monotonic()) > 0:
            if not sel.select(timeout=left):
                break
            line = proc.stderr.readline()
            if not line:
                break
            seen.append(line)
            if needle in line:
                return line
    raise AssertionError(f"no stderr line with {needle!r} in {deadline_s} s:\n{''.join(seen)}")


@pytest.mark.kafka_only
@pytest.mark.faults
def test_broker_command_three_nodes_outlive_a_killed_node_and_restart_it(unique: str) -> None:
    """`eoskafka broker --kafka --nodes 3`: each node's port and pid reported; a node killed
    with SIGKILL is reported and the other two serve on (a write with min.insync.replicas 2
    lands); SIGHUP brings it back on its port; SIGTERM then stops all three, exit 0."""
    argv = [sys.executable, "-m", "eos_kafka_source.cli", "broker", "--kafka", "--nodes", "3",
            "--json"]
    proc = subprocess.Popen(argv, cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        doc = json.loads(_first_line(proc, deadline_s=240).strip())
        nodes, address = doc["nodes"], doc["bootstrap_servers"]
        assert [n["node_id"] for n in nodes] == [1, 2, 3] and all(n["pid"] for n in nodes)
        assert address == ",".join(f"127.0.0.1:{n['port']}" for n in nodes)
        with KafkaWire(ClientConfig.from_options({"kafka.bootstrap.servers": address})) as w:
            create_topic_on(w, unique, 3, replication=3)  # every partition on every node
        victim = nodes[1]
        os.kill(victim["pid"], signal.SIGKILL)
        _stderr_until(proc, f"node 2 (127.0.0.1:{victim['port']}) exited", 30)
        assert proc.poll() is None and _refused(victim["port"])
        write_plain(address, unique, [b"a", b"b", b"c"])
        proc.send_signal(signal.SIGHUP)
        _stderr_until(proc, f"node 2 is back on 127.0.0.1:{victim['port']}", 240)
        assert not _refused(victim["port"])
        write_plain(address, unique, [b"d"])
        assert sorted(committed_values(address, unique)) == [b"a", b"b", b"c", b"d"]  # type: ignore[type-var]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=180) == 0
        assert all(_refused(n["port"]) for n in nodes)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _, err = proc.communicate()
    assert "Traceback" not in err, err


@pytest.mark.parametrize("missing", ["java", "mvn"])
def test_broker_kafka_without_java_or_maven_says_what_is_missing(
        missing: str, tmp_path: Path) -> None:
    # A PATH holding only what is not missing (java found through a symlink when it stays).
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in {"java", "mvn"} - {missing}:
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    env = {**os.environ, "PATH": str(bin_dir), "EOSKAFKA_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "eos_kafka_source.cli", "broker", "--kafka"],
                          cwd=REPO, env=env, text=True, capture_output=True, timeout=60)
    assert done.returncode == 2
    first = done.stderr.strip().splitlines()[0]
    assert "EOSKAFKA_KAFKA_NEEDS_JAVA" in first and f"`{missing}`" in first
    assert "Tansu" in first and "Traceback" not in done.stderr


def test_broker_refuses_a_taken_port(capsys) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        code, _, err = cli(capsys, "broker", "--port", str(taken.getsockname()[1]))
    assert code == 2 and "already in use" in err


# -- txns ---------------------------------------------------------------------------------------


def test_txns_reports_decided_batches(capsys, sink: Sink, bootstrap: str) -> None:
    sink.driver.commit(0, [sink.task(p, _vals(f"b0t{p}")) for p in range(2)], tasks=2)
    sink.driver.commit(1, [sink.task(0, _vals("b1t0", 5))], tasks=1)
    code, doc = cli_json(capsys, "txns", "--checkpoint", sink.checkpoint, "-b", bootstrap)
    assert code == 0 and doc["ok"] and doc["undone"] == []
    assert doc["pool"]["prefix"] == sink.ids.prefix and doc["pool"]["size"] == 2
    b0, b1 = doc["batches"]
    assert (b0["batch_id"], b0["state"], b0["transactions"]) == (0, "done", 2)
    assert (b0["records"], b0["transactions_committed"], b0["transactions_lost"]) == (20, 2, 0)
    assert b0["bytes"] > 0 and b0["lost"] == []
    assert b0["decided_at"] <= b0["done_at"] and b0["commit_seconds"] >= 0
    assert sum(p["records"] for p in b0["partitions"]) == 20
    assert {h["transactional_id"] for h in b0["handoffs"]} == set(sink.ids.pool(2))
    assert b1["records"] == 5 and b1["transactions"] == 1
    assert doc["topics"] == [sink.topic]  # taken from the hand-offs
    assert [p["open"] for p in doc["partitions"]] == [[], []]
    code, out, _ = cli(capsys, "txns", "--checkpoint", sink.checkpoint)
    assert code == 0 and "done" in out and "OK" in out and "no broker given" in out


def test_txns_flags_undone_batch_and_fence_refuses_it(capsys, sink: Sink, bootstrap: str,
                                                      faults) -> None:
    handoffs = [sink.task(p, _vals(f"t{p}")) for p in range(2)]
    faults("commit.after_decision=raise")
    with pytest.raises(RuntimeError, match="injected fault"):
        sink.driver.commit(0, handoffs, tasks=2)  # the driver died after its decision
    faults("")
    code, doc = cli_json(capsys, "txns", "--checkpoint", sink.checkpoint, "-b", bootstrap,
                         "--topic", sink.topic)
    assert code == 1 and not doc["ok"] and doc["undone"] == [0]
    assert doc["batches"][0]["state"] == "undone" and doc["batches"][0]["done_at"] is None
    assert doc["batches"][0]["transactions_committed"] is None
    opened = [o for p in doc["partitions"] for o in p["open"]]
    assert doc["open_transactions"] == len(opened) >= 1
    assert {o["transactional_id"] for o in opened} <= set(sink.ids.pool(2))
    assert sum(o["records"] for o in opened) == 20
    code, out, _ = cli(capsys, "txns", "--checkpoint", sink.checkpoint, "-b", bootstrap)
    assert code == 1 and "UNDONE" in out and "PROBLEM" in out
    # Fencing would abort what the query decided to commit: refused.
    code, doc = cli_json(capsys, "fence", "--checkpoint", sink.checkpoint, "-b", bootstrap)
    assert code == 1 and doc["refused"] and doc["fenced"] == []
    assert open_producers(bootstrap, sink.topic) >= 1
    sink.driver.prepare(new_run=True)  # the restarted query rolls the batch forward
    code, doc = cli_json(capsys, "txns", "--checkpoint", sink.checkpoint, "-b", bootstrap)
    assert code == 0 and doc["batches"][0]["transactions_committed"] == 2
    assert_no_open_transactions(bootstrap, sink.topic)


def test_fence_force_aborts_an_undone_batch(capsys, sink: Sink, bootstrap: str,
                                            faults) -> None:
    handoffs = [sink.task(p, _vals(f"t{p}")) for p in range(2)]
    faults("commit.after_decision=raise")
    with pytest.raises(RuntimeError, match="injected fault"):
        sink.driver.commit(0, handoffs, tasks=2)
    faults("")
    code, out, _ = cli(capsys, "fence", "--checkpoint", sink.checkpoint, "--dry-run")
    assert code == 1 and "REFUSED" in out and "--force" in out
    code, doc = cli_json(capsys, "fence", "--checkpoint", sink.checkpoint, "-b", bootstrap,
                         "--force")
    assert code == 0 and doc["undone"] == [0] and not doc["refused"] and len(doc["fenced"]) == 2
    assert open_producers(bootstrap, sink.topic) == 0
    assert all(not pv.committed for pv in committed_view(bootstrap, sink.topic).values())
    # The log still says undone: the restarted driver will report the loss loudly.
    assert cli(capsys, "txns", "--checkpoint", sink.checkpoint)[0] == 1


def test_fence_a_pool_wider_than_the_in_flight_limit(capsys, bootstrap, unique) -> None:
    """InitProducerId is pipelined: more ids than kafka-python's 5 in flight per connection."""
    code, doc = cli_json(capsys, "fence", "-b", bootstrap, "--prefix", unique,
                         "--pool-size", "12", "--probe")
    assert code == 0 and len(doc["fenced"]) == 12 and all(f["epoch"] == 0 for f in doc["fenced"])
    assert doc["used_beyond_pool"] == 12
    code, doc = cli_json(capsys, "fence", "-b", bootstrap, "--prefix", unique, "--pool-size", "12")
    assert code == 0 and all(f["epoch"] == 1 for f in doc["fenced"])


# -- fence ------------------------------------------------------------------------------------


def test_fence_dry_run_changes_nothing_then_fence_closes(capsys, sink: Sink,
                                                         bootstrap: str) -> None:
    for p in range(2):
        sink.task(p, _vals(f"killed{p}"))  # a killed run: open, never handed over
    code, doc = cli_json(capsys, "txns", "-b", bootstrap, "--topic", sink.topic)
    assert code == 1 and doc["open_transactions"] >= 1
    before = committed_view(bootstrap, sink.topic)
    prefix = ["--prefix", sink.ids.prefix, "--pool-size", "2"]
    code, out, _ = cli(capsys, "fence", *prefix, "--dry-run", "-b", bootstrap)
    assert code == 0 and "dry run" in out
    assert sink.ids.for_task(0) in out and sink.ids.for_task(1) in out
    code, doc = cli_json(capsys, "abort", *prefix, "--dry-run")
    assert code == 0 and doc["ids"] == sink.ids.pool(2) and doc["fenced"] == []
    after = committed_view(bootstrap, sink.topic)
    assert {p: (v.open_producers, len(v.open)) for p, v in after.items()} == {
        p: (v.open_producers, len(v.open)) for p, v in before.items()}
    code, doc = cli_json(capsys, "fence", *prefix, "-b", bootstrap)
    assert code == 0 and [f["transactional_id"] for f in doc["fenced"]] == sink.ids.pool(2)
    assert all(f["epoch"] > 0 for f in doc["fenced"])
    assert cli(capsys, "txns", "-b", bootstrap, "--topic", sink.topic)[0] == 0
    assert_no_open_transactions(bootstrap, sink.topic)


def test_fence_probe_reaches_ids_past_the_pool(capsys, sink: Sink, bootstrap: str) -> None:
    sink.task(5, _vals("wide"))  # a killed batch with more tasks than the recorded pool
    prefix = ["--prefix", sink.ids.prefix, "--pool-size", "1", "-b", bootstrap]
    assert cli(capsys, "abort", *prefix)[0] == 0
    assert open_producers(bootstrap, sink.topic) == 1  # past the pool: not reached
    code, doc = cli_json(capsys, "abort", *prefix, "--probe")
    assert code == 0 and doc["used_beyond_pool"] == 6
    assert sink.ids.for_task(5) in {f["transactional_id"] for f in doc["probed"]}
    code, out, _ = cli(capsys, "fence", *prefix, "--probe")
    # Kafka lists open transactions (ListTransactions): the first probe closed id 5's, so the
    # second finds nothing open past the pool. Tansu cannot list them: probing by epochs
    # counts every id the first probe bumped as used.
    seen = "past the pool, ids up to" if ON_TANSU else "past the pool, no id was in use"
    assert code == 0 and seen in out
    assert cli(capsys, "txns", "-b", bootstrap, "--topic", sink.topic)[0] == 0
    assert_no_open_transactions(bootstrap, sink.topic)


def test_fence_from_checkpoint(capsys, sink: Sink, bootstrap: str) -> None:
    sink.driver.commit(0, [sink.task(p, _vals(f"ok{p}")) for p in range(3)], tasks=3)
    for p in range(3):
        sink.task(p, _vals(f"killed{p}"))
    code, out, _ = cli(capsys, "fence", "--checkpoint", sink.checkpoint, "--dry-run")
    assert code == 0 and all(t in out for t in sink.ids.pool(3))
    code, doc = cli_json(capsys, "fence", "--checkpoint", sink.checkpoint, "-b", bootstrap)
    assert code == 0 and (doc["prefix"], doc["pool_size"]) == (sink.ids.prefix, 3)
    assert cli(capsys, "txns", "--checkpoint", sink.checkpoint, "-b", bootstrap)[0] == 0
    view = committed_view(bootstrap, sink.topic)
    assert sorted(v for pv in view.values() for v in pv.committed_values) == sorted(
        _vals("ok0") + _vals("ok1") + _vals("ok2"))
    code, _, err = cli(capsys, "fence", "--checkpoint", sink.checkpoint, "--prefix", "x")
    assert code == 2 and "not both" in err
    assert_no_open_transactions(bootstrap, sink.topic)


# -- audit --------------------------------------------------------------------------------------


def test_audit_resolves_markers_and_finds_duplicates(capsys, bootstrap, unique) -> None:
    create_topic(bootstrap, unique, partitions=2)
    base = ["audit", "-b", bootstrap, "--topic", unique, "--from-beginning", "--by", "value"]
    with TxnWriter(bootstrap, f"{unique}-w") as w:
        w.committed(unique, [b"a", b"b", b"c"], partition=0)
        w.aborted(unique, [b"x"], partition=0)
        w.committed(unique, [b"a"], partition=1)  # a duplicate, in another partition
        write_plain(bootstrap, unique, [b"plain"], partition=1)
        w.begin_open(unique, [b"pending", b"pending2"], partition=0)
        code, doc = cli_json(capsys, *base)
        assert code == 1 and not doc["ok"]
        p0, p1 = doc["partitions"]
        assert (p0["committed"], p0["aborted"], p0["open"]) == (3, 1, 2)
        assert (p1["committed"], p1["non_transactional"], p1["duplicates"]) == (2, 1, 1)
        assert len(p0["open_transactions"]) == 1
        assert p0["open_transactions"][0]["producer_id"] == w.producer_id
        assert doc["totals"]["aborted_visible_to_read_uncommitted"] == 1
        assert doc["duplicates"]["ids"] == 1 and doc["duplicates"]["extra_records"] == 1
        assert doc["duplicates"]["examples"][0]["id"] == "a"
        assert doc["duplicates"]["examples"][0]["at"] == [[0, 0], [1, 0]]
        code, out, _ = cli(capsys, *base)
        assert code == 1 and "open transaction" in out and "PROBLEM" in out
        w.abort_open()
    code, doc = cli_json(capsys, *base)
    assert code == 1 and doc["totals"]["open"] == 0 and doc["totals"]["aborted"] == 3
    # No duplicate by key (every key is null: no id), nothing open: clean.
    code, doc = cli_json(capsys, *base[:-2])
    assert code == 0 and doc["ok"] and doc["totals"]["without_id"] == 5
    assert doc["id"] == {"by": "key", "field": None}


def test_audit_by_json_field_and_key_and_tail(capsys, bootstrap, unique, monkeypatch) -> None:
    create_topic(bootstrap, unique)
    values = [json.dumps({"o": {"id": i % 4}, "n": i}).encode() for i in range(6)]
    keys = [f"k{i}".encode() for i in range(6)]
    with TxnWriter(bootstrap, f"{unique}-w") as w:
        w.committed(unique, values, partition=0, keys=keys)
        w.committed(unique, [b"not json"], partition=0, keys=[b"k0"])
    base = ["audit", "-b", bootstrap, "--topic", unique, "--from-beginning"]
    code, doc = cli_json(capsys, *base, "--id-field", "o.id")
    assert code == 1 and doc["duplicates"]["ids"] == 2 and doc["totals"]["duplicates"] == 2
    assert doc["totals"]["without_id"] == 1 and doc["id"] == {"by": "json", "field": "o.id"}
    code, doc = cli_json(capsys, *base, "--by", "key")
    assert code == 1 and doc["duplicates"]["examples"][0]["id"] == "k0", doc
    code, doc = cli_json(capsys, *base, "--id-field", "n")
    assert code == 0 and doc["totals"]["committed"] == 7
    # Without --from-beginning only the tail is read: the last 3 offsets (marker, k0, marker);
    # the broker comes from $EOSKAFKA_BOOTSTRAP.
    monkeypatch.setenv("EOSKAFKA_BOOTSTRAP", bootstrap)
    code, doc = cli_json(capsys, "audit", "--topic", unique, "--tail", "3")
    part = doc["partitions"][0]
    assert part["start"] == part["high_watermark"] - 3 and doc["from_beginning"] is False
    assert code == 0 and part["committed"] == 1 and doc["tail"] == 3


def test_audit_id_field_in_schemad_payloads_is_found_or_refused(capsys, bootstrap,
                                                                unique) -> None:
    """A JSON Schema payload (Confluent's 5-byte header, then JSON) has its field found;
    Avro payloads, or a field no record has, are refused (exit 2, saying why), never an OK
    with every record counted as having no id."""
    import io

    import fastavro

    header = b"\x00" + (7).to_bytes(4, "big")
    schema = fastavro.parse_schema({"type": "record", "name": "Order",
                                    "fields": [{"name": "id", "type": "long"}]})

    def avro(i: int) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, schema, {"id": i})
        return header + out.getvalue()

    json_topic, avro_topic = f"{unique}-json", f"{unique}-avro"
    for topic in (json_topic, avro_topic):
        create_topic(bootstrap, topic)
    with TxnWriter(bootstrap, f"{unique}-w") as w:
        w.committed(json_topic, [header + json.dumps({"id": i % 2}).encode() for i in range(3)],
                    partition=0)
        w.committed(avro_topic, [avro(i) for i in range(3)], partition=0)
    code, doc = cli_json(capsys, "audit", "-b", bootstrap, "--topic", json_topic,
                         "--from-beginning", "--id-field", "id")
    assert code == 1 and doc["totals"]["without_id"] == 0 and doc["totals"]["duplicates"] == 1
    code, out, err = cli(capsys, "audit", "-b", bootstrap, "--topic", avro_topic,
                         "--from-beginning", "--id-field", "id")
    assert code == 2 and "OK" not in out
    assert "Confluent's wire format (schema id 7)" in err and "--by key" in err, err
    code, out, err = cli(capsys, "audit", "-b", bootstrap, "--topic", json_topic,
                         "--from-beginning", "--id-field", "order_id")
    assert code == 2 and "none of the 3 committed record(s) has it" in err, err


def test_lag_compares_the_checkpoints_offsets_with_the_brokers_lso(
    bootstrap: str, unique: str, tmp_path, capsys
) -> None:
    create_topic(bootstrap, unique, partitions=2)
    write_plain(bootstrap, unique, [b"a", b"b", b"c", b"d"], partition=0)
    offsets = tmp_path / "chk" / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "0").write_text('v1\n{"batchWatermarkMs":0}\n' + json.dumps({unique: {"0": 1}}))
    (offsets / "1").write_text('v1\n{"batchWatermarkMs":0}\n'
                               + json.dumps({unique: {"0": 3, "1": 0}}))
    code = main(["lag", "-b", bootstrap, "--checkpoint", str(tmp_path / "chk"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["batch_id"] == 1
    by_partition = {p["partition"]: p for p in doc["partitions"]}
    assert by_partition[0]["offset"] == 3 and by_partition[0]["lag"] == 1
    assert by_partition[1]["lag"] == 0 and doc["total_lag"] == 1


def test_lag_without_eoskafka_offsets_is_a_usage_error(tmp_path, capsys) -> None:
    (tmp_path / "offsets").mkdir()
    code = main(["lag", "-b", "127.0.0.1:1", "--checkpoint", str(tmp_path)])
    assert code == 2
    assert "no eoskafka source offsets" in capsys.readouterr().err


# -- exit codes for alerting (docs/operations.md "What to alert on") --------------------------


def test_lag_exits_1_above_max_lag(bootstrap: str, unique: str, tmp_path, capsys) -> None:
    create_topic(bootstrap, unique, partitions=1)
    write_plain(bootstrap, unique, [b"a", b"b", b"c"], partition=0)
    offsets = tmp_path / "chk" / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "0").write_text('v1\n{"batchWatermarkMs":0}\n' + json.dumps({unique: {"0": 1}}))
    chk = str(tmp_path / "chk")
    code, doc = cli_json(capsys, "lag", "-b", bootstrap, "--checkpoint", chk, "--max-lag", "2")
    assert code == 0 and doc["ok"] and doc["total_lag"] == 2 and doc["max_lag"] == 2
    code, doc = cli_json(capsys, "lag", "-b", bootstrap, "--checkpoint", chk, "--max-lag", "1")
    assert code == 1 and not doc["ok"]
    code, out, _ = cli(capsys, "lag", "-b", bootstrap, "--checkpoint", chk, "--max-lag", "1")
    assert code == 1 and "PROBLEM: lag 2 is above --max-lag 1" in out
    code, doc = cli_json(capsys, "lag", "-b", bootstrap, "--checkpoint", chk)
    assert code == 0 and doc["ok"] and doc["max_lag"] is None  # no threshold, no alert
    assert cli(capsys, "lag", "-b", bootstrap, "--checkpoint", chk, "--max-lag", "-1")[0] == 2


def test_txns_max_open_age_counts_only_old_open_transactions(
        capsys, bootstrap: str, unique: str) -> None:
    create_topic(bootstrap, unique, partitions=2)
    with TxnWriter(bootstrap, f"{unique}-w") as w:
        w.begin_open(unique, [b"in-flight"], partition=1)
        code, doc = cli_json(capsys, "txns", "-b", bootstrap, "--topic", unique)
        assert code == 1 and doc["open_transactions"] == doc["stale_open_transactions"] == 1
        opened = doc["partitions"][1]["open"][0]
        assert opened["age_s"] >= 0 and opened["first_timestamp_ms"] > 0
        # A running query's young transaction is not an alert...
        code, doc = cli_json(capsys, "txns", "-b", bootstrap, "--topic", unique,
                             "--max-open-age", "3600")
        assert code == 0 and doc["ok"] and doc["open_transactions"] == 1
        assert doc["stale_open_transactions"] == 0
        code, out, _ = cli(capsys, "txns", "-b", bootstrap, "--topic", unique,
                           "--max-open-age", "3600")
        assert code == 0 and "none older than --max-open-age" in out
        # ...one older than the bound is.
        code, doc = cli_json(capsys, "txns", "-b", bootstrap, "--topic", unique,
                             "--max-open-age", "0")
        assert code == 1 and doc["stale_open_transactions"] == 1
        w.commit_open()
    await_markers(bootstrap, unique)  # Kafka writes the COMMIT marker after EndTxn returns
    code, doc = cli_json(capsys, "txns", "-b", bootstrap, "--topic", unique, "--max-open-age", "0")
    assert code == 0 and doc["open_transactions"] == 0


def test_txns_exits_1_on_a_loss_in_the_decision_log(capsys, sink: Sink, bootstrap: str) -> None:
    """A loss the driver recorded (``<batch>.done`` with ``lost``, as ``mark_done`` writes it
    when a replay could not rewrite aborted transactions) makes ``txns`` exit 1."""
    sink.driver.commit(0, [sink.task(0, _vals("b0"))], tasks=1)
    code, doc = cli_json(capsys, "txns", "--checkpoint", sink.checkpoint)
    assert code == 0 and doc["lost_batches"] == []
    described = "transaction t-0 (producer 1, epoch 0) of task 0 attempt 0: 10 records"
    decision = sink.log.get(0)
    assert decision is not None
    sink.log.for_lineage(decision.lineage).mark_done(0, [described], [])
    code, doc = cli_json(capsys, "txns", "--checkpoint", sink.checkpoint)
    assert code == 1 and not doc["ok"] and doc["lost_batches"] == [0]
    assert doc["batches"][0]["lost"] == [described]
    code, out, _ = cli(capsys, "txns", "--checkpoint", sink.checkpoint)
    assert code == 1 and f"batch 0 lost: {described}" in out and "with a loss [0]" in out
    # --lost-within: a loss decided longer ago than the window no longer alerts.
    code, doc = cli_json(capsys, "txns", "--checkpoint", sink.checkpoint, "--lost-within", "0")
    assert code == 0 and doc["lost_batches"] == []
    code, doc = cli_json(capsys, "txns", "--checkpoint", sink.checkpoint,
                         "--lost-within", "3600")
    assert code == 1 and doc["lost_batches"] == [0]


def test_the_alert_script_of_the_operations_page(capsys, sink: Sink, bootstrap: str,
                                                 unique: str) -> None:
    """docs/operations.md "What to alert on": its cron/sidecar block, run as written with
    bash and the installed ``eoskafka``: 0 healthy, 1 lag above the bound, 1 on a loss."""
    from tests import doc_blocks

    script = doc_blocks.block("docs/operations.md",
                              "# eoskafka checks: CHECKPOINT, OUTPUT and EOSKAFKA_BOOTSTRAP "
                              "set by the caller").text
    source = f"{unique}-in"
    create_topic(bootstrap, source, partitions=1)
    write_plain(bootstrap, source, [b"a", b"b"], partition=0)
    offsets = Path(sink.checkpoint) / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "0").write_text('v1\n{"batchWatermarkMs":0}\n' + json.dumps({source: {"0": 2}}))
    sink.driver.commit(0, [sink.task(0, _vals("b0"))], tasks=1)
    env = {**os.environ, "CHECKPOINT": sink.checkpoint, "OUTPUT": sink.topic,
           "EOSKAFKA_BOOTSTRAP": bootstrap,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}

    def run(**extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", script], env={**env, **extra}, text=True,
                              capture_output=True, timeout=300, check=False)

    healthy = run()
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert "OK" in healthy.stdout and "Traceback" not in healthy.stderr
    write_plain(bootstrap, source, [b"c", b"d", b"e"], partition=0)  # the query fell behind
    behind = run(MAX_LAG="2")
    assert behind.returncode == 1 and "above --max-lag 2" in behind.stdout
    assert run().returncode == 0  # 3 behind is within the default bound
    decision = sink.log.get(0)
    assert decision is not None
    sink.log.for_lineage(decision.lineage).mark_done(0, ["a lost transaction"], [])
    lost = run()
    assert lost.returncode == 1 and "batch 0 lost: a lost transaction" in lost.stdout
