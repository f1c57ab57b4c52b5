"""``python -m benchmarks.longrun --batches N`` (``make bench-longrun``); ``... loop N`` for
the source and sink hooks in a loop, without Spark."""

from ..common.entry import dispatch
from . import bench, loop

raise SystemExit(dispatch(bench.main, {
    "loop": (loop.main, "the hooks Spark calls, in a loop without Spark"),
}))
