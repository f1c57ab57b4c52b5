"""What every command shares: connection options, output, exit codes, the decision log.

Runs on: the operator's machine (the ``eoskafka`` command). Secrets given with
``--config`` reach only :class:`~eos_kafka_source.client.config.ClientConfig`
(whose repr hides them); nothing here prints an option's value.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TextIO, overload

from ..client.config import ClientConfig
from ..errors import EosKafkaError

if TYPE_CHECKING:
    from ..sink.decisions.log import DecisionLog
    from ..wire import KafkaWire

#: Exit codes of every command; EXIT_INCOMPLETE: nothing found, but some of what the command
#: checks could not be asked (a broker down), and is named.
EXIT_OK, EXIT_PROBLEM, EXIT_ERROR, EXIT_INCOMPLETE = 0, 1, 2, 3
#: Version of the ``--json`` documents; bumped only when a field changes meaning or goes away.
JSON_VERSION = 1
ENV_BOOTSTRAP = "EOSKAFKA_BOOTSTRAP"


class UsageError(EosKafkaError):
    """The command line is incomplete or contradicts itself (exit code 2)."""

    condition = "EOSKAFKA_USAGE"


def common_options(*, connection: bool = True) -> argparse.ArgumentParser:
    """The options every subcommand takes (a parent parser); ``connection=False`` leaves out
    ``--bootstrap-server`` and ``--config``, which mean nothing to a command that starts a
    broker rather than connecting to one."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("connection and output" if connection else "output")
    if connection:
        group.add_argument(
            "--bootstrap-server", "-b", metavar="HOST:PORT",
            default=os.environ.get(ENV_BOOTSTRAP) or None,
            help=f"Kafka brokers to connect to (default: ${ENV_BOOTSTRAP})",
        )
        group.add_argument(
            "--config", "-c", metavar="KEY=VALUE", action="append", default=[],
            help="a kafka.* client setting, repeatable, e.g. kafka.security.protocol=SASL_SSL "
                 "(the 'kafka.' prefix may be left out; values are never printed)",
        )
    group.add_argument("--json", action="store_true",
                       help="print one machine-readable JSON document on stdout")
    group.add_argument("--verbose", "-v", action="count", default=0,
                       help="log progress to stderr (-vv: debug)")
    return parent


@overload
def client_config(args: argparse.Namespace) -> ClientConfig: ...
@overload
def client_config(args: argparse.Namespace, *, required: Literal[True]) -> ClientConfig: ...
@overload
def client_config(args: argparse.Namespace, *, required: bool) -> ClientConfig | None: ...
def client_config(args: argparse.Namespace, *, required: bool = True) -> ClientConfig | None:
    """The ClientConfig from ``--bootstrap-server`` and ``--config``; None if not given and not
    ``required``. Errors name option keys, never values."""
    options: dict[str, str] = {}
    for number, item in enumerate(args.config, 1):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--config #{number} is not KEY=VALUE (value not shown)")
        if not key.lower().startswith("kafka."):
            key = "kafka." + key
        if key.lower() in options:
            raise UsageError(f"--config sets {key} twice; keep one")
        options[key.lower()] = value
    from_config = options.pop("kafka.bootstrap.servers", None)
    bootstrap = args.bootstrap_server or from_config
    if args.bootstrap_server and from_config and from_config != args.bootstrap_server:
        raise UsageError("--bootstrap-server and --config kafka.bootstrap.servers differ; "
                         "give one")
    if not bootstrap:
        if required:
            raise UsageError(f"no broker given: pass --bootstrap-server HOST:PORT or set "
                             f"${ENV_BOOTSTRAP}")
        return None
    return ClientConfig.from_options({**options, "kafka.bootstrap.servers": bootstrap})


@contextmanager
def connect(config: ClientConfig) -> Iterator[KafkaWire]:
    from ..wire import KafkaWire

    wire = KafkaWire(config)
    try:
        yield wire
    finally:
        wire.close()


def open_decision_log(location: str) -> DecisionLog:
    """The decision log a sink keeps under ``<location>/eoskafka``, opened read-only.

    ``location`` is the query's checkpointLocation (or decisionLogLocation), a path or
    a URI pyarrow understands; the ``eoskafka`` directory itself is accepted too.
    Refuses a location without a log rather than creating one.
    """
    import pyarrow.fs as pafs

    from ..sink.decisions.log import DecisionLog
    from ..sink.lineage import pyarrow_uri

    candidates = [location.rstrip("/")]
    if candidates[0].endswith("/eoskafka"):
        candidates.append(candidates[0][: -len("/eoskafka")])
    for base in candidates:
        uri = pyarrow_uri(base)  # file:/x and s3a:// as the sink reads them
        try:
            fs, root = pafs.FileSystem.from_uri(uri + "/eoskafka/decisions")
            found = fs.get_file_info(root).type == pafs.FileType.Directory
        except (OSError, ValueError) as exc:  # pyarrow: bad URI, missing credentials
            raise UsageError(f"cannot read checkpoint {location!r}: {exc}") from None
        if found:
            return DecisionLog(base)
    raise UsageError(
        f"no eoskafka decision log under {location!r} (expected {location.rstrip('/')}"
        "/eoskafka/decisions): pass the query's checkpointLocation, or its "
        "decisionLogLocation if one was set"
    )


def iso(ts: float | None) -> str:
    """Epoch seconds as ISO 8601 UTC with milliseconds, or '-'."""
    if not ts:
        return "-"
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def emit_json(document: dict[str, Any], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    json.dump({"version": JSON_VERSION, **document}, out, indent=2, sort_keys=False)
    out.write("\n")
    out.flush()


def table(rows: list[list[Any]], header: list[str], out: TextIO | None = None) -> None:
    """Left-aligned columns, two spaces apart."""
    out = out or sys.stdout
    cells = [[str(c) for c in row] for row in [header, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for row in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        out.write("\n")


Runner = Callable[[argparse.Namespace], int]
