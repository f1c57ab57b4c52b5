"""Row routing of the sink: Kafka's default partitioner for keys, sticky chunks otherwise."""

from __future__ import annotations

import pytest

from eos_kafka_source.errors import TopicNotFoundError
from eos_kafka_source.sink.task.columns import Rows
from eos_kafka_source.sink.task.partitioner import Router, take


def _rows(n: int, *, keys=None, topics=None, partitions=None) -> Rows:
    return Rows(values=[f"v{i}".encode() for i in range(n)], keys=keys, topics=topics,
                partitions=partitions, headers=None, timestamps_ms=None)


def _routed(router: Router, rows: Rows, chunk: int = 4) -> dict[tuple[str, int], list[int]]:
    out: dict[tuple[str, int], list[int]] = {}
    for tp, sel in router.route(rows, chunk):
        out.setdefault(tp, []).extend(take(list(range(len(rows))), sel))
    return out


#: org.apache.kafka.common.utils.UtilsTest#testMurmur2: Java's murmur2 of these keys.
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("partitions", [1, 3, 7, 64])
def test_keys_go_where_the_java_clients_default_partitioner_puts_them(partitions: int) -> None:
    keys = list(JAVA_MURMUR2) * 3
    routed = _routed(Router("t", lambda _: partitions, start=0), _rows(len(keys), keys=keys))
    for (_, partition), rows in routed.items():
        for i in rows:
            assert partition == (JAVA_MURMUR2[keys[i]] & 0x7FFFFFFF) % partitions


def test_rows_without_keys_go_in_contiguous_chunks_covering_every_row_once() -> None:
    routed = _routed(Router("t", lambda _: 3, start=5), _rows(10), chunk=4)
    assert sorted(i for rows in routed.values() for i in rows) == list(range(10))
    assert sorted(map(len, routed.values())) == [2, 4, 4]
    assert all(rows == list(range(rows[0], rows[0] + len(rows))) for rows in routed.values())


def test_partition_column_wins_and_is_checked() -> None:
    router = Router("t", lambda _: 2, start=0)
    routed = _routed(router, _rows(4, partitions=[1, 0, 1, None]))
    assert routed[("t", 1)][:2] == [0, 2] and 1 in routed[("t", 0)]
    with pytest.raises(TopicNotFoundError, match="partition 5 of topic t, which has 2"):
        _routed(router, _rows(1, partitions=[5]))


def test_a_partition_past_a_kept_count_asks_the_broker_again_before_refusing() -> None:
    """The count a task starts from may be an earlier task's (wire/known.py): partitions
    added since must not make a row's ``partition`` fail; one past the fresh count still
    does. Without the refresh, partition 3 of a topic grown from 2 to 4 was refused."""
    count = {"t": 2}

    def refresh(topic: str) -> int:
        count[topic] = 4  # the broker's answer: partitions were added
        return count[topic]

    router = Router("t", lambda t: count[t], start=0, refresh=refresh)
    routed = _routed(router, _rows(3, partitions=[3, 0, None], keys=[None, None, b"abc"]))
    # b"abc" by the new count (murmur2 % 4 = 3; by the old one it was partition 1)
    assert routed == {("t", 3): [0, 2], ("t", 0): [1]}
    with pytest.raises(TopicNotFoundError, match="partition 9 of topic t, which has 4"):
        _routed(router, _rows(1, partitions=[9]))


def test_topic_column_groups_rows_and_a_null_topic_is_an_error() -> None:
    router = Router(None, lambda _: 1, start=0)
    routed = _routed(router, _rows(4, topics=["a", "b", "a", "b"]))
    assert routed == {("a", 0): [0, 2], ("b", 0): [1, 3]}
    with pytest.raises(TopicNotFoundError, match="null or empty 'topic'"):
        _routed(router, _rows(2, topics=["a", None]))


def test_topic_option_overrides_the_column() -> None:
    routed = _routed(Router("opt", lambda _: 1, start=0), _rows(3, topics=["x", "y", "z"]))
    assert routed == {("opt", 0): [0, 1, 2]}
