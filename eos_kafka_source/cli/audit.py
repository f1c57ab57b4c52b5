"""``eoskafka audit``: a topic's committed view, resolved from the markers in its log.

Not a read_committed consumer (on brokers that leave Fetch's aborted list empty,
such as Tansu, those return aborted records too). Each partition is read twice
over the same range: batch headers first, filling a
:class:`~eos_kafka_source.visibility.FateBook` with every COMMIT/ABORT marker;
then the data batches, each taking its producer's fate (committed, aborted, or
open when no marker follows it), decoded with
:class:`~eos_kafka_source.records.ColumnBuilder` to count records and find
duplicates among the committed ones. Memory: one entry per distinct id.

Exit 1 when committed records are duplicated or a transaction is open, else 0;
2 on a usage or connection error.

``--json`` document (stable field names)::

    version, topic, id ({by: "key"|"value"|"json", field}), from_beginning, tail
    partitions   [{partition, log_start, start, last_stable, high_watermark, committed,
                   aborted, open, non_transactional, duplicates, without_id,
                   open_transactions: [{producer_id, producer_epoch, transactional_id (null),
                                        first_offset, last_offset, records, batches}]}]
    totals       {committed, aborted, open, non_transactional, duplicates, without_id,
                  aborted_visible_to_read_uncommitted}
    duplicates   {ids, extra_records, examples: [{id, count, at: [[partition, offset]...]}]}
    ok           false when the exit code is 1

``committed`` counts records of committed transactions plus non-transactional
ones; ``duplicates`` counts committed records whose id was already seen (the
second copy onward); ``without_id`` committed records with no id (null key, or a
value that is not JSON or lacks the field). With ``--id-field``, an audit where no
committed record has the field exits 2 saying why (Avro or Protobuf payloads, or
another field name) rather than report no duplicates. ``aborted_visible_to_read_uncommitted``:
records of aborted transactions, which a read_uncommitted reader sees (and so does
a read_committed one on a broker that does not report aborted transactions).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import pyarrow as pa

from ..records import ColumnBuilder
from . import _common as c
from ._scan import PartitionState, batches, partitions_of, scan_headers

HELP = "the committed view of a topic: committed / aborted / open records, duplicates"
EPILOG = """\
examples:
  eoskafka audit -b kafka:9092 --topic orders --from-beginning
  eoskafka audit -b kafka:9092 --topic orders --id-field order.id --json
  eoskafka audit -b kafka:9092 --topic orders --by value --tail 50000

Without --from-beginning only the last --tail offsets of each partition are read
(duplicates across that boundary are not seen). Transactions are resolved from
the COMMIT/ABORT markers in the raw log, not by a read_committed consumer.

exit status: 0 clean, 1 duplicates or open transactions, 2 error
"""
_EXAMPLES = 10
_ROWS = 65_536
_ID_SCHEMA = pa.schema([pa.field("key", pa.binary()), pa.field("value", pa.binary()),
                        pa.field("offset", pa.int64())])


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("audit", help=HELP, description=HELP + ".", epilog=EPILOG,
                              parents=parents, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--topic", "-t", required=True, metavar="T", help="the topic to audit")
    ident = p.add_mutually_exclusive_group()
    ident.add_argument("--by", choices=("key", "value"), default="key",
                       help="what identifies a record for duplicate detection (default key)")
    ident.add_argument("--id-field", metavar="FIELD",
                       help="identify records by a field of their JSON value (dots for "
                            "nesting; a JSON Schema payload's too); refused when no committed "
                            "record has it")
    p.add_argument("--from-beginning", action="store_true",
                   help="read each partition from its log start")
    p.add_argument("--tail", type=int, default=1_000_000, metavar="N",
                   help="offsets per partition read without --from-beginning (default 1000000)")
    p.set_defaults(run=run)


class _Ids:
    """Committed ids seen so far: first location per id, and the duplicated ones.

    With a field, a value in Confluent's wire format (magic byte 0, a 4-byte schema id) whose
    payload is JSON (a JSON Schema payload) is read after its 5-byte header; one whose payload
    is not (Avro, Protobuf) is counted in ``framed`` with its schema id, so that an audit
    where no record has the field can say why."""

    def __init__(self, by: str, field: str | None) -> None:
        self.by, self.path = by, field.split(".") if field else None
        self.first: dict[Any, tuple[int, int]] = {}
        self.dups: dict[Any, list[tuple[int, int]]] = {}
        #: schema id -> committed values of it whose payload is not JSON
        self.framed: dict[int, int] = {}

    def add(self, partition: int, batch: pa.RecordBatch) -> tuple[int, int]:
        """Count one decoded batch: (duplicates, without id)."""
        dup = missing = 0
        column = batch.column("value" if self.path or self.by == "value" else "key").to_pylist()
        for raw, offset in zip(column, batch.column("offset").to_pylist(), strict=True):
            ident = self._ident(raw)
            if ident is None:
                missing += 1
                continue
            where = (partition, offset)
            seen = self.first.setdefault(ident, where)
            if seen is not where:
                dup += 1
                self.dups.setdefault(ident, [seen]).append(where)
        return dup, missing

    def _ident(self, raw: bytes | None) -> Any:
        if raw is None or self.path is None:
            return raw
        try:
            node = json.loads(raw)
        except ValueError:
            node = self._framed_json(raw)
            if node is None:
                return None
        for name in self.path:
            if not isinstance(node, dict) or name not in node:
                return None
            node = node[name]
        return None if node is None else json.dumps(node, sort_keys=True)

    def _framed_json(self, raw: bytes) -> Any:
        if len(raw) < 5 or raw[0] != 0:
            return None
        try:
            return json.loads(raw[5:])
        except ValueError:
            schema_id = int.from_bytes(raw[1:5], "big")
            self.framed[schema_id] = self.framed.get(schema_id, 0) + 1
            return None

    def refuse_if_never_found(self, committed: int, without_id: int) -> None:
        """With ``--id-field``, committed records none of which has the field is no clean
        audit: it says why (schema'd payloads that are not JSON, or a wrong field name)."""
        if self.path is None or not committed or without_id < committed:
            return
        field = ".".join(self.path)
        if self.framed:
            ids = ", ".join(str(i) for i in sorted(self.framed))
            raise c.UsageError(
                f"--id-field {field}: no committed record has it: the values are schema'd "
                f"payloads in Confluent's wire format (schema id {ids}) that are not JSON "
                "(Avro or Protobuf), which audit cannot decode. Audit by --by key (write "
                "the id as the record key), or read the topic with valueFormat and count "
                "ids in Spark")
        raise c.UsageError(
            f"--id-field {field}: none of the {committed} committed record(s) has it (values "
            "that are not JSON objects, or another field name; dots for nesting). Check the "
            "name, or audit by --by key or --by value")


def run(args: argparse.Namespace) -> int:
    if args.tail < 1:
        raise c.UsageError("--tail must be at least 1")
    config = c.client_config(args)
    with c.connect(config) as wire:
        doc, _ = audit_topic(wire, args.topic, by=args.by, id_field=args.id_field,
                             from_beginning=args.from_beginning, tail=args.tail)
    if args.json:
        c.emit_json(doc)
    else:
        _print(doc)
    return c.EXIT_OK if doc["ok"] else c.EXIT_PROBLEM


def audit_topic(
    wire: Any, topic: str, *, by: str = "key", id_field: str | None = None,
    from_beginning: bool = True, tail: int = 1_000_000,
) -> tuple[dict[str, Any], set[Any]]:
    """The audit document (as ``--json`` prints it) and the set of committed ids.

    Ids are the key, the value, or (with ``id_field``) a JSON field of the value
    rendered with ``json.dumps``. Used by the CLI and by ``make demo``.
    """
    ids = _Ids(by, id_field)
    window = argparse.Namespace(from_beginning=from_beginning, tail=tail)
    parts = [_audit_partition(wire, part, ids, window) for part in partitions_of(wire, [topic])]
    totals = {k: sum(p[k] for p in parts) for k in
              ("committed", "aborted", "open", "non_transactional", "duplicates", "without_id")}
    ids.refuse_if_never_found(totals["committed"], totals["without_id"])
    totals["aborted_visible_to_read_uncommitted"] = totals["aborted"]
    examples = sorted(ids.dups.items(), key=lambda i: (-len(i[1]), i[1][0]))[:_EXAMPLES]
    doc = {
        "topic": topic,
        "id": {"by": "json" if id_field else by, "field": id_field},
        "from_beginning": from_beginning,
        "tail": None if from_beginning else tail,
        "partitions": parts,
        "totals": totals,
        "duplicates": {
            "ids": len(ids.dups), "extra_records": totals["duplicates"],
            "examples": [{"id": _show(i), "count": len(at), "at": [list(w) for w in at[:5]]}
                         for i, at in examples],
        },
        "ok": not totals["duplicates"] and not totals["open"],
    }
    return doc, set(ids.first)


def _audit_partition(wire: Any, part: PartitionState, ids: _Ids,
                     args: argparse.Namespace) -> dict[str, Any]:
    b = part.bounds
    start = b.log_start if args.from_beginning else max(b.log_start, b.high_watermark - args.tail)
    stop = b.high_watermark
    scan = scan_headers(wire, part, start, stop)  # pass 1: every marker in the range
    counts = dict.fromkeys(("committed", "aborted", "open", "non_transactional", "duplicates",
                            "without_id"), 0)
    builder = ColumnBuilder(part.topic, part.partition, False, _ID_SCHEMA)

    def flush() -> None:
        if len(builder):
            dup, missing = ids.add(part.partition, builder.to_arrow())
            counts["duplicates"] += dup
            counts["without_id"] += missing

    for header, view in batches(wire, part, start, stop):  # pass 2: the data
        if header.is_control:
            continue
        if not header.is_transactional:
            fate: bool | None = True
        else:
            fate = scan.fates.fate(header.producer_id, header.base_offset)
        if fate:
            n = builder.add_batch(header, view, start, stop)
            counts["committed"] += n
            if not header.is_transactional:
                counts["non_transactional"] += n
            if len(builder) >= _ROWS:
                flush()
        else:
            counts["aborted" if fate is False else "open"] += _count(header, view, start, stop)
    flush()
    return {"partition": part.partition, "log_start": b.log_start, "start": start,
            "last_stable": b.last_stable, "high_watermark": b.high_watermark, **counts,
            "open_transactions": [t.to_json() for _, t in sorted(scan.open.items())]}


def _count(header: Any, view: memoryview, start: int, stop: int) -> int:
    if header.base_offset >= start and header.last_offset < stop:
        return header.record_count
    scratch = ColumnBuilder("", 0, False, pa.schema([pa.field("offset", pa.int64())]))
    return scratch.add_batch(header, view, start, stop)


def _show(ident: Any) -> str:
    if isinstance(ident, bytes):
        return ident.decode("utf-8", errors="backslashreplace")
    return str(ident)


def _print(doc: dict[str, Any]) -> None:
    out, t = sys.stdout, doc["totals"]
    ident = doc["id"]
    what = f"JSON field {ident['field']!r}" if ident["by"] == "json" else f"record {ident['by']}"
    scope = "from the log start" if doc["from_beginning"] else f"last {doc['tail']} offsets"
    out.write(f"topic {doc['topic']} ({scope} of each partition; duplicates by {what})\n\n")
    rows = [[p["partition"], f"{p['start']}..{p['high_watermark']}", p["last_stable"],
             p["committed"], p["aborted"], p["open"], p["duplicates"], p["without_id"]]
            for p in doc["partitions"]]
    c.table(rows, ["partition", "offsets", "LSO", "committed", "aborted", "open", "duplicates",
                   "no id"])
    out.write("\n")
    for p in doc["partitions"]:
        for o in p["open_transactions"]:
            out.write(f"open transaction: partition {p['partition']} producer "
                      f"{o['producer_id']} epoch {o['producer_epoch']}, {o['records']} records "
                      f"from offset {o['first_offset']} (no marker yet; holds the LSO back)\n")
    dups = doc["duplicates"]
    if dups["ids"]:
        out.write(f"duplicates: {dups['ids']} id(s) committed more than once "
                  f"({dups['extra_records']} extra record(s)), e.g.:\n")
        for e in dups["examples"]:
            at = ", ".join(f"{p}@{o}" for p, o in e["at"])
            out.write(f"  {e['id'][:80]!r} x{e['count']} at partition@offset {at}\n")
    if t["aborted"]:
        out.write(f"{t['aborted']} record(s) of aborted transactions are in the log: a "
                  "read_uncommitted reader sees them (so does read_committed on brokers that "
                  "do not report aborted transactions, such as Tansu)\n")
    out.write(("OK" if doc["ok"] else "PROBLEM") + f": {t['committed']} committed, "
              f"{t['aborted']} aborted, {t['open']} open, {t['duplicates']} duplicate(s)\n")
