"""The ``eoskafka`` operator command line.

Commands (``eoskafka COMMAND --help`` shows examples for each):

- ``broker``  run the embedded development broker in the foreground;
- ``registry`` run a schema registry for development (Apicurio Registry) in the foreground;
- ``txns``    a sink's decision log, id pool and the open transactions on its topics;
- ``fence``   (alias ``abort``) close lingering transactions of a transactional-id prefix;
- ``audit``   a topic's committed view resolved from markers: counts and duplicates;
- ``lag``     how far a streaming query's source is behind the last stable offset;
- ``migrate`` the startingOffsets that let an eoskafka query take over from a ``kafka`` one.

``eoskafka --version`` prints the installed version. Every command but ``broker`` takes
``--bootstrap-server`` (or ``$EOSKAFKA_BOOTSTRAP``) and ``--config kafka.KEY=VALUE``
(repeatable: security and other client settings, never echoed); every one takes
``--json`` (one JSON document on stdout; fields are listed in
each command's module docstring). Exit codes: 0 ok, 1 a problem was found (open
transactions, undone batches, duplicates, a refused fence), 2 usage or
connection error, reported as ``eoskafka: error: <message>`` without a traceback.

>>> main(["fence", "--prefix", "p", "--pool-size", "2", "--dry-run"])  # doctest: +SKIP
0
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from .._version import __version__
from ..errors import EosKafkaError
from . import _common as c
from . import audit, broker, fence, lag, migrate, registry, txns

__all__ = ["main"]

_COMMANDS = (broker, registry, txns, fence, audit, lag, migrate)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eoskafka",
        description="Operate eoskafka, the exactly-once Kafka source and sink for Spark "
                    "Structured Streaming.",
        epilog="examples:\n"
               "  eoskafka broker --port 9092\n"
               "  eoskafka txns --checkpoint /chk/orders -b localhost:9092\n"
               "  eoskafka fence --checkpoint /chk/orders --dry-run   # the ids it would fence\n"
               "  eoskafka audit -b localhost:9092 --topic orders --from-beginning\n"
               "  eoskafka lag -b localhost:9092 --checkpoint /chk/orders --max-lag 100000\n"
               "  eoskafka migrate --checkpoint /chk/orders-on-spark-kafka -b localhost:9092\n\n"
               "exit status: 0 ok, 1 problem found, 2 usage or connection error",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"eoskafka {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    parents = [c.common_options()]
    for command in _COMMANDS:
        command.add_parser(subparsers, parents)
    return parser


@contextmanager
def _logging(verbose: int) -> Iterator[None]:
    """-v: our INFO logs on stderr; -vv: DEBUG, kafka-python's too. Without -v, kafka-python's
    reconnect chatter is muted (our errors say what failed). Restored on exit."""
    ours, theirs = logging.getLogger("eos_kafka_source"), logging.getLogger("kafka")
    saved = [(lg, lg.level) for lg in (ours, theirs)]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    if verbose:
        ours.addHandler(handler)
        ours.setLevel(logging.DEBUG if verbose > 1 else logging.INFO)
    if verbose > 1:
        theirs.addHandler(handler)
        theirs.setLevel(logging.DEBUG)
    else:
        theirs.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in saved:
            lg.removeHandler(handler)
            lg.setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (never raises for expected errors)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed by argparse
        return exc.code if isinstance(exc.code, int) else c.EXIT_ERROR
    try:
        with _logging(args.verbose):
            return int(args.run(args))
    except EosKafkaError as exc:
        sys.stdout.flush()
        if getattr(args, "json", False):
            c.emit_json({"error": {"condition": exc.condition, "message": exc.message}})
        sys.stderr.write(f"eoskafka: error: {exc}\n")
        return c.EXIT_ERROR
    except KeyboardInterrupt:
        sys.stderr.write("eoskafka: interrupted\n")
        return 130
    except BrokenPipeError:  # `eoskafka txns | head`
        return c.EXIT_OK
