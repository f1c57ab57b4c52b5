"""A batch read, followed call by call from ``EosKafkaBatchReader.read`` over one input
partition of a real topic, stops in at most 20 modules, raw or decoded.

A profile hook (``sys.setprofile``) sees every call while the read runs (generators
resumed included: the read is a chain of them). Where the read *stands* is seen from the
source: a source module, or the module right below the source that the source called (what
that module calls in turn is inside the stop: the wire's connection and bootstrap, the
records' header parser). A *stop* is a run of consecutive calls at one place. Each call
site (caller's module, function and line; callee's module and function) counts once, so a
loop over batches does not repeat the path. Left out: calls made while a module is
imported, and calls into the ground floor that every layer uses (``errors``, ``timings``,
``gcpause``, ``acls``, ``logs``, ``kafka_codes``) or a fault point (``faults``, a no-op
outside the fault tests). A *climb* is a stop in a higher layer (``.importlinter``) than
the one before it, such as the visibility filter calling back into the partition reader.

Calibration: the method gives, on the code before the read became one module (160a9ec:
the stream reader's ``read_input``, timings in the sink), 20 stops in 8 modules with 7
climbs on a raw read and 22 in 9 with 8 on an Avro read; on 8c4920d (schema ids in headers
read, the partition patched at read time, the decoder built then called) 20 raw and 27
decoded. The issue's own count (23 stops in 14 modules, 7 climbs) was made by reading the
code; no trace of that code reproduces it exactly. Now 16 raw and 19 decoded (5 and 7
climbs): the visibility filter opens its cursors through the wire layer (``LogCursors``)
instead of calling back into the partition reader, the plan asks for the headers a decode
needs, and the partition reader hands its batches to one decoding entry
(``formats.payload.decoded``).
"""

from __future__ import annotations

import json
import pickle
import sys
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

from eos_kafka_source.datasource import EosKafkaDataSource
from eos_kafka_source.source.schema import kafka_schema
from tests.kafka_helpers import TxnWriter, create_topic

PACKAGE, SOURCE = "eos_kafka_source", "eos_kafka_source.source."
MAX_STOPS = 20
#: Used by every layer, not a step of the read (``faults``: test-only fault points).
GROUND = {"errors", "timings", "gcpause", "acls", "logs", "kafka_codes", "_version", "faults"}
#: ``.importlinter``'s layers of the package, and of the source, top first.
LAYERS = ["demo", "cli", "datasource", "source sink", "options",
          "formats offsets visibility wire", "client records", "apicurio",
          "apache_kafka broker", "error_reference faults processes", "errors"]
SOURCE_LAYERS = ["batch_reader stream_reader", "available_now packing partition_reader"]
Frame = tuple[str, str, int]  # module, function, line


def _counted(module: str) -> bool:
    return module.rsplit(".", 1)[-1] not in GROUND


def _rank(module: str) -> tuple[int, int]:
    parts = module.split(".")[1:] + [""]
    top = next((i for i, layer in enumerate(LAYERS) if parts[0] in layer.split()), 99)
    inner = next((i for i, layer in enumerate(SOURCE_LAYERS) if parts[1] in layer.split()),
                 len(SOURCE_LAYERS)) if parts[0] == "source" else 0
    return top, inner


def stops_of(calls: Sequence[Sequence[Frame]]) -> tuple[list[str], int]:
    """The read's stops, in order, and its climbs, from the package's frames of each call
    (innermost first)."""
    stops: list[str] = []
    seen: set[tuple[Frame, str, str]] = set()
    for stack in calls:
        if any(function == "<module>" for _, function, _ in stack):
            continue  # an import
        if not _counted(stack[0][0]):
            continue
        if len(stack) > 1:
            site = (tuple(stack[1]), stack[0][0], stack[0][1])
            if site in seen:
                continue
            seen.add(site)
        modules = [module for module, _, _ in stack if _counted(module)]
        source = next((i for i, m in enumerate(modules) if m.startswith(SOURCE)), None)
        where = modules[-1] if source is None else modules[source - 1 if source else 0]
        if not stops or stops[-1] != where:
            stops.append(where)
    climbs = sum(_rank(b) < _rank(a) for a, b in zip(stops, stops[1:], strict=False))
    return [s[len(PACKAGE) + 1:] for s in stops], climbs


def trace(read: Callable[[], Any]) -> list[list[Frame]]:
    """The package's frames of every call ``read`` makes into the package."""
    calls: list[list[Frame]] = []

    def hook(frame: FrameType, event: str, _arg: object) -> None:
        if event != "call" or not frame.f_globals.get("__name__", "").startswith(PACKAGE):
            return
        stack: list[Frame] = []
        at: FrameType | None = frame
        while at is not None:
            name = at.f_globals.get("__name__", "")
            if name == PACKAGE or name.startswith(PACKAGE + "."):
                stack.append((name, at.f_code.co_name, at.f_lineno))
            at = at.f_back
        calls.append(stack)

    sys.setprofile(hook)
    try:
        read()
    finally:
        sys.setprofile(None)
    return calls


def _read_stops(reader: Any) -> tuple[list[Any], list[str], int]:
    """The rows ``reader`` reads from its one input partition, and the read's stops."""
    (partition,) = reader.partitions()
    # As on an executor: an unpickled reader and partition.
    reader, partition = pickle.loads(pickle.dumps((reader, partition)))
    batches: list[Any] = []
    path, climbs = stops_of(trace(lambda: batches.extend(reader.read(partition))))
    return [row for batch in batches for row in batch.to_pylist()], path, climbs


def _check(path: list[str], climbs: int) -> None:
    shown = f"{len(path)} stops, {climbs} climbs: " + " > ".join(path)
    assert {s for s in path if s.startswith("source.")} == {
        "source.batch_reader", "source.partition_reader"}, shown
    assert not [s for s in path if s.startswith(("datasource", "sink."))], shown
    assert len(path) <= MAX_STOPS, shown


def test_a_raw_batch_read_stops_at_most_twenty_times(bootstrap: str, unique: str) -> None:
    """Three records in one committed transaction: one data batch and one marker."""
    create_topic(bootstrap, unique)
    with TxnWriter(bootstrap, f"{unique}-w") as writer:
        writer.committed(unique, [b"a", b"b", b"c"], partition=0)
    reader = EosKafkaDataSource({"kafka.bootstrap.servers": bootstrap, "subscribe": unique,
                                 "maxPartitions": "1"}).reader(kafka_schema(False))
    rows, path, climbs = _read_stops(reader)
    assert [r["value"] for r in rows] == [b"a", b"b", b"c"]
    _check(path, climbs)


def test_a_decoded_batch_read_stops_at_most_twenty_times(bootstrap: str, unique: str,
                                                         schema_registry: Any) -> None:
    """``valueFormat=avro`` from a registry: a schema id in the payload's prefix and one in
    a ``__value_schema_id`` header, in one committed transaction."""
    from confluent_kafka.schema_registry.avro import AvroSerializer

    from tests.formats.spark_io import registry, value_context

    create_topic(bootstrap, unique)
    serialize = AvroSerializer(registry(schema_registry.url), json.dumps(
        {"type": "record", "name": "R", "fields": [{"name": "n", "type": "int"}]}))
    framed = [serialize({"n": n}, value_context(unique)) for n in range(3)]
    with TxnWriter(bootstrap, f"{unique}-w") as writer:
        writer.committed(unique, [framed[0], framed[1][5:], framed[2]], partition=0,
                         headers=[[], [("__value_schema_id", framed[1][:5])], []])
    source = EosKafkaDataSource({"kafka.bootstrap.servers": bootstrap, "subscribe": unique,
                                 "maxPartitions": "1", "valueFormat": "avro",
                                 "schema.registry.url": schema_registry.url})
    rows, path, climbs = _read_stops(source.reader(source.schema()))
    assert [r["value"] for r in rows] == [{"n": 0}, {"n": 1}, {"n": 2}]
    _check(path, climbs)
