"""A commit, followed call by call from ``DriverProtocol.commit``, stops in few modules.

The driver's orchestration (protocol, the keepers, the write policy, outcomes, abort) hands
work to one module at a time. A *stop* is a visit: consecutive calls from one function of
those modules into one other ``eos_kafka_source.sink`` module (timings left out), traced
with ``sys.setprofile`` over the happy path of a streaming commit with a decision log and
Spark's checkpoint (two tasks). 23 stops in 12 modules before the roles were composed;
the ceiling keeps a reader's path short.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

from tests.kafka_helpers import create_topic
from tests.sink_harness import Harness

_DRIVER = "eos_kafka_source.sink.driver."
ORCHESTRATION = {_DRIVER + m for m in ("protocol", "logged", "unlogged", "keeping",
                                       "write_policy", "outcomes", "aborting", "config")}
MAX_STOPS = 20


def _stops(run: Any) -> list[tuple[str, str, str]]:
    calls: dict[tuple[str, str, int, str, str], None] = {}

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        code = frame.f_code
        if code.co_flags & 0x20 and frame.f_lineno != code.co_firstlineno:
            return  # a generator resumed (a with-statement's exit), not a new call
        caller = frame.f_back
        while caller is not None and (caller.f_code.co_name.startswith("<")
                                      or caller.f_globals.get("__name__") == "contextlib"):
            caller = caller.f_back  # comprehensions and with-statements: their function
        if caller is None:
            return
        source = caller.f_globals.get("__name__", "")
        target = frame.f_globals.get("__name__", "")
        if (source in ORCHESTRATION and target != source and not target.endswith("timings")
                and target.startswith("eos_kafka_source.sink.")):
            calls.setdefault((source, caller.f_code.co_name, caller.f_lineno, target,
                              code.co_name), None)

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    visits: list[tuple[str, str, str]] = []
    for source, function, _, target, _ in calls:
        if not visits or visits[-1] != (source, function, target):
            visits.append((source, function, target))
    return visits


def test_a_commit_stops_at_most_twenty_times(bootstrap: str, unique: str,
                                             tmp_path: Path) -> None:
    create_topic(bootstrap, unique, partitions=2)
    spark = tmp_path / "spark"
    (spark / "offsets").mkdir(parents=True)
    (spark / "offsets" / "0").write_text('v1\n{}\n{"t":{"0":5}}\n')
    sink = Harness(bootstrap, unique, unique, tmp_path / "ckpt", claim=True, checkpoint=spark)
    sink.driver.prepare(new_run=True)
    handoffs = [sink.task(p, [b"a", b"b"]) for p in range(2)]
    visits = _stops(lambda: sink.driver.commit(0, handoffs, tasks=2))
    assert sink.log is not None and sink.log.get(0) is not None and sink.log.get(0).done
    path = "\n".join(f"{s.rsplit('.', 1)[1]}.{f} -> {t.split('sink.')[1]}" for s, f, t in visits)
    assert len(visits) <= MAX_STOPS, f"{len(visits)} stops:\n{path}"
