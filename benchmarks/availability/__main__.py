"""``python -m benchmarks.availability`` (``make availability``); ``... contrast`` for
at-least-once vs exactly-once under the same faults (``make contrast``)."""

from ..common.entry import dispatch
from . import bench, contrast

raise SystemExit(dispatch(bench.main, {
    "contrast": (contrast.main, "duplicates, at-least-once vs exactly-once, same faults"),
}))
