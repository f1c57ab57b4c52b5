"""read_committed, decided by the reader itself from the control markers in the log.

Tansu never fills Fetch's ``aborted_transactions`` list, so a record's fate is
taken from its producer's next COMMIT/ABORT marker (the broker's list is used
as a hint when a broker gives one). A marker can lie after the range being
read, so when the reader cannot decide the head of its queue it scans ahead,
reading only batch headers, until the producer's marker turns up. Batches wait
in a queue bounded by ``max_buffer_bytes`` (32 MiB: a task reading one 10M-record
transaction peaks at ~225 MB RSS, ~265 MB with 64 MiB, at the same speed); scanning
ahead drains it, so memory stays bounded however long a transaction is.

Network-free: it consumes ``(BatchHeader, memoryview)`` pairs from cursors.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable, Iterable, Iterator

from .records import BatchHeader, control_is_commit

Batch = tuple[BatchHeader, memoryview]
#: open_cursor(offset, stop) -> batches in offset order from ``offset`` until ``stop``
#: (exclusive), or onward past the range end while polling at the log end when ``stop`` is None.
OpenCursor = Callable[[int, int | None], Iterable[Batch]]


class FateBook:
    """Known COMMIT/ABORT markers per producer id, plus the broker's abort hints."""

    def __init__(self) -> None:
        self._markers: dict[int, list[tuple[int, bool]]] = {}
        self._abort_hints: dict[int, list[int]] = {}

    def add_marker(self, producer_id: int, offset: int, committed: bool) -> None:
        markers = self._markers.setdefault(producer_id, [])
        if markers and markers[-1][0] >= offset:
            if any(o == offset for o, _ in markers):
                return  # seen by both the main cursor and a scan-ahead
            bisect.insort(markers, (offset, committed))
            return
        markers.append((offset, committed))

    def add_abort_hint(self, producer_id: int, first_offset: int) -> None:
        hints = self._abort_hints.setdefault(producer_id, [])
        if first_offset not in hints:
            bisect.insort(hints, first_offset)

    def fate(self, producer_id: int, offset: int) -> bool | None:
        """True committed, False aborted, None not known yet, for a batch at ``offset``."""
        markers = self._markers.get(producer_id, ())
        i = bisect.bisect_right(markers, (offset, True))
        if i < len(markers):
            return markers[i][1]
        hints = self._abort_hints.get(producer_id)
        if hints:
            j = bisect.bisect_right(hints, offset) - 1
            prior_marker = markers[-1][0] if markers else -1
            if j >= 0 and hints[j] > prior_marker:
                return False
        return None

    def forget_before(self, offset: int) -> None:
        """Drop markers no batch at or after ``offset`` can need (keeps memory flat)."""
        for pid in list(self._markers):
            markers = self._markers[pid]
            keep = bisect.bisect_left(markers, (offset, False))
            if keep:
                # Abort hints older than a forgotten marker belong to transactions that marker
                # (or an earlier one) ended; without it fate() would apply them to the
                # producer's next transaction.
                hints = self._abort_hints.get(pid)
                if hints:
                    del hints[: bisect.bisect_left(hints, markers[keep - 1][0])]
                    if not hints:
                        del self._abort_hints[pid]
                del markers[:keep]
            if not markers:
                del self._markers[pid]


def visible_batches(
    open_cursor: OpenCursor,
    start: int,
    end: int,
    *,
    read_committed: bool = True,
    max_buffer_bytes: int = 32 << 20,
    abort_hints: Callable[[], Iterable[tuple[int, int]]] | None = None,
) -> Iterator[Batch]:
    """Data batches overlapping ``[start, end)`` whose records a reader may see.

    Yields in offset order. The caller still filters records to ``[start, end)``
    (a batch can straddle either bound). With ``read_committed=False`` only
    control batches are dropped. ``abort_hints()`` returns the broker's
    (producer id, first offset) aborted-transaction entries seen since its last call.
    """
    main = iter(open_cursor(start, end))
    if not read_committed:
        for header, view in main:
            if header.base_offset >= end:
                return
            if not header.is_control:
                yield header, view
        return

    fates = FateBook()
    queue: deque[Batch] = deque()
    queued_bytes = 0
    scan: _ScanAhead | None = None
    main_position = start

    def drain() -> Iterator[Batch]:
        nonlocal queued_bytes
        while queue:
            header, view = queue[0]
            if header.is_control:
                pass
            elif header.is_transactional:
                fate = fates.fate(header.producer_id, header.base_offset)
                if fate is None:
                    return
                if fate:
                    yield header, view
            else:
                yield header, view
            queue.popleft()
            queued_bytes -= len(view)

    def resolve_head() -> None:
        nonlocal scan
        wanted = {
            h.producer_id for h, _ in queue
            if h.is_transactional and not h.is_control
            and fates.fate(h.producer_id, h.base_offset) is None
        }
        if scan is None or scan.position < main_position:
            scan = _ScanAhead(open_cursor, main_position)
        scan.until_resolved(fates, wanted, queue)

    for header, view in main:
        if header.base_offset >= end:
            break
        main_position = header.last_offset + 1
        if header.is_control:
            fates.add_marker(header.producer_id, header.base_offset, control_is_commit(view))
        queue.append((header, view))
        queued_bytes += len(view)
        if abort_hints is not None:
            for pid, first in abort_hints():
                fates.add_abort_hint(pid, first)
        yield from drain()
        if queued_bytes > max_buffer_bytes:
            resolve_head()
            yield from drain()
        if not queue:
            fates.forget_before(main_position)
    if queue:
        resolve_head()
        yield from drain()
    if queue:  # until_resolved raises before this can happen; keep the invariant explicit
        head = queue[0][0]
        raise AssertionError(f"unresolved transaction at offset {head.base_offset}")


class _ScanAhead:
    """A header-only cursor running ahead of the main one to find markers."""

    def __init__(self, open_cursor: OpenCursor, position: int) -> None:
        self._batches = iter(open_cursor(position, None))
        self.position = position

    def until_resolved(self, fates: FateBook, wanted: set[int], queue: deque[Batch]) -> None:
        def unresolved() -> bool:
            return any(
                fates.fate(h.producer_id, h.base_offset) is None
                for h, _ in queue
                if h.is_transactional and not h.is_control and h.producer_id in wanted
            )

        while unresolved():
            try:
                header, view = next(self._batches)
            except StopIteration:
                head = next(h for h, _ in queue if h.is_transactional and not h.is_control)
                raise _unresolved(head, self.position) from None
            self.position = header.last_offset + 1
            if header.is_control:
                fates.add_marker(header.producer_id, header.base_offset, control_is_commit(view))


def _unresolved(head: BatchHeader, position: int) -> Exception:
    from .errors import EosKafkaError

    return EosKafkaError(
        f"the transaction of producer {head.producer_id} that wrote offset {head.base_offset} "
        f"has no COMMIT/ABORT marker up to offset {position}; a read_committed range must end "
        "at or below the last stable offset"
    )
