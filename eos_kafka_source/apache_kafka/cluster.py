"""One Apache Kafka node, or three, in KRaft mode on loopback (no ZooKeeper, no Docker).

Every node is a combined broker and controller (``process.roles=broker,controller``)
with a static quorum, formatted with ``kafka.tools.StorageTool`` and started as
``java -cp 'JARS/*' kafka.Kafka server.properties``. A cluster of three replicates
everything three ways with ``min.insync.replicas=2``, the transaction log included.

Each node's output goes to ``<workdir>/node-<id>/server.log``; the data folders are
removed on a clean stop, the logs are kept (their path is in every error).
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import os
import shutil
import socket
import subprocess
import tempfile
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from ..errors import BrokerUnreachableError
from ..processes import stop_process, wait_listening
from .jars import LEAN_JVM_OPTIONS, classpath, require_java, resolve_version

_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
"""
_LOG4J1 = """\
log4j.rootLogger=INFO, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.org.apache.kafka.clients=WARN
"""

_HEAP = ("-Xms256m", "-Xmx1g")
_SERVER_GC = ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20")

_live: weakref.WeakSet[KafkaCluster] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:  # never leave a JVM behind when the interpreter exits
    for cluster in list(_live):
        cluster.stop()


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports. Held open together while chosen: one at a
    time, the OS may hand the same port out twice (Kafka then refuses two listeners on
    one port)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def properties_line(key: str, value: str) -> str:
    """``key=value`` as Java's ``Properties.load`` reads it back unchanged.

    Kafka loads ``server.properties`` as ISO-8859-1 and treats ``\\`` as an escape, so a
    JAAS line with a non-ASCII or backslashed password (or a multi-line PEM) must be
    escaped, else the broker sees other characters than the client sends.
    """

    def escape(text: str, specials: str) -> str:
        out = []
        for ch in text:
            if ch in "\\" + specials:
                out.append("\\" + ch)
            elif ch in "\n\r\t\f":
                out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}[ch])
            elif not 32 <= ord(ch) < 127:
                units = ch.encode("utf-16-be")  # one \uXXXX per UTF-16 unit
                out += [f"\\u{units[i] << 8 | units[i + 1]:04x}" for i in range(0, len(units), 2)]
            else:
                out.append(ch)
        return "".join(out)

    value = escape(value, "")
    if value.startswith(" "):  # load() drops leading blanks
        value = "\\" + value
    return f"{escape(key, '=: #!')}={value}\n"


def scram_argument(mechanism: str, user: str, password: str) -> str:
    """StorageTool's ``--add-scram`` value for ``user``, given as salt and salted password
    (PBKDF2, as Kafka's ScramFormatter computes it), so the password itself is on no
    command line (``ps`` shows those) and needs no escaping."""
    if mechanism not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}")
    if any(c in user for c in ',="[]'):
        raise ValueError(f"a SCRAM user name for StorageTool has no ',=\"[]': {user!r}")
    salt, iterations = os.urandom(16), 4096
    salted = hashlib.pbkdf2_hmac("sha" + mechanism[-3:], password.encode(), salt, iterations)
    return (f"{mechanism}=[name={user},salt=\"{base64.b64encode(salt).decode()}\","
            f"saltedpassword=\"{base64.b64encode(salted).decode()}\",iterations={iterations}]")


def new_cluster_id() -> str:
    """22 characters of URL-safe base64 of 16 random bytes, as ``kafka-storage random-uuid``;
    never starting with ``-`` (the storage tool would read it as an option; Kafka's own
    ``Uuid.randomUuid`` avoids that too)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


@dataclass(frozen=True)
class ListenerSpec:
    """An extra client listener: ``name`` (e.g. ``SASL_SSL``), its security protocol, and
    ``listener.name.<name>.*`` settings given without that prefix."""

    name: str
    protocol: str
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass
class _Node:
    node_id: int
    port: int
    controller_port: int
    extra_ports: dict[str, int]
    home: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.home / "server.log"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class KafkaCluster:
    """Apache Kafka ``version`` (a pinned 4.4.x, 4.3.x or 3.9.x) with ``nodes`` (1, 3 or 5)
    nodes.

    ``broker_config`` overrides or adds ``server.properties`` settings on every node;
    ``listeners`` adds client listeners (SASL, TLS) beside the PLAINTEXT one;
    ``scram_users`` (mechanism, user, password) are created at format time;
    ``system_properties`` are given to each node's JVM as ``-Dkey=value`` (Kafka 4.x reads
    a few only there, e.g. ``org.apache.kafka.sasl.oauthbearer.allowed.urls``, the URLs an
    OAUTHBEARER listener may fetch its JWKS from);
    ``lean_jvm`` runs each node on LEAN_JVM_OPTIONS (C1 only, the serial collector): about
    half the CPU under a test's light load, less peak throughput (never for a benchmark).
    """

    def __init__(
        self,
        *,
        nodes: int = 1,
        version: str | None = None,
        broker_config: Mapping[str, str] | None = None,
        listeners: Sequence[ListenerSpec] = (),
        scram_users: Sequence[tuple[str, str, str]] = (),
        workdir: str | None = None,
        ready_timeout_s: float = 90.0,
        system_properties: Mapping[str, str] | None = None,
        lean_jvm: bool = False,
    ) -> None:
        if nodes not in (1, 3, 5):
            raise ValueError("a KafkaCluster has 1, 3 or 5 nodes (every node a controller)")
        self.version = resolve_version(version)
        self.broker_config = dict(broker_config or {})
        self.listeners = tuple(listeners)
        self.scram_users = tuple(scram_users)
        self.system_properties = dict(system_properties or {})
        self.ready_timeout_s = ready_timeout_s
        self.lean_jvm = lean_jvm
        self.cluster_id = new_cluster_id()
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=f"eoskafka-kafka-{self.version}-"))
        ports = iter(free_ports(nodes * (2 + len(self.listeners))))
        self.nodes = [
            _Node(node_id=i + 1, port=next(ports), controller_port=next(ports),
                  extra_ports={spec.name: next(ports) for spec in self.listeners},
                  home=self.workdir / f"node-{i + 1}")
            for i in range(nodes)
        ]
        self._formatted = False

    # -- addresses -----------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def listener_bootstrap(self, name: str) -> str:
        """Bootstrap servers of the extra listener ``name``."""
        return ",".join(f"127.0.0.1:{n.extra_ports[name]}" for n in self.nodes)

    def node_for_port(self, port: int) -> int:
        for n in self.nodes:
            if port == n.port or port in n.extra_ports.values():
                return n.node_id
        raise KeyError(port)

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    # -- configuration -------------------------------------------------------------------------

    def _properties(self, node: _Node) -> dict[str, str]:
        replicas = len(self.nodes)
        isr = 1 if replicas == 1 else 2
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        names = ["PLAINTEXT", "CONTROLLER", *(s.name for s in self.listeners)]
        protocols = ["PLAINTEXT", "PLAINTEXT", *(s.protocol for s in self.listeners)]
        listen = [f"PLAINTEXT://127.0.0.1:{node.port}",
                  f"CONTROLLER://127.0.0.1:{node.controller_port}",
                  *(f"{s.name}://127.0.0.1:{node.extra_ports[s.name]}" for s in self.listeners)]
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listeners": ",".join(listen),
            "advertised.listeners": ",".join(u for u in listen if "CONTROLLER" not in u),
            "listener.security.protocol.map": ",".join(
                f"{n}:{p}" for n, p in zip(names, protocols, strict=True)),
            "log.dirs": str(node.home / "data"),
            "num.partitions": "1",
            "default.replication.factor": str(replicas),
            "min.insync.replicas": str(isr),
            "offsets.topic.replication.factor": str(replicas),
            "offsets.topic.num.partitions": "10",
            "transaction.state.log.replication.factor": str(replicas),
            "transaction.state.log.min.isr": str(isr),
            "transaction.state.log.num.partitions": "10",
            "share.coordinator.state.topic.replication.factor": str(replicas),
            "share.coordinator.state.topic.min.isr": str(isr),
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            # How often the coordinator looks for timed-out transactions (default 10 s).
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
            "log.retention.check.interval.ms": "1000",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "message.max.bytes": "1048588",
        }
        for spec in self.listeners:
            prefix = f"listener.name.{spec.name.lower()}."
            props.update({prefix + k: v for k, v in spec.config.items()})
        props.update(self.broker_config)
        return props

    def _write_config(self, node: _Node) -> Path:
        node.home.mkdir(parents=True, exist_ok=True)
        path = node.home / "server.properties"
        path.write_text("".join(properties_line(k, v) for k, v in self._properties(node).items()),
                        encoding="ascii")
        log_config = node.home / ("log4j2.properties" if self.major >= 4 else "log4j.properties")
        log_config.write_text(_LOG4J2 if self.major >= 4 else _LOG4J1)
        return path

    def _java(self, node: _Node, main: str, *args: str, lean: bool) -> list[str]:
        log_flag = ("-Dlog4j2.configurationFile=" if self.major >= 4
                    else "-Dlog4j.configuration=file:")
        log_file = node.home / ("log4j2.properties" if self.major >= 4 else "log4j.properties")
        props = [f"-D{k}={v}" for k, v in self.system_properties.items()]
        jit_and_gc = LEAN_JVM_OPTIONS if lean else _SERVER_GC
        return [require_java(), *_HEAP, *jit_and_gc, "-Djava.awt.headless=true", *props,
                f"{log_flag}{log_file}",
                "-cp", classpath(self.version), main, *args]

    def _format(self, node: _Node) -> None:
        config = self._write_config(node)
        scram = [arg for mech, user, password in self.scram_users
                 for arg in ("--add-scram", scram_argument(mech, user, password))]
        done = subprocess.run(
            self._java(node, "kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                       "-c", str(config), "--ignore-formatted", *scram, lean=True),
            capture_output=True, text=True, timeout=120,
        )
        if done.returncode != 0:
            raise BrokerUnreachableError(
                f"formatting Kafka node {node.node_id} failed (exit {done.returncode}): "
                f"{(done.stdout + done.stderr).strip()[-2000:]}"
            )

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> KafkaCluster:
        if not self._formatted:
            with ThreadPoolExecutor(len(self.nodes)) as pool:  # one JVM start each: in parallel
                list(pool.map(self._format, self.nodes))
            self._formatted = True
        for node in self.nodes:
            self._spawn(node)
        _live.add(self)
        try:
            for node in self.nodes:
                self._wait_ready(node)
        except BaseException:  # ``with`` never reaches __exit__: stop what was started here
            self.stop(keep_data=True)
            raise
        return self

    def _spawn(self, node: _Node) -> None:
        if node.running:
            return
        config = node.home / "server.properties"
        with open(node.log_path, "ab") as log:
            node.proc = subprocess.Popen(
                self._java(node, "kafka.Kafka", str(config), lean=self.lean_jvm),
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )

    def _wait_ready(self, node: _Node) -> None:
        """Ready when the client listener accepts: KRaft brokers open it once unfenced."""
        wait_listening(node.proc, node.port, name=f"Kafka node {node.node_id}",
                       log=node.log_path, timeout_s=self.ready_timeout_s, poll_s=0.1)

    def node(self, node_id: int) -> _Node:
        return self.nodes[node_id - 1]

    def stop_node(self, node_id: int, *, kill: bool = False) -> None:
        """Stop one node: SIGTERM and wait for a controlled shutdown (``kill``: SIGKILL)."""
        node = self.node(node_id)
        proc, node.proc = node.proc, None
        stop_process(proc, kill=kill, grace_s=60)

    def start_node(self, node_id: int) -> None:
        node = self.node(node_id)
        self._spawn(node)
        self._wait_ready(node)

    def restart_node(self, node_id: int, *, kill: bool = False) -> None:
        self.stop_node(node_id, kill=kill)
        self.start_node(node_id)

    def stop(self, *, keep_data: bool = False) -> None:
        """Stop every node; remove the data folders (the logs stay) unless ``keep_data``."""
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.proc.terminate()
        for node in self.nodes:
            self.stop_node(node.node_id)
        _live.discard(self)
        if not keep_data:
            for node in self.nodes:
                shutil.rmtree(node.home / "data", ignore_errors=True)

    @property
    def log_paths(self) -> list[Path]:
        return [n.log_path for n in self.nodes]

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop(keep_data=exc is not None)
