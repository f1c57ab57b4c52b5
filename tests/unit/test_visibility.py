"""visible_batches against synthetic logs, compared with a brute-force reference.

No network: a log is a list of v2 batches built with ``encode_batch`` /
``encode_control_batch`` at explicit offsets, served by an in-memory
``open_cursor`` that behaves like ``wire.LogCursor`` (it yields batches until its
position reaches ``stop``; with ``stop=None`` it serves to the log end and then
raises, as a poll that times out at the log end would).
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pytest
from kafka.record import MemoryRecords

from eos_kafka_source.errors import EosKafkaError, TimeoutError_
from eos_kafka_source.records import (
    BatchHeader,
    encode_batch,
    encode_control_batch,
    iter_batches,
)
from eos_kafka_source.visibility import visible_batches

BIG = 64 << 20
TS = 1_700_000_000_000

# A log is described by a list of entries, laid out at consecutive offsets:
#   ("T", pid, n)  transactional data batch of n records of producer pid
#   ("C", pid)     COMMIT marker of pid      ("A", pid)  ABORT marker of pid
#   ("N", n)       non-transactional data batch of n records
#   ("G", n)       n offsets removed by compaction (a gap)
Entry = tuple


@dataclass
class SyntheticLog:
    """Batches at explicit offsets plus an in-memory cursor over them."""

    batches: list[tuple[BatchHeader, memoryview]]
    high_watermark: int
    raw: dict[int, bytes]
    #: aborted transactions: (producer id, first offset, offset of the ABORT marker)
    aborted: list[tuple[int, int, int]]
    #: what happens when a cursor with stop=None runs past the log end
    at_end: str = "timeout"
    opened: list[tuple[int, int | None]] = field(default_factory=list)

    def open_cursor(
        self, offset: int, stop: int | None
    ) -> Iterator[tuple[BatchHeader, memoryview]]:
        """Like LogCursor: yield batches ending at or after ``offset`` while position < stop."""
        self.opened.append((offset, stop))
        return self._serve(offset, stop)

    def _serve(self, offset: int, stop: int | None) -> Iterator[tuple[BatchHeader, memoryview]]:
        position = offset
        for header, view in self.batches:
            if stop is not None and position >= stop:
                return
            if header.last_offset < position:
                continue
            position = header.last_offset + 1
            yield header, view
        if stop is None:
            if self.at_end == "timeout":
                raise TimeoutError_(f"synthetic log ends at {self.high_watermark}: poll timed out")
            return
        if stop > self.high_watermark:
            raise TimeoutError_(f"synthetic log ends at {self.high_watermark}, stop {stop}")

    @property
    def scanned_ahead(self) -> bool:
        return any(stop is None for _, stop in self.opened)


def build_log(entries: Sequence[Entry], at_end: str = "timeout") -> SyntheticLog:
    offset = 0
    raw: dict[int, bytes] = {}
    sequences: dict[int, int] = {}
    txn_first: dict[int, int] = {}
    aborted: list[tuple[int, int, int]] = []
    for entry in entries:
        kind = entry[0]
        if kind == "G":
            offset += entry[1]
            continue
        if kind in ("T", "N"):
            pid = entry[1] if kind == "T" else -1
            n = entry[2] if kind == "T" else entry[1]
            values = [f"{kind}{pid}@{offset + i}".encode() for i in range(n)]
            if kind == "T":
                seq = sequences.get(pid, 0)
                sequences[pid] = seq + n
                txn_first.setdefault(pid, offset)
                batch = encode_batch(
                    [None] * n, values, TS, producer_id=pid, producer_epoch=0,
                    base_sequence=seq, transactional=True, base_offset=offset,
                )  # fmt: skip
            else:
                batch = encode_batch([None] * n, values, TS, base_offset=offset)
            raw[offset] = batch
            offset += n
        elif kind in ("C", "A"):
            pid = entry[1]
            first = txn_first.pop(pid, None)
            if kind == "A" and first is not None:
                aborted.append((pid, first, offset))
            raw[offset] = encode_control_batch(
                commit=kind == "C", producer_id=pid, producer_epoch=0,
                base_offset=offset, timestamp_ms=TS,
            )  # fmt: skip
            offset += 1
        else:
            raise ValueError(f"unknown entry {entry!r}")
    batches = [pair for b in raw.values() for pair in iter_batches(b)]
    return SyntheticLog(batches, offset, raw, aborted, at_end)


def reference(log: SyntheticLog, start: int, end: int) -> list[int] | None:
    """Visible data offsets in [start, end) by brute force; None if any is undecidable."""
    visible: list[int] = []
    for i, (header, _) in enumerate(log.batches):
        if header.is_control:
            continue
        offsets = [o for o in range(header.base_offset, header.last_offset + 1) if start <= o < end]
        if not offsets:
            continue
        if not header.is_transactional:
            visible.extend(offsets)
            continue
        fate = next(
            (
                bool(_is_commit(v))
                for h, v in log.batches[i + 1 :]
                if h.is_control and h.producer_id == header.producer_id
            ),
            None,
        )
        if fate is None:
            return None
        if fate:
            visible.extend(offsets)
    return visible


def _is_commit(view: memoryview) -> bool:
    """Decode a marker with kafka-python, independently of control_is_commit."""
    (batch,) = list(MemoryRecords(bytes(view)))
    (record,) = list(batch)
    _version, control_type = struct.unpack(">hh", record.key)
    return control_type == 1


def run(
    log: SyntheticLog, start: int, end: int, *, max_buffer_bytes: int = BIG, hints: bool = False
) -> list[tuple[BatchHeader, memoryview]]:
    # What a broker's Fetch from ``start`` lists: aborted transactions whose ABORT marker lies
    # at or after the fetch offset (Kafka's collectAbortedTransactions), as (pid, first offset).
    pending = [(pid, first) for pid, first, marker in log.aborted if marker >= start]
    if not hints:
        pending = []

    def abort_hints() -> list[tuple[int, int]]:
        out = list(pending)
        pending.clear()
        return out

    return list(visible_batches(
        log.open_cursor, start, end, max_buffer_bytes=max_buffer_bytes,
        abort_hints=abort_hints if hints else None,
    ))  # fmt: skip


def visible_offsets(log: SyntheticLog, out: list[tuple[BatchHeader, memoryview]],
                    start: int, end: int) -> list[int]:
    """Offsets in [start, end) the caller would emit, checking the stream's invariants."""
    bases = [h.base_offset for h, _ in out]
    assert bases == sorted(set(bases)), f"batches out of order or repeated: {bases}"
    offsets: list[int] = []
    for header, view in out:
        assert not header.is_control, f"control batch at {header.base_offset} yielded"
        assert header.base_offset < end and header.last_offset >= start
        assert bytes(view) == log.raw[header.base_offset]
        offsets.extend(o for o in range(header.base_offset, header.last_offset + 1)
                       if start <= o < end)
    return offsets


def check(log: SyntheticLog, start: int, end: int, **kwargs: object) -> list[int] | None:
    """Assert visible_batches agrees with the reference; returns the visible offsets."""
    expected = reference(log, start, end)
    if expected is None:
        log.opened.clear()
        with pytest.raises(EosKafkaError):
            run(log, start, end, **kwargs)  # type: ignore[arg-type]
        return None
    out = run(log, start, end, **kwargs)  # type: ignore[arg-type]
    assert visible_offsets(log, out, start, end) == expected, (start, end, kwargs)
    return expected


# ---------------------------------------------------------------------------------------------
# Table-driven cases: (id, entries, start, end, expected visible offsets or None = "error")
# ---------------------------------------------------------------------------------------------

T, C, A, N, G = "T", "C", "A", "N", "G"
HW = -1  #: as a range end: the log's high watermark

CASES: list[tuple[str, list[Entry], int, int, list[int] | None]] = [
    # 0-1 p1 | 2 C1 | 3-4 p2 | 5 C2
    ("first-offset-is-marker", [(T, 1, 2), (C, 1), (T, 2, 2), (C, 2)], 2, 5, [3, 4]),
    ("last-offset-is-marker", [(T, 1, 2), (C, 1), (T, 2, 2), (C, 2)], 0, 3, [0, 1]),
    ("range-ends-before-marker", [(T, 1, 2), (C, 1), (T, 2, 2), (C, 2)], 0, 5, [0, 1, 3, 4]),
    # 0 p1 | 1 C1 | 2 A2 | 3 C3 | 4 N
    ("every-offset-is-marker", [(T, 1, 1), (C, 1), (A, 2), (C, 3), (N, 1)], 1, 4, []),
    # 0-1 p1 | 2 A1 | 3-4 p2 | 5 C2
    ("first-offset-aborted", [(T, 1, 2), (A, 1), (T, 2, 2), (C, 2)], 0, 6, [3, 4]),
    ("last-offset-aborted", [(T, 2, 2), (C, 2), (T, 1, 2), (A, 1)], 0, 4, [0, 1]),
    ("every-offset-aborted", [(T, 1, 3), (A, 1)], 0, 3, []),
    ("no-visible-record", [(T, 1, 2), (A, 1), (T, 2, 1), (A, 2), (C, 3)], 0, 6, []),
    # marker lies after the range end: the reader must read ahead to it
    ("marker-after-range-end", [(T, 1, 3), (N, 1), (T, 2, 2), (C, 1), (A, 2)], 0, 6, [0, 1, 2, 3]),
    ("marker-far-after-range-end",
     [(T, 1, 1)] + [(T, 2, 1), (A, 2)] * 5 + [(N, 2), (C, 1)], 0, 1, [0]),
    # 0-4 p1 straddles both bounds
    ("batch-straddles-bounds", [(T, 1, 5), (C, 1)], 2, 4, [2, 3]),
    ("many-producers-interleaved",
     [(T, 1, 2), (T, 2, 1), (T, 3, 3), (T, 1, 1), (C, 1), (T, 4, 2), (A, 2), (T, 3, 1),
      (T, 1, 2), (C, 3), (T, 5, 1), (A, 4), (T, 2, 2), (A, 1), (C, 5), (C, 2)],
     0, HW, None),  # expected from the reference
    ("same-producer-aborted-then-committed",
     [(T, 1, 2), (A, 1), (T, 1, 2), (C, 1), (T, 1, 1), (A, 1), (T, 1, 1), (C, 1)], 0, HW, None),
    # non-transactional batches wait behind an undecided transactional one, order kept
    ("non-transactional-mixed",
     [(N, 2), (T, 1, 2), (N, 1), (A, 1), (N, 1), (T, 1, 1), (N, 2), (C, 1), (N, 1)], 0, 12,
     [0, 1, 4, 6, 7, 8, 9, 11]),
    # 0-1 p1 | gap 2-4 | 5 C1 | gap 6-7 | 8-9 N | gap 10 | 11 p2 | gap 12-15 | 16 A2
    ("compacted-gaps",
     [(T, 1, 2), (G, 3), (C, 1), (G, 2), (N, 2), (G, 1), (T, 2, 1), (G, 4), (A, 2)],
     0, 17, [0, 1, 8, 9]),
    ("range-inside-a-gap", [(N, 1), (G, 5), (N, 1)], 2, 4, []),
    ("range-starts-and-ends-in-gaps",
     [(N, 1), (G, 2), (T, 1, 2), (G, 2), (C, 1), (G, 3), (N, 1)], 2, 9, [3, 4]),
    ("trailing-gap", [(T, 1, 1), (C, 1), (N, 1), (G, 4)], 0, 7, [0, 2]),
    ("empty-range", [(T, 1, 1), (C, 1)], 1, 1, []),
    ("plain-only", [(N, 3), (N, 2)], 1, 4, [1, 2, 3]),
]


@pytest.mark.parametrize("hints", [False, True], ids=["markers", "markers+hints"])
@pytest.mark.parametrize("max_buffer_bytes", [BIG, 1, 150], ids=["big-buffer", "1B", "150B"])
@pytest.mark.parametrize(("entries", "start", "end", "expected"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_table(entries: list[Entry], start: int, end: int, expected: list[int] | None,
               max_buffer_bytes: int, hints: bool) -> None:
    log = build_log(entries)
    end = log.high_watermark if end == HW else end
    got = check(log, start, end, max_buffer_bytes=max_buffer_bytes, hints=hints)
    if expected is not None:
        assert got == expected


def test_table_cases_are_meaningful() -> None:
    """Guard the reference itself on hand-checked cases with an explicit expectation."""
    for name, entries, start, end, expected in CASES:
        if expected is not None:
            log = build_log(entries)
            end = log.high_watermark if end == HW else end
            assert reference(log, start, end) == expected, name


def test_read_ahead_happens_only_when_needed() -> None:
    log = build_log([(T, 1, 2), (C, 1), (N, 1)])
    run(log, 0, 3)
    assert not log.scanned_ahead  # the marker lies inside the range
    log.opened.clear()
    assert [h.base_offset for h, _ in run(log, 0, 2)] == [0]
    assert log.scanned_ahead  # the marker at 2 lies after the range end


def test_scan_ahead_stops_at_the_marker() -> None:
    """Reading ahead must not run to the log end (where a real cursor polls and times out)."""
    log = build_log([(T, 1, 1), (C, 1), (T, 2, 1)], at_end="timeout")  # p2 never ends
    assert visible_offsets(log, run(log, 0, 1), 0, 1) == [0]
    assert visible_offsets(log, run(log, 0, 1, max_buffer_bytes=1), 0, 1) == [0]


def test_tiny_buffer_scans_ahead_long_transaction() -> None:
    """A transaction longer than the buffer is resolved by reading ahead, same result."""
    entries: list[Entry] = [(T, 1, 1), (N, 1)] * 50 + [(C, 1)]
    log = build_log(entries)
    big = run(log, 0, 101)
    assert not log.scanned_ahead
    log.opened.clear()
    small = run(log, 0, 101, max_buffer_bytes=200)
    assert log.scanned_ahead
    assert [h.base_offset for h, _ in small] == [h.base_offset for h, _ in big]
    assert len(big) == 100


def test_abort_hints_decide_without_reading_ahead() -> None:
    """A broker's aborted_transactions entry settles a transaction whose marker lies ahead."""
    log = build_log([(T, 1, 2), (N, 1), (A, 1)])
    out = run(log, 0, 3, hints=True)
    assert [h.base_offset for h, _ in out] == [2]
    assert not log.scanned_ahead


def test_stale_abort_hint_does_not_hide_a_later_commit() -> None:
    """A hint for an older aborted transaction says nothing about the producer's next one."""
    # 0 p1 | 1 A1 | 2 p1 | 3 C1 : hint (1, 0); the batch at 2 is committed.
    log = build_log([(T, 1, 1), (A, 1), (T, 1, 1), (C, 1)])
    assert log.aborted == [(1, 0, 1)]
    for buffer in (BIG, 1):
        out = run(log, 0, 4, hints=True, max_buffer_bytes=buffer)
        assert [h.base_offset for h, _ in out] == [2]


def test_read_uncommitted_drops_only_markers() -> None:
    log = build_log([(T, 1, 2), (A, 1), (N, 1), (T, 2, 1)])
    out = list(visible_batches(log.open_cursor, 0, 5, read_committed=False))
    assert [h.base_offset for h, _ in out] == [0, 3, 4]
    assert not log.scanned_ahead


@pytest.mark.parametrize("at_end", ["timeout", "end"])
def test_unresolved_transaction_raises_clear_error(at_end: str) -> None:
    # 0-1 p1 | 2 C1 | 3-4 p7 open (no marker anywhere)
    log = build_log([(T, 1, 2), (C, 1), (T, 7, 2)], at_end=at_end)
    with pytest.raises(EosKafkaError) as info:
        run(log, 0, 5)
    if at_end == "end":
        text = str(info.value)
        assert "producer 7" in text and "offset 3" in text and "last stable offset" in text
    else:
        assert isinstance(info.value, TimeoutError_)
    # The part of the log before the open transaction is readable.
    assert visible_offsets(log, run(log, 0, 3), 0, 3) == [0, 1]


def test_unresolved_behind_plain_records_still_raises() -> None:
    log = build_log([(T, 1, 1), (N, 3)], at_end="end")
    with pytest.raises(EosKafkaError, match="producer 1"):
        run(log, 0, 4, max_buffer_bytes=1)


def _random_log(rng: random.Random, producers: int, steps: int, close_all: bool) -> list[Entry]:
    entries: list[Entry] = []
    open_pids: set[int] = set()
    for _ in range(steps):
        roll = rng.random()
        if roll < 0.45:
            pid = rng.randint(1, producers)
            entries.append((T, pid, rng.randint(1, 3)))
            open_pids.add(pid)
        elif roll < 0.75 and open_pids:
            pid = rng.choice(sorted(open_pids))
            open_pids.discard(pid)
            entries.append((rng.choice([C, A]), pid))
        elif roll < 0.9:
            entries.append((N, rng.randint(1, 2)))
        else:
            entries.append((G, rng.randint(1, 3)))
    if close_all:
        entries.extend((rng.choice([C, A]), pid) for pid in sorted(open_pids))
    return entries


@pytest.mark.parametrize("seed", range(12))
def test_random_logs_every_range(seed: int) -> None:
    """Every [start, end) of random multi-producer logs, big and tiny buffers, with hints."""
    rng = random.Random(seed)
    entries = _random_log(rng, producers=4, steps=18, close_all=seed % 3 != 0)
    log = build_log(entries, at_end=rng.choice(["timeout", "end"]))
    for start in range(log.high_watermark + 1):
        for end in range(start, log.high_watermark + 1):
            for buffer in (BIG, 1):
                for hints in (False, True):
                    check(log, start, end, max_buffer_bytes=buffer, hints=hints)
