"""``eoskafka broker``: run the embedded development broker (Tansu) in the foreground.

Prints the bootstrap address on stdout once the broker accepts connections (with
``--json``: one line ``{"version": 1, "bootstrap_servers", "port", "storage", "log"}``),
then waits; Ctrl-C (SIGINT) or SIGTERM stops the broker and exits 0. Exit 2 when
it cannot start or dies on its own.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import threading
from typing import Any

from ..broker import EmbeddedBroker
from . import _common as c

HELP = "run the embedded Kafka-compatible broker (Tansu) for development"
EPILOG = """\
examples:
  eoskafka broker                          # a free port, in-memory storage
  eoskafka broker --port 9092
  AWS_ENDPOINT=http://127.0.0.1:5000 AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x \\
    AWS_REGION=us-east-1 AWS_ALLOW_HTTP=true eoskafka broker --storage s3://tansu/

The broker listens on 127.0.0.1 only. memory:// storage is lost when it stops;
s3:// keeps records, open transactions and offsets across restarts. Tansu is a
development broker: it never times transactions out and leaves Fetch's
aborted-transactions list empty (see the README). Stop it with Ctrl-C.

exit status: 0 stopped by a signal, 2 could not start or died
"""

#: How often the foreground loop checks that the broker process is still alive.
_CHECK_S = 0.5


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("broker", help=HELP, description=HELP + ".", epilog=EPILOG,
                              parents=parents, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", "-p", type=int, default=None,
                   help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--storage", default="memory://tansu/", metavar="URL",
                   help="Tansu storage engine: memory://tansu/ (default) or s3://BUCKET/")
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
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, lambda *_: stop.set())
    broker = EmbeddedBroker(port=args.port, storage=args.storage)
    try:
        broker.start()
        if args.json:
            sys.stdout.write(json.dumps({
                "version": c.JSON_VERSION, "bootstrap_servers": broker.bootstrap_servers,
                "port": broker.port, "storage": broker.storage, "log": broker.log_path}) + "\n")
        else:
            sys.stdout.write(broker.bootstrap_servers + "\n")
        sys.stdout.flush()
        sys.stderr.write(f"eoskafka: broker on {broker.bootstrap_servers} (storage "
                         f"{broker.storage}, log {broker.log_path}); Ctrl-C stops it\n")
        sys.stderr.flush()
        while not stop.wait(_CHECK_S):
            if not broker.running:
                sys.stderr.write(f"eoskafka: error: the broker exited on its own; see its log "
                                 f"at {broker.log_path}\n")
                return c.EXIT_ERROR
        sys.stderr.write("eoskafka: stopping the broker\n")
        return c.EXIT_OK
    finally:
        broker.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
