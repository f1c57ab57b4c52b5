"""``python -m benchmarks.latency`` (``make bench-latency``); ``... floor`` for the floor
of Spark's Python data source alone, with no Kafka."""

from ..common.entry import dispatch
from . import bench, floor

raise SystemExit(dispatch(bench.main, {
    "floor": (floor.main, "the per-batch floor of a Python data source alone, no Kafka"),
}))
