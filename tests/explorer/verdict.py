"""The explorer's verdict, from the outside: the raw log resolved by its markers
(tests/oracle.py) after every sequence, and Kafka's own tools once for every sequence that
held (the Java read_committed consumer agrees record for record; ``kafka-transactions
list`` shows nothing open).

After a sequence has settled (the query restarted and committed two batches), each batch
the checkpoint holds must be in the output exactly once, row for row; a batch that Spark
planned but the checkpoint no longer names (rewound, then planned over another range)
all or nothing, never twice; no other row (a zombie's, a copy's); nothing open. A batch the
sink reported LOST may miss rows, never repeat them.
"""

from __future__ import annotations

import re
from collections import Counter

from tests.crash_driver import batch_rows
from tests.explorer.world import World, tag
from tests.oracle import assert_no_open_transactions, committed_view
from tests.sink_harness import Harness, open_transactions_of


def judge(world: World) -> list[str]:
    """What is wrong with the output (empty: exactly once); each problem starts with its
    kind: duplicates, missing, partial, unexpected, open."""
    topic = world.name
    try:
        got = Harness(world.cluster.bootstrap, topic, topic, None).committed()
    except AssertionError as exc:
        return [f"open: {str(exc).splitlines()[0]}"]
    problems = []
    final = world.final()
    wanted: Counter[bytes] = Counter()
    for batch, shift in sorted(world.planned):
        rows = batch_rows(topic, tag(shift), batch)
        wanted += rows
        seen = Counter(got[v] for v in rows)
        what = f"batch {batch} ({tag(shift)})"
        if any(n > 1 for n in seen):
            twice = sum(k for n, k in seen.items() if n > 1)
            problems.append(f"duplicates: {what}: {twice} of {len(rows)} rows more than once")
        elif batch in world.lost:
            continue
        elif (batch, shift) in final and seen[0]:
            problems.append(f"missing: {what}: {seen[0]} of {len(rows)} rows")
        elif (batch, shift) not in final and seen[0] and seen[1]:
            problems.append(f"partial: {what} (superseded): {seen[1]} of {len(rows)} rows")
    extra = got - Counter({v: 10**6 for v in wanted})
    if extra:
        sample = ", ".join(sorted(v.decode(errors="replace") for v in extra)[:3])
        problems.append(f"unexpected: {sum(extra.values())} rows ({sample})")
    try:
        assert_no_open_transactions(world.cluster.bootstrap, topic)
    except AssertionError as exc:
        problems.append(f"open: {str(exc).splitlines()[0]}")
    return problems


def kinds(problems: list[str]) -> frozenset[str]:
    """A failure's signature for shrinking: which kinds of problem it showed."""
    return frozenset(p.split(":", 1)[0] for p in problems)


def kafka_tools_agree(bootstrap: str, topics: list[str], run: str) -> list[str]:
    """Kafka's Java read_committed consumer against the marker oracle, topic by topic, in
    one consumer run; then no open transaction under the run's prefix. Problems found."""
    from eos_kafka_source.apache_kafka import KafkaTools

    if not topics:
        return []
    ours = {t: sorted((p, r.offset, r.value or b"") for p, view in
                      committed_view(bootstrap, t).items() for r in view.committed)
            for t in topics}
    total = sum(len(rows) for rows in ours.values())
    pattern = "|".join(re.escape(t) for t in sorted(topics))
    java = KafkaTools(bootstrap).consume(pattern, include=True, idle_timeout_ms=3000,
                                         max_messages=total + 1)
    if len(java) < total:  # the group join on a loaded machine: once more, patiently
        java = KafkaTools(bootstrap).consume(pattern, include=True, idle_timeout_ms=30000,
                                             max_messages=total + 1)
    theirs: dict[str, list[tuple[int, int, bytes]]] = {}
    for r in java:
        theirs.setdefault(r.value.split(b"/", 1)[0].decode(errors="replace"), []).append(
            (r.partition, r.offset, r.value))
    problems = [f"{t}: Kafka's Java consumer read {len(theirs.get(t, []))} records, the "
                f"marker oracle {len(ours.get(t, []))}"
                for t in sorted(set(theirs) | set(ours))
                if sorted(theirs.get(t, [])) != ours.get(t, [])]
    still = [r["TransactionalId"] for r in open_transactions_of(bootstrap, run)
             if any(r["TransactionalId"].startswith(t) for t in topics)]
    if still:
        problems.append(f"kafka-transactions lists open: {', '.join(still[:10])}")
    return problems
