"""``eoskafka lag``: how far a streaming query's eoskafka source is behind, per partition.

Reads the newest entry of Spark's offset log in the query's checkpoint
(``<checkpoint>/offsets/<batch>``: the end offsets of the last planned batch)
and compares them with each partition's latest readable offset on the broker
(the last stable offset, as read_committed reads): source lag seen from outside the
query (inside it, ``eos_kafka_source.source.lag.offsets_behind_latest`` reads a progress
report's ``latestOffset``).

A query that has not planned a batch yet (its checkpoint has Spark's ``metadata`` file and
no offset log entry) is a state, not an error: the command says so and exits 0, so an
alert on the exit code does not fire at every fresh start; its lag is known from the first
planned batch on.

Exit 1 when ``--max-lag N`` is given and the total lag is above N (an alert: the query
is falling behind, or stopped); 0 otherwise; 2 on a usage or connection error.

``--json`` document (``version`` 1)::

    {"version": 1, "checkpoint": str, "batch_id": int | null (no batch planned yet),
     "partitions": [{"topic", "partition", "offset", "last_stable", "high_watermark",
                     "lag"}], "total_lag": int | null, "max_lag": int | null, "ok": bool}
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import pyarrow.fs as pafs

from ..sink.lineage import pyarrow_uri
from . import _common as c

HELP = "how far a query's eoskafka source is behind the broker, per partition"
EPILOG = """examples:
  eoskafka lag --checkpoint /chk/orders -b localhost:9092
  eoskafka lag --checkpoint s3://bucket/chk/orders -b kafka:9092 --json
  eoskafka lag --checkpoint /chk/orders -b kafka:9092 --max-lag 1000000   # for alerting

The lag is counted from the end of the last PLANNED batch (offsets/N), so a batch in
flight is not lag; a stopped query's lag grows with its input. A query that has not
planned its first batch yet is reported as such, with exit status 0.

exit status: 0 ok (or no batch yet), 1 total lag above --max-lag, 2 error
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("lag", help=HELP, description=HELP + ".", epilog=EPILOG,
                              parents=parents, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", metavar="PATH", required=True,
                   help="the streaming query's checkpointLocation: path or URI")
    p.add_argument("--max-lag", type=int, metavar="N", default=None,
                   help="exit 1 when the total lag (offsets behind the last stable offset, "
                        "all partitions) is above N")
    p.set_defaults(run=run)


def latest_source_offsets(checkpoint: str) -> tuple[int, dict[tuple[str, int], int]] | None:
    """(batch id, offsets) of the newest entry of Spark's offset log that has eoskafka offsets;
    None for a streaming query's checkpoint with no entry yet (it has not planned a batch)."""
    base = checkpoint.rstrip("/")
    uri = pyarrow_uri(base)  # file:/x and s3a:// as the sink reads them
    try:
        fs, root = pafs.FileSystem.from_uri(uri + "/offsets")
        entries = fs.get_file_info(pafs.FileSelector(root, allow_not_found=True))
        batches = sorted((int(e.base_name), e.path) for e in entries if e.base_name.isdigit())
        # Spark writes <checkpoint>/metadata (the query id) when the query starts, before
        # planning any batch.
        started = not batches and fs.get_file_info(
            root.rsplit("/", 1)[0] + "/metadata").type == pafs.FileType.File
    except (OSError, ValueError) as exc:
        raise c.UsageError(f"cannot read checkpoint {checkpoint!r}: {exc}") from None
    if started:
        return None
    for batch_id, path in reversed(batches):
        with fs.open_input_stream(path) as src:
            lines = src.read().decode().splitlines()
        for line in lines[2:]:  # "v1", the batch metadata, then one line per source
            offsets = _as_kafka_offsets(line)
            if offsets is not None:
                return batch_id, offsets
    raise c.UsageError(f"no eoskafka source offsets in {checkpoint!r}/offsets: is this the "
                       "checkpoint of a streaming query reading format('eoskafka')?")


def _as_kafka_offsets(line: str) -> dict[tuple[str, int], int] | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict) or not data:
        return None
    out: dict[tuple[str, int], int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            return None
        for partition, offset in parts.items():
            if not str(partition).isdigit() or not isinstance(offset, int):
                return None
            out[(topic, int(partition))] = offset
    return out


def run(args: argparse.Namespace) -> int:
    from ..wire import fetch_bounds, fetch_metadata

    if args.max_lag is not None and args.max_lag < 0:
        raise c.UsageError("--max-lag must be >= 0")
    latest = latest_source_offsets(args.checkpoint)
    config = c.client_config(args)
    assert config is not None
    if latest is None:
        return _no_batch_yet(args)
    batch_id, offsets = latest
    with c.connect(config) as wire:
        info = fetch_metadata(wire, sorted({t for t, _ in offsets}))
        leaders = {(t, p): leader for t, ti in info.items() for p, leader in ti.leaders.items()}
        bounds = fetch_bounds(wire, leaders, hints=offsets)
    rows: list[dict[str, Any]] = []
    for (topic, partition), b in sorted(bounds.items()):
        offset = offsets.get((topic, partition), 0)
        rows.append({"topic": topic, "partition": partition, "offset": offset,
                     "last_stable": b.last_stable, "high_watermark": b.high_watermark,
                     "lag": max(0, b.last_stable - offset)})
    doc = {"checkpoint": args.checkpoint, "batch_id": batch_id,
           "partitions": rows, "total_lag": sum(r["lag"] for r in rows),
           "max_lag": args.max_lag}
    doc["ok"] = args.max_lag is None or doc["total_lag"] <= args.max_lag
    if args.json:
        c.emit_json(doc)
    else:
        c.table([[f"{r['topic']}-{r['partition']}", r["offset"], r["last_stable"],
                  r["high_watermark"], r["lag"]] for r in rows],
                ["partition", "query at", "LSO", "high watermark", "lag"])
        print(f"batch {batch_id}: {doc['total_lag']} offsets behind the last stable offset")
        if not doc["ok"]:
            print(f"PROBLEM: lag {doc['total_lag']} is above --max-lag {args.max_lag}")
    return c.EXIT_OK if doc["ok"] else c.EXIT_PROBLEM


def _no_batch_yet(args: argparse.Namespace) -> int:
    doc = {"checkpoint": args.checkpoint, "batch_id": None, "partitions": [],
           "total_lag": None, "max_lag": args.max_lag, "ok": True}
    if args.json:
        c.emit_json(doc)
    else:
        print(f"no batch planned yet in {args.checkpoint}: the query has started and not "
              "read anything; its lag is known from its first batch")
    return c.EXIT_OK
