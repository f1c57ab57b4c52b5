"""``eoskafka migrate``: where an eoskafka query must start to take over from a ``kafka`` query.

Runs on: the operator's machine, against a STOPPED Spark query that reads with Spark's
own connector (``format("kafka")``). Spark refuses to change a query's source on an
existing checkpoint, so the eoskafka query gets a new checkpoint and starts where the
old one stopped: ``startingOffsets`` = the end offsets of the old query's last
committed batch. Those are in its checkpoint (``commits/N`` says batch N is committed,
``offsets/N`` holds its end offsets as one JSON line per source, the Kafka source's
shaped ``{"topic": {"0": 123}}``), read through pyarrow's filesystems, so S3, HDFS and
local paths all work. Nothing is written anywhere. See docs/migrating.md.

With a broker (``-b``), the offsets are checked against each partition's log and
partitions the topics have gained since are added at ``-2`` (earliest), which is
where Spark's own source would have read them from; eoskafka's ``startingOffsets``
JSON must name every partition the query reads.

Exit 0: the offsets are printed and complete. Exit 1: printed, but something needs a
decision first (an offset below the log start: records already deleted by retention;
an offset past the high watermark: another cluster or a recreated topic). Exit 2:
no usable checkpoint (no committed batch, no Kafka source, several Kafka sources
and no ``--source``) or a connection error.

``--json`` document (``version`` 1)::

    {"version": 1, "checkpoint": str, "batch_id": int, "source_index": int,
     "starting_offsets": {"topic": {"0": int}}, "starting_offsets_json": str,
     "uncommitted_batch": int | null, "partitions_added": [{"topic", "partition"}],
     "problems": [str], "warnings": [str], "steps": [str], "ok": bool}
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from typing import Any

from ..sink.lineage import pyarrow_uri
from . import _common as c

HELP = "print the startingOffsets that let an eoskafka query take over from a kafka query"
EPILOG = """\
examples:
  eoskafka migrate --checkpoint /chk/orders-old
  eoskafka migrate --checkpoint s3://bucket/chk/orders-old -b kafka:9092 --json

Reads the old query's last committed batch (commits/N and offsets/N) and prints the
JSON to pass as the eoskafka query's startingOffsets, with the steps around it.
Stop the old query first; start the eoskafka query on a NEW checkpointLocation.

exit status: 0 ready, 1 offsets need a decision first (see the message), 2 error
"""
_DIGITS = frozenset("0123456789")


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("migrate", help=HELP, description=HELP + ".", epilog=EPILOG,
                              parents=parents, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", metavar="PATH", required=True,
                   help="the checkpointLocation of the query reading format('kafka')")
    p.add_argument("--source", type=int, metavar="N", default=None,
                   help="which Kafka source of the query, 0-based, when it reads several")
    p.set_defaults(run=run)


@dataclass
class Takeover:
    """What the old checkpoint says: its last committed batch and that batch's end offsets."""

    batch_id: int
    source_index: int
    offsets: dict[str, dict[str, int]]
    uncommitted_batch: int | None = None
    partitions_added: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _filesystem(checkpoint: str) -> tuple[Any, str]:
    import pyarrow.fs as pafs

    base = checkpoint.rstrip("/")
    uri = pyarrow_uri(base)  # file:/x and s3a:// as the sink reads them
    try:
        return pafs.FileSystem.from_uri(uri)
    except (OSError, ValueError) as exc:  # pyarrow: bad URI, missing credentials
        raise c.UsageError(f"cannot read checkpoint {checkpoint!r}: {exc}") from None


def _batches(fs: Any, root: str, log: str) -> dict[int, str]:
    import pyarrow.fs as pafs

    try:
        entries = fs.get_file_info(pafs.FileSelector(f"{root}/{log}", allow_not_found=True))
    except OSError as exc:
        raise c.UsageError(f"cannot list {log}/ of the checkpoint: {exc}") from None
    return {int(e.base_name): e.path for e in entries
            if e.base_name and set(e.base_name) <= _DIGITS and e.type.name == "File"}


def kafka_offsets(line: str) -> dict[str, dict[str, int]] | None:
    """A source line of Spark's offset log if it is a Kafka source's offsets, else None."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict) or not data:
        return None
    for parts in data.values():
        if not isinstance(parts, dict) or not parts:
            return None
        for partition, offset in parts.items():
            if not (set(str(partition)) <= _DIGITS and isinstance(offset, int)
                    and not isinstance(offset, bool)):
                return None
    return {t: {str(p): o for p, o in sorted(ps.items(), key=lambda i: int(i[0]))}
            for t, ps in sorted(data.items())}


def read_takeover(checkpoint: str, source: int | None = None) -> Takeover:
    """The old query's last committed batch and its Kafka source's end offsets."""
    fs, root = _filesystem(checkpoint)
    commits, offsets = _batches(fs, root, "commits"), _batches(fs, root, "offsets")
    if not offsets:
        raise c.UsageError(f"{checkpoint!r} has no offsets/ entries: is it the checkpointLocation "
                           "of a streaming query that has run at least one batch?")
    committed = sorted(set(commits) & set(offsets))
    if not committed:
        raise c.UsageError(f"{checkpoint!r} has no committed batch (commits/N beside "
                           "offsets/N): the old query never finished one. Start the eoskafka "
                           "query with the old query's own startingOffsets instead.")
    batch_id = committed[-1]
    with fs.open_input_stream(offsets[batch_id]) as src:
        lines = src.read().decode().splitlines()
    # "v1", the batch's metadata, then one line per source in the query's source order.
    found = [(i, o) for i, line in enumerate(lines[2:]) if (o := kafka_offsets(line))]
    if not found:
        raise c.UsageError(f"offsets/{batch_id} of {checkpoint!r} holds no Kafka source "
                           "offsets ({\"topic\": {\"0\": 123}}): is this a query reading "
                           "format('kafka')?")
    if source is not None:
        chosen = [f for f in found if f[0] == source]
        if not chosen:
            raise c.UsageError(f"--source {source}: offsets/{batch_id} has Kafka offsets for "
                               f"source(s) {', '.join(str(i) for i, _ in found)} only")
    elif len(found) > 1:
        raise c.UsageError(f"the query reads {len(found)} Kafka sources (indexes "
                           f"{', '.join(str(i) for i, _ in found)}): pick one with --source N")
    else:
        chosen = found
    index, data = chosen[0]
    newer = sorted(b for b in offsets if b > batch_id)
    takeover = Takeover(batch_id, index, data, uncommitted_batch=newer[-1] if newer else None)
    if newer:
        takeover.warnings.append(
            f"batch {newer[-1]} was planned (offsets/{newer[-1]}) but never committed: the old "
            "query was stopped mid-batch or is still running. If it is stopped, the new query "
            "reads that batch's input again, and whatever the old at-least-once sink wrote of "
            "it stays in the output once more. To avoid that, restart the old query, let it "
            "finish a batch, stop it between batches, and run this again.")
    return takeover


def check_on_broker(takeover: Takeover, args: argparse.Namespace) -> None:
    """Add new partitions at -2 and flag offsets outside each partition's log."""
    from ..wire import fetch_bounds, fetch_metadata

    config = c.client_config(args)
    assert config is not None
    with c.connect(config) as wire:
        info = fetch_metadata(wire, sorted(takeover.offsets))
        leaders = {(t, p): leader for t, ti in info.items() for p, leader in ti.leaders.items()}
        hints = {(t, int(p)): o for t, ps in takeover.offsets.items() for p, o in ps.items()}
        bounds = fetch_bounds(wire, leaders, hints={tp: o for tp, o in hints.items()
                                                    if tp in leaders})
    for (topic, partition), b in sorted(bounds.items()):
        offset = hints.get((topic, partition))
        if offset is None:
            takeover.offsets[topic][str(partition)] = -2
            takeover.partitions_added.append({"topic": topic, "partition": partition})
        elif offset < b.log_start:
            takeover.problems.append(
                f"{topic}-{partition}: the old query stopped at offset {offset}, the log now "
                f"starts at {b.log_start}: {b.log_start - offset} record(s) were deleted "
                "(retention) before anything read them. Starting there, eoskafka fails with "
                "failOnDataLoss=true (the default); accept the loss with failOnDataLoss=false "
                f"or start that partition at {b.log_start}.")
        elif offset > b.high_watermark:
            takeover.problems.append(
                f"{topic}-{partition}: the old query stopped at offset {offset}, past the "
                f"end of the log ({b.high_watermark}): another cluster, or the topic was "
                "recreated. Check -b and the topic before starting.")
    for topic, partitions in takeover.offsets.items():
        gone = sorted(int(p) for p in partitions if (topic, int(p)) not in bounds)
        if gone:
            takeover.problems.append(f"{topic}: partition(s) {gone} of the checkpoint are not "
                                     "on the broker: check -b and the topic")
        takeover.offsets[topic] = dict(sorted(partitions.items(), key=lambda i: int(i[0])))


def steps(checkpoint: str, starting: str, *, checked: bool) -> list[str]:
    """The migration, in order, as printed and as in docs/migrating.md."""
    return [
        "Stop the old query (query.stop(), or stop its job) and keep it stopped.",
        f"Run `eoskafka migrate --checkpoint {checkpoint}`"
        + ("" if checked else " -b HOST:PORT (checks the offsets and adds new partitions)")
        + " after it stopped: the startingOffsets it prints are the end of the old query's "
        "last committed batch.",
        "Start the eoskafka query on a NEW checkpointLocation with "
        f".option(\"startingOffsets\", '{starting}') (and the same subscription); "
        "startingOffsets only applies to a new checkpoint.",
        "Switch downstream readers of the output topic to isolation.level=read_committed "
        "(Spark's kafka source: .option(\"kafka.isolation.level\", \"read_committed\")), "
        "or they also see records of aborted transactions.",
    ]


def run(args: argparse.Namespace) -> int:
    takeover = read_takeover(args.checkpoint, args.source)
    checked = c.client_config(args, required=False) is not None
    if checked:
        check_on_broker(takeover, args)
    starting = json.dumps(takeover.offsets, separators=(",", ":"))
    doc = {"checkpoint": args.checkpoint, "batch_id": takeover.batch_id,
           "source_index": takeover.source_index, "starting_offsets": takeover.offsets,
           "starting_offsets_json": starting, "uncommitted_batch": takeover.uncommitted_batch,
           "partitions_added": takeover.partitions_added, "broker_checked": checked,
           "problems": takeover.problems, "warnings": takeover.warnings,
           "steps": steps(args.checkpoint, starting, checked=checked),
           "ok": not takeover.problems}
    if args.json:
        c.emit_json(doc)
    else:
        _print(doc)
    return c.EXIT_OK if doc["ok"] else c.EXIT_PROBLEM


def _print(doc: dict[str, Any]) -> None:
    """The steps first, then the offsets they use, then what needs a look: the JSON to copy
    and any problem end the output, where a terminal leaves the eye."""
    out = sys.stdout
    out.write(f"last committed batch {doc['batch_id']} of {doc['checkpoint']} "
              f"(Kafka source #{doc['source_index']})\n\nsteps:\n")
    for number, step in enumerate(doc["steps"], 1):
        out.write(f"  {number}. {step}\n")
    out.write(f"\nstartingOffsets:\n{doc['starting_offsets_json']}\n")
    for added in doc["partitions_added"]:
        out.write(f"note: {added['topic']}-{added['partition']} is new since that batch: "
                  "-2 (earliest), as Spark's source would read it\n")
    for warning in doc["warnings"]:
        out.write(f"WARNING: {warning}\n")
    for problem in doc["problems"]:
        out.write(f"PROBLEM: {problem}\n")
