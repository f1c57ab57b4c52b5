"""The path of one batch read, followed call by call: the Spark reader hands an input
partition to the one module that reads it, which calls each layer below it and comes back.

A profile hook (``sys.setprofile``) sees every call and return while
``EosKafkaBatchReader.read`` reads one input partition of a real topic. A *stop* is a stay
in one module of the package; a module below the source counts once per entry from the
source, whatever it calls in turn (the wire's connection and bootstrap, the records'
header parser), so the count follows the read's own structure, not the inside of the
layers it uses. Three records in one committed transaction: one data batch and one
marker, read in one or two Fetch responses.
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from eos_kafka_source.datasource import EosKafkaDataSource
from eos_kafka_source.source.schema import kafka_schema
from tests.kafka_helpers import TxnWriter, create_topic

PACKAGE, SOURCE = "eos_kafka_source", "eos_kafka_source.source"
#: Measured on Kafka 4.4 and Tansu when the read path became one module under the readers
#: (54 on Tansu before, through the stream reader and the sink's timings).
MAX_STOPS = 48


def _ours(frame: FrameType | None) -> list[str]:
    """The package's modules on the stack, innermost first."""
    modules = []
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name == PACKAGE or name.startswith(PACKAGE + "."):
            modules.append(name)
        frame = frame.f_back
    return modules


def _stop(frame: FrameType | None) -> str | None:
    """Where the read stands, seen from the source: a source module, or the module below it
    that the source last entered."""
    modules = _ours(frame)
    for i, name in enumerate(modules):
        if name.startswith(SOURCE + "."):
            return modules[i - 1] if i else name
    return modules[-1] if modules else None


def stops_of(read: Callable[[], Any]) -> list[str]:
    """The modules ``read`` stops in, in order (a stay of several calls counted once)."""
    stops: list[str] = []

    def hook(frame: FrameType, event: str, _arg: object) -> None:
        if event not in ("call", "return"):
            return
        where = _stop(frame if event == "call" else frame.f_back)
        if where is not None and (not stops or stops[-1] != where):
            stops.append(where)

    sys.setprofile(hook)
    try:
        read()
    finally:
        sys.setprofile(None)
    return [s[len(PACKAGE) + 1:] for s in stops]


def test_a_batch_read_goes_down_from_the_reader_in_one_module(bootstrap: str,
                                                             unique: str) -> None:
    create_topic(bootstrap, unique)
    with TxnWriter(bootstrap, f"{unique}-w") as writer:
        writer.committed(unique, [b"a", b"b", b"c"], partition=0)
    reader = EosKafkaDataSource({"kafka.bootstrap.servers": bootstrap, "subscribe": unique,
                                 "maxPartitions": "1"}).reader(kafka_schema(False))
    (partition,) = reader.partitions()
    # As on an executor: an unpickled reader and partition.
    reader, partition = pickle.loads(pickle.dumps((reader, partition)))
    rows: list[int] = []
    path = stops_of(lambda: rows.extend(b.num_rows for b in reader.read(partition)))
    assert sum(rows) == 3
    shown = " > ".join(path)
    assert {s for s in path if s.startswith("source.")} == {
        "source.batch_reader", "source.partition_reader"}, shown
    assert not [s for s in path if s.startswith(("datasource", "sink."))], shown
    assert len(path) <= MAX_STOPS, f"{len(path)} stops: {shown}"
