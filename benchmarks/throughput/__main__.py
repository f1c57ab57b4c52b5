"""``python -m benchmarks.throughput [--quick]`` (``make bench``); ``... connector`` for the
side-by-side with Spark's Kafka connector (``make bench-connector``)."""

from ..common.entry import dispatch
from . import run, versus

raise SystemExit(dispatch(run.main, {
    "connector": (versus.main, "eoskafka against Spark's Kafka connector, same run"),
}))
