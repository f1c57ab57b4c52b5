"""``eoskafka broker``: run a local broker in the foreground, Tansu or (``--kafka``) Apache Kafka.

Prints the bootstrap address on stdout once the broker accepts connections (with
``--json``: one line ``{"version": 1, "bootstrap_servers", "port", "storage", "log",
"nodes": [{"node_id", "port", "pid", "log"}]}``), and each node's port and process id on
stderr, then waits; Ctrl-C (SIGINT) or SIGTERM stops the broker and exits 0. Exit 2 when
it cannot start or dies on its own.

A cluster of several nodes (``--kafka --nodes 3``) outlives one node's death, for broker-kill
drills: a node that exits is reported (and the cluster runs on), SIGHUP restarts every node
that is down (``kill -HUP <pid of eoskafka>``), on its own port and data; only when every
node is down does the command exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
from typing import TYPE_CHECKING, Any

from ..broker import EmbeddedBroker
from ..errors import EosKafkaError

if TYPE_CHECKING:
    from ..apache_kafka import KafkaCluster
from . import _common as c

HELP = "run a local broker: the embedded Tansu (default) or Apache Kafka (--kafka)"
EPILOG = """\
examples:
  eoskafka broker                          # a free port, in-memory storage
  eoskafka broker --port 9092
  AWS_ENDPOINT=http://127.0.0.1:5000 AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x \\
    AWS_REGION=us-east-1 AWS_ALLOW_HTTP=true eoskafka broker --storage s3://tansu/

With --nodes 3, a node that dies (kill -9 its pid, printed at start) is reported and the
other two run on; `kill -HUP <pid of this command>` restarts the nodes that are down.

The broker listens on 127.0.0.1 only. memory:// storage is lost when it stops;
s3:// keeps records, open transactions and offsets across restarts. Tansu is a
development broker: it never times transactions out and leaves Fetch's
aborted-transactions list empty (see docs/compatibility.md). --kafka runs Apache Kafka
itself as local JVM processes (needs Java 17; its jars are fetched from Maven
Central with mvn once and cached in ~/.cache/eoskafka). Stop it with Ctrl-C.

exit status: 0 stopped by a signal, 2 could not start or died
"""

#: How often the foreground loop checks that the broker process is still alive.
_CHECK_S = 0.5


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """``parents`` (the connection options) are left out: this command starts a broker."""
    p = subparsers.add_parser("broker", help=HELP, description=HELP + ".", epilog=EPILOG,
                              parents=[c.common_options(connection=False)],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", "-p", type=int, default=None,
                   help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--storage", default="memory://tansu/", metavar="URL",
                   help="Tansu storage engine: memory://tansu/ (default) or s3://BUCKET/")
    p.add_argument("--kafka", action="store_true",
                   help="run Apache Kafka (KRaft, JVM) instead of Tansu")
    p.add_argument("--nodes", type=int, choices=(1, 3), default=1,
                   help="with --kafka: 1 node, or 3 (replication 3, min.insync.replicas 2)")
    p.add_argument("--kafka-version", choices=("4.4", "4.3", "3.9"), default="4.4",
                   help="with --kafka: 4.4 (default, the reference), 4.3, or 3.9 (classic "
                        "transaction protocol)")
    p.set_defaults(run=run)


def _port_taken(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def run(args: argparse.Namespace, stop: threading.Event | None = None) -> int:
    """Run until SIGINT/SIGTERM (or ``stop`` is set: for callers in another thread)."""
    if args.port is not None and not 0 < args.port < 65536:
        raise c.UsageError(f"--port {args.port} is not a port number (1-65535)")
    if args.port is not None and _port_taken(args.port):
        raise c.UsageError(f"port {args.port} on 127.0.0.1 is already in use; pick another "
                           "or leave --port out for a free one")
    stop = stop or threading.Event()
    restart = threading.Event()
    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, lambda *_: stop.set())
        previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, lambda *_: restart.set())
    broker = _make(args)
    try:
        broker.start()
        log = _log_of(broker)
        if args.json:
            sys.stdout.write(json.dumps({
                "version": c.JSON_VERSION, "bootstrap_servers": broker.bootstrap_servers,
                "port": _port_of(broker), "storage": _storage_of(broker), "log": log,
                "nodes": _nodes(broker)}) + "\n")
        else:
            sys.stdout.write(broker.bootstrap_servers + "\n")
        sys.stdout.flush()
        sys.stderr.write(f"eoskafka: {_name_of(broker)} on {broker.bootstrap_servers} (storage "
                         f"{_storage_of(broker)}, log {log}); Ctrl-C stops it\n")
        if _cluster(broker):
            for node in _nodes(broker):
                sys.stderr.write(f"eoskafka: node {node['node_id']} on 127.0.0.1:{node['port']}"
                                 f" (pid {node['pid']}, log {node['log']})\n")
            sys.stderr.write(f"eoskafka: a node that dies is reported and the others run on; "
                             f"kill -HUP {os.getpid()} restarts the nodes that are down\n")
        sys.stderr.flush()
        down: set[int] = set()
        while not stop.wait(_CHECK_S):
            if isinstance(broker, EmbeddedBroker) or not _cluster(broker):
                if not _alive(broker):
                    sys.stderr.write(f"eoskafka: error: the broker exited on its own; see its "
                                     f"log at {_log_of(broker)}\n")
                    return c.EXIT_ERROR
                continue
            if restart.is_set():
                restart.clear()
                _restart_down(broker, down)
            if _watch_nodes(broker, down):
                return c.EXIT_ERROR
        sys.stderr.write("eoskafka: stopping the broker\n")
        return c.EXIT_OK
    finally:
        broker.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _make(args: argparse.Namespace) -> EmbeddedBroker | KafkaCluster:
    if not args.kafka:
        if args.nodes != 1 or args.kafka_version != "4.4":
            raise c.UsageError("--nodes and --kafka-version need --kafka (Tansu is one node)")
        return EmbeddedBroker(port=args.port, storage=args.storage)
    if args.storage != "memory://tansu/":
        raise c.UsageError("--storage is Tansu's; Apache Kafka keeps its log in a temporary "
                           "folder (printed) that is removed when it stops")
    if args.port is not None and args.nodes != 1:
        raise c.UsageError("--port works with one node; leave it out with --nodes 3")
    from ..apache_kafka import KafkaCluster

    cluster = KafkaCluster(nodes=args.nodes, version=args.kafka_version)
    if args.port is not None:
        cluster.nodes[0].port = args.port
    return cluster


def _cluster(broker: EmbeddedBroker | KafkaCluster) -> bool:
    return not isinstance(broker, EmbeddedBroker) and len(broker.nodes) > 1


def _nodes(broker: EmbeddedBroker | KafkaCluster) -> list[dict[str, Any]]:
    """Each Apache Kafka node's id, client port, process id and log (Tansu: its one node,
    no pid)."""
    if isinstance(broker, EmbeddedBroker):
        return [{"node_id": 1, "port": broker.port, "pid": None, "log": broker.log_path}]
    return [{"node_id": n.node_id, "port": n.port, "pid": n.proc.pid if n.proc else None,
             "log": str(n.log_path)} for n in broker.nodes]


def _watch_nodes(broker: KafkaCluster, down: set[int]) -> bool:
    """Report each node newly down (``down`` is updated); True when every node is down."""
    for node in broker.nodes:
        if node.node_id in down or node.running:
            continue
        down.add(node.node_id)
        code = node.proc.returncode if node.proc else None
        sys.stderr.write(f"eoskafka: node {node.node_id} (127.0.0.1:{node.port}) exited "
                         f"(status {code}); {len(broker.nodes) - len(down)} of "
                         f"{len(broker.nodes)} nodes run on; kill -HUP {os.getpid()} restarts "
                         f"it (log {node.log_path})\n")
        sys.stderr.flush()
    if len(down) == len(broker.nodes):
        sys.stderr.write(f"eoskafka: error: every node has exited; see their logs at "
                         f"{_log_of(broker)}\n")
        return True
    return False


def _restart_down(broker: KafkaCluster, down: set[int]) -> None:
    """Start each node that is down again, on its own port and data; wait until it listens."""
    for node_id in sorted(down):
        node = broker.node(node_id)
        sys.stderr.write(f"eoskafka: restarting node {node_id} on 127.0.0.1:{node.port}\n")
        sys.stderr.flush()
        try:
            broker.start_node(node_id)
        except EosKafkaError as exc:
            sys.stderr.write(f"eoskafka: node {node_id} did not come back: {exc}\n")
            continue
        down.discard(node_id)
        pid = node.proc.pid if node.proc else None
        sys.stderr.write(f"eoskafka: node {node_id} is back on 127.0.0.1:{node.port} "
                         f"(pid {pid})\n")
        sys.stderr.flush()


def _alive(broker: EmbeddedBroker | KafkaCluster) -> bool:
    if isinstance(broker, EmbeddedBroker):
        return broker.running
    return all(n.running for n in broker.nodes)


def _log_of(broker: EmbeddedBroker | KafkaCluster) -> str:
    if isinstance(broker, EmbeddedBroker):
        return broker.log_path
    return ",".join(str(p) for p in broker.log_paths)


def _port_of(broker: EmbeddedBroker | KafkaCluster) -> int:
    return broker.port if isinstance(broker, EmbeddedBroker) else broker.nodes[0].port


def _storage_of(broker: EmbeddedBroker | KafkaCluster) -> str:
    if isinstance(broker, EmbeddedBroker):
        return broker.storage
    return f"kafka-{broker.version} log.dirs under {broker.workdir}"


def _name_of(broker: EmbeddedBroker | KafkaCluster) -> str:
    if isinstance(broker, EmbeddedBroker):
        return "Tansu broker"
    return f"Apache Kafka {broker.version} ({len(broker.nodes)} node(s))"
