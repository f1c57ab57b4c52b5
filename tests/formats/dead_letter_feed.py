"""Shared by the dead-letter tests: an input of good and bad Avro records, and the verdict.

The input is Confluent's AvroSerializer's records (docs/formats.md's ``shop.Order``) with
records that cannot decode among them: bytes not in the wire format, and a wire-format
record naming a schema id the registry does not hold, one with headers of its own. The
verdict reads both output topics from their raw logs (tests/oracle.py, not eoskafka) and
decodes the good ones with Confluent's deserializer: every input record must be in exactly
one of the two, once, the dead letters byte for byte with their origin in Connect's headers.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

from tests.formats.spark_io import registry, value_context
from tests.formats.test_avro_spark import ORDER, order
from tests.kafka_helpers import TxnWriter, write_plain
from tests.oracle import committed_view

PREFIX = "__connect.errors."
#: A wire-format header (magic 0, then the id) naming an id no registry here hands out.
UNKNOWN_ID = b"\x00\x7f\xff\xff\xf0" + b"\x02\x04ab"


@dataclass
class Feed:
    """What was written: good order ids, and each bad record's value by (partition, offset)."""

    good: Counter[int] = field(default_factory=Counter)
    bad: dict[tuple[int, int], bytes] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.good.values()) + len(self.bad)


def _bad(i: int) -> bytes:
    return UNKNOWN_ID if i % 2 else f"not avro {i}".encode()


def feed(bootstrap: str, url: str, topic: str, *, partitions: int = 1, rounds: int = 1,
         per_round: int = 12, every: int = 4, transactional: str | None = None) -> Feed:
    """``rounds`` x ``partitions`` x ``per_round`` records, each ``every``-th bad (the first
    bad one with a header). ``transactional``: written in committed transactions by that
    transactional id, each round also leaving an aborted one (never to be read)."""
    ser = AvroSerializer(registry(url), ORDER)
    out = Feed()
    writer = TxnWriter(bootstrap, transactional) if transactional else None
    try:
        if writer is not None:
            writer.__enter__()
        n = 0
        for _ in range(rounds):
            for p in range(partitions):
                values, keys, headers, kinds = [], [], [], []
                for _ in range(per_round):
                    if n % every == every - 1:
                        values.append(_bad(n))
                        kinds.append(None)
                        headers.append([("trace", f"t{n}".encode())] if not out.bad else [])
                    else:
                        values.append(ser(order(n), value_context(topic)))
                        kinds.append(n)
                        headers.append([])
                    keys.append(f"k{n}".encode())
                    n += 1
                if writer is None:
                    metas = write_plain(bootstrap, topic, values, partition=p, keys=keys,
                                        headers=headers)
                else:
                    metas = writer.committed(topic, values, partition=p, keys=keys,
                                             headers=headers)
                    writer.aborted(topic, [b"aborted"] * 3, partition=p)
                offsets = [m.offset for m in metas]
                for offset, value, kind in zip(offsets, values, kinds, strict=True):
                    if kind is None:
                        out.bad[(p, offset)] = value
                    else:
                        out.good[kind] += 1
    finally:
        if writer is not None:
            writer.__exit__(None, None, None)
    return out


def assert_each_once(bootstrap: str, url: str, source: str, clean: str, dlq: str,
                     fed: Feed) -> None:
    """Good records (decoded with Confluent's deserializer) and dead letters (raw, with
    Connect's context headers) together are the input, each exactly once."""
    deserialize = AvroDeserializer(registry(url))
    good: Counter[int] = Counter()
    for pv in committed_view(bootstrap, clean).values():
        for rec in pv.committed:
            row = deserialize(rec.value, value_context(clean))
            assert rec.key == str(row["id"]).encode()
            good[row["id"]] += 1
    dead: Counter[tuple[int, int]] = Counter()
    for pv in committed_view(bootstrap, dlq).values():
        for rec in pv.committed:
            headers = dict(rec.headers)
            assert headers[PREFIX + "topic"] == source.encode()
            origin = (int(headers[PREFIX + "partition"]), int(headers[PREFIX + "offset"]))
            assert rec.value == fed.bad.get(origin), f"dead letter {origin}: {rec.value!r}"
            assert headers[PREFIX + "stage"] == b"VALUE_CONVERTER"
            assert headers[PREFIX + "exception.message"]
            dead[origin] += 1
    assert good == fed.good, f"good records: {sum(good.values())} of {sum(fed.good.values())}"
    assert dead == Counter(fed.bad.keys()), \
        f"dead letters: {sum(dead.values())} of {len(fed.bad)}"
    assert sum(good.values()) + sum(dead.values()) == fed.total
