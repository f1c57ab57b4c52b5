"""``python -m benchmarks.formats`` (``make bench-formats``): Avro end to end beside Spark's
connector with spark-avro; the codec alone is ``python -m benchmarks.formats.codec_speed``."""

from ..common.entry import dispatch
from . import endtoend, split

raise SystemExit(dispatch(endtoend.main, {
    "split": (split.main, "where an Avro write's time goes (handoff, encode, fixed cost)"),
}))
