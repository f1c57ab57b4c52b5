"""``--profile``: cProfile the source read, the sink task and the driver's commit once each.

Writes the top 15 lines by cumulative and by own time of each to ``profile.txt``.
Profiling slows Python-heavy code several times more than time spent waiting on the
broker, so read the shares, not the absolute seconds.
"""

from __future__ import annotations

import cProfile
import io
import pstats
from collections.abc import Callable
from pathlib import Path

from eos_kafka_source.client.config import ClientConfig

from ..common import Sizes, delete_topic, new_topic, value_batches
from . import sink, source

COMMIT_TASKS = 64


def _top(title: str, fn: Callable[[], object]) -> list[str]:
    prof = cProfile.Profile()
    prof.enable()
    try:
        fn()
    finally:
        prof.disable()
    text = []
    for order in ("cumulative", "tottime"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(order).print_stats(15)
        text += [f"== {title}: top 15 by {order} time ==", buf.getvalue().strip(), ""]
    return text


def profile(cfg: ClientConfig, ranges: list[source.Range], sizes: Sizes, path: Path) -> None:
    text = _top(f"source: read_partition, 1 partition, {sizes.source_1p:,} records",
                lambda: source.read_ours(cfg, ranges))
    data = value_batches(sizes.sink)
    topic = new_topic(cfg, "profile", sink.OUTPUT_PARTITIONS)
    eos = sink.EosSink(cfg, "profile")
    try:
        text += _top(f"sink: TaskWriter write + handoff + DriverProtocol.commit, "
                     f"{sizes.sink:,} records", lambda: eos.write(topic, data))
        with eos.wire() as wire:
            handoffs = [eos.task(wire, topic, p, sink.task_records(p, sink.OUTPUT_PARTITIONS))
                        for p in range(COMMIT_TASKS)]
        text += _top(f"driver: DriverProtocol.commit of {COMMIT_TASKS} tasks × "
                     f"{sink.OUTPUT_PARTITIONS} partitions",
                     lambda: eos.commit(handoffs, COMMIT_TASKS, then_prepare=False))
    finally:
        eos.close()
        delete_topic(cfg, topic)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(text) + "\n")
    print("\n".join(text))
    print(f"written: {path}")
