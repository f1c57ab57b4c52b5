"""``eoskafka registry``: run a schema registry for development in the foreground.

Apicurio Registry (eos_kafka_source/apicurio.py), serving Confluent's REST API: fetched
from Maven Central with ``mvn`` once into ``~/.cache/eoskafka``, run on Java 21 or newer,
bound to 127.0.0.1, schemas kept in memory, compatibility BACKWARD (Confluent's default).

Prints the URL to give ``schema.registry.url`` on stdout once it answers, then waits;
Ctrl-C (SIGINT) or SIGTERM stops the registry's JVM and exits 0.
With ``--json``: one line ``{"version": 1, "url", "port", "pid", "log"}``.
Exit 2 when it cannot start or dies on its own.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import threading
from typing import Any

from ..apicurio import MIN_JAVA, VERSION, ApicurioRegistry
from . import _common as c

HELP = "run a schema registry for development (Apicurio Registry, Confluent's API)"
EPILOG = f"""\
examples:
  eoskafka registry                        # a free port
  eoskafka registry --port 8081            # then schema.registry.url=http://127.0.0.1:8081/apis/ccompat/v7

Apicurio Registry {VERSION} serves Confluent's REST API at /apis/ccompat/v7 on 127.0.0.1.
It needs Java {MIN_JAVA} or newer (JAVA_HOME, PATH or /usr/lib/jvm) and is fetched from
Maven Central with mvn once (cached in ~/.cache/eoskafka). Schemas are kept in memory: they
are lost when it stops. Its compatibility level is BACKWARD, Confluent's default. Stop it
with Ctrl-C: the JVM stops with it.

exit status: 0 stopped by a signal, 2 could not start or died
"""

_CHECK_S = 0.5


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("registry", help=HELP, description=HELP + ".", epilog=EPILOG,
                              parents=[c.common_options(connection=False)],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", "-p", type=int, default=None,
                   help="port on 127.0.0.1 (default: a free one)")
    p.set_defaults(run=run)


def _check_port(port: int | None) -> None:
    if port is None:
        return
    if not 0 < port < 65536:
        raise c.UsageError(f"--port {port} is not a port number (1-65535)")
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            raise c.UsageError(f"port {port} on 127.0.0.1 is already in use; pick another "
                               "or leave --port out for a free one") from None


def run(args: argparse.Namespace, stop: threading.Event | None = None) -> int:
    """Run until SIGINT/SIGTERM (or ``stop`` is set: for callers in another thread)."""
    _check_port(args.port)
    stop = stop or threading.Event()
    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, lambda *_: stop.set())
    registry: ApicurioRegistry | None = None
    try:
        sys.stderr.write(f"eoskafka: starting Apicurio Registry {VERSION} (fetched from Maven "
                         "Central once; the first start takes a minute)\n")
        sys.stderr.flush()
        registry = ApicurioRegistry(port=args.port, die_with_parent=True)
        registry.start()
        if args.json:
            sys.stdout.write(json.dumps({
                "version": c.JSON_VERSION, "url": registry.url, "port": registry.port,
                "pid": registry.pid, "log": str(registry.log_path)}) + "\n")
        else:
            sys.stdout.write(registry.url + "\n")
        sys.stdout.flush()
        sys.stderr.write(f"eoskafka: Apicurio Registry {VERSION} on {registry.url} (ready in "
                         f"{registry.started_in_s:.1f} s, log {registry.log_path}); Ctrl-C "
                         "stops it\n")
        sys.stderr.flush()
        while not stop.wait(_CHECK_S):
            if not registry.running:
                sys.stderr.write(f"eoskafka: error: the registry exited on its own; see its "
                                 f"log at {registry.log_path}\n")
                return c.EXIT_ERROR
        sys.stderr.write("eoskafka: stopping the registry\n")
        return c.EXIT_OK
    finally:
        if registry is not None:
            registry.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
