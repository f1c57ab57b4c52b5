"""The chaos harness: exactly-once on a real multi-process Spark cluster, under faults.

``python -m tests.chaos [--faults N] [--seed S]`` (or ``make chaos [SOAK=N]``)
starts a Spark standalone cluster (master + two workers, from the pyspark
package's own ``bin/spark-class``), a durable Tansu broker (``s3://`` storage on
a local moto S3 server), transactional feeders that also abort transactions,
and the pipeline ``readStream.format("eoskafka")`` -> transform ->
``writeStream.format("eoskafka")`` as its own driver process. It injects faults
at random points (executor JVM kill -9, driver kill -9 + restart, broker
kill -9 + restart, query stop mid-batch + restart, a zombie producer on a sink
transactional id), drains, and judges the output from its raw log and markers.

Modules: ``cluster`` (Spark), ``broker`` (S3 + Tansu), ``feeder`` (input),
``driver_job`` (the query, run as a subprocess) and ``pipeline`` (controls it),
``faults`` (the fault loop), ``verdict`` (the judgement), ``__main__`` (the run).
"""

from __future__ import annotations

import sys
from pathlib import Path

# tests/oracle.py imports its sibling as a top-level module (pytest puts tests/ on the path).
_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
