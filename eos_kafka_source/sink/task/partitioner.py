"""Which Kafka partition each input row goes to, decided column-wise where possible.

Rows with a ``partition`` go there; rows with a key go where Kafka's default
partitioner puts them (murmur2 of the key, so keyed data lands where the Java
client would put it); rows without either are spread in contiguous chunks, one
partition per chunk (Kafka's "sticky" partitioner), which keeps the hot path free
of per-row Python work. Runs on: executors, inside ``write()``. No network.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence

import pyarrow as pa
from kafka.partitioner.default import murmur2

from ...errors import TopicNotFoundError
from .columns import Rows

TopicPartition = tuple[str, int]
#: A selection of rows: a contiguous slice, or explicit row indices.
Selection = slice | list[int]

_MEMO_LIMIT = 1 << 16


class Router:
    """Routes the rows of Arrow batches to (topic, partition) selections."""

    def __init__(self, topic: str | None, partitions_of: Callable[[str], int], start: int,
                 refresh: Callable[[str], int] | None = None) -> None:
        self.topic = topic
        self.partitions_of = partitions_of
        #: Asks the broker for a topic's partition count again (the one known may be an
        #: earlier task's, kept by its worker: wire/known.py), before a row asking for a
        #: partition past it is refused.
        self.refresh = refresh
        self._sticky = itertools.count(start)
        self._memo: dict[tuple[bytes, int], int] = {}

    def route(self, rows: Rows, chunk: int,
              topic: str | None = None) -> Iterator[tuple[TopicPartition, Selection]]:
        """``topic``, when given, is every row's (the dead letters' topic), over both the
        ``topic`` option and a ``topic`` column."""
        for name, selection in self._by_topic(rows, topic):
            yield from self._by_partition(name, rows, selection, chunk)

    def _by_topic(self, rows: Rows, topic: str | None) -> Iterator[tuple[str, Selection]]:
        n = len(rows)
        if (topic or self.topic) is not None:
            yield (topic or self.topic), slice(0, n)  # type: ignore[misc]
            return
        assert rows.topics is not None  # columns.validate() requires one or the other
        distinct = set(rows.topics)
        if None in distinct or "" in distinct:
            raise TopicNotFoundError(
                "a row has a null or empty 'topic' and no 'topic' option is set; set the "
                "option or fill the column"
            )
        if len(distinct) == 1:
            yield rows.topics[0], slice(0, n)  # type: ignore[misc]
            return
        groups: dict[str, list[int]] = {}
        for i, topic in enumerate(rows.topics):
            groups.setdefault(topic, []).append(i)  # type: ignore[arg-type]
        yield from groups.items()

    def _by_partition(self, topic: str, rows: Rows, selection: Selection,
                      chunk: int) -> Iterator[tuple[TopicPartition, Selection]]:
        count = self.partitions_of(topic)
        indices = range(len(rows))[selection] if isinstance(selection, slice) else selection
        fallback = next(self._sticky) % count  # rows with neither key nor partition
        if rows.partitions is not None:
            groups = self._by_column(topic, rows, indices, count, fallback)
            if groups is None:
                # Partitions were added: route this topic's rows again (none of them was
                # handed out yet) with the new count.
                yield from self._by_partition(topic, rows, selection, chunk)
                return
        elif rows.keys is not None and any(k is not None for k in rows.keys):
            groups = self._by_key(rows, indices, count, fallback)
        else:
            yield from self._chunks(topic, selection, chunk, count, fallback)
            return
        for p, rows_of in groups.items():
            yield (topic, p), rows_of

    def _by_column(self, topic: str, rows: Rows, indices: Sequence[int], count: int,
                   fallback: int) -> dict[int, list[int]] | None:
        """Rows grouped by their ``partition`` (null: by key); None when a row asks for a
        partition past ``count`` and the topic has more now. One past any count raises."""
        assert rows.partitions is not None
        groups: dict[int, list[int]] = {}
        for i in indices:
            p = rows.partitions[i]
            if p is None:
                p = self._keyed(rows, i, count, fallback)
            elif not 0 <= p < count:
                if self.refresh is not None and self.refresh(topic) > count:
                    return None
                raise TopicNotFoundError(
                    f"a row asks for partition {p} of topic {topic}, which has {count} "
                    f"partitions (0..{count - 1})"
                )
            groups.setdefault(p, []).append(i)
        return groups

    def _by_key(self, rows: Rows, indices: Sequence[int], count: int,
                fallback: int) -> dict[int, list[int]]:
        """Rows grouped where Kafka's default partitioner puts their keys."""
        groups: dict[int, list[int]] = {}
        for i in indices:
            groups.setdefault(self._keyed(rows, i, count, fallback), []).append(i)
        return groups

    def _chunks(self, topic: str, selection: Selection, chunk: int, count: int,
                fallback: int) -> Iterator[tuple[TopicPartition, Selection]]:
        """No keys, no partitions: contiguous chunks, one partition each (sticky)."""
        partition = fallback
        if isinstance(selection, slice):
            for begin in range(selection.start, selection.stop, chunk):
                yield (topic, partition), slice(begin, min(begin + chunk, selection.stop))
                partition = next(self._sticky) % count
        else:
            for begin in range(0, len(selection), chunk):
                yield (topic, partition), selection[begin:begin + chunk]
                partition = next(self._sticky) % count

    def _keyed(self, rows: Rows, i: int, count: int, fallback: int) -> int:
        key = rows.keys[i] if rows.keys is not None else None
        if key is None:
            return fallback
        memo = (key, count)
        p = self._memo.get(memo)
        if p is None:
            p = (murmur2(key) & 0x7FFFFFFF) % count
            if len(self._memo) < _MEMO_LIMIT:
                self._memo[memo] = p
        return p


def take(column: list, selection: Selection) -> list:
    """The selected entries of a column (a list slice, or a gather)."""
    if isinstance(selection, slice):
        return column[selection]
    return [column[i] for i in selection]


def take_arrow(column: pa.Array, selection: Selection) -> pa.Array:
    """The selected rows of an Arrow column: a zero-copy slice, or a gather."""
    if isinstance(selection, slice):
        return column.slice(selection.start, selection.stop - selection.start)
    return column.take(pa.array(selection, pa.int64()))
