"""Offsets behind latest, the figures Spark's Kafka source reports, from a query's progress.

Spark's connector puts ``avgOffsetsBehindLatest``, ``maxOffsetsBehindLatest`` and
``minOffsetsBehindLatest`` in ``StreamingQueryProgress.sources[i].metrics``
(``KafkaMicroBatchStream.metrics``: per partition, latest available minus the
batch's end). A Python data source cannot fill ``metrics``: Spark's
``PythonMicroBatchStream`` does not implement ``ReportsSourceMetrics`` (checked on
pyspark 4.0-4.3). What it can do, eoskafka does: ``reportLatestOffset`` puts the
uncapped latest offsets in ``sources[i].latestOffset``, and this function turns
a source's progress into the same three figures, computed as Spark does.

>>> offsets_behind_latest({"endOffset": '{"t":{"0":4,"1":3}}',
...                        "latestOffset": '{"t":{"0":9,"1":3}}'})
{'avgOffsetsBehindLatest': 2.5, 'maxOffsetsBehindLatest': 5, 'minOffsetsBehindLatest': 0}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def _parsed(offsets: Any) -> dict[str, dict[str, int]]:
    return json.loads(offsets) if isinstance(offsets, str) else dict(offsets or {})


def offsets_behind_latest(source_progress: Mapping[str, Any]) -> dict[str, float | int]:
    """Spark's three offsets-behind-latest metrics for one source's progress entry
    (``query.lastProgress["sources"][0]``); empty when the progress has no
    ``latestOffset`` (an older pyspark, or a batch before the first ``latestOffset``)."""
    latest = _parsed(source_progress.get("latestOffset"))
    end = _parsed(source_progress.get("endOffset"))
    behind = [
        offset - end[topic][partition]
        for topic, parts in latest.items()
        for partition, offset in parts.items()
        if partition in end.get(topic, {})
    ]
    if not behind:
        return {}
    return {
        "avgOffsetsBehindLatest": sum(behind) / len(behind),
        "maxOffsetsBehindLatest": max(behind),
        "minOffsetsBehindLatest": min(behind),
    }
