"""The streaming reader Spark drives for ``spark.readStream.format("eoskafka")``.

Where each hook runs (docs/design.md, "Where each part runs"):

* ``initialOffset``, ``latestOffset``, ``getDefaultReadLimit``,
  ``prepareForTriggerAvailableNow``, ``partitions``, ``commit``, ``stop``: one
  long-lived Python worker under the driver JVM per query run. The reader
  object (and its broker connection, in the planner) lives there across
  batches; it is lost on restart, so nothing here is needed for correctness
  after one: the checkpoint's offsets are.
* ``read``: an executor Python worker, on a fresh unpickled copy of a reader
  (so the reader must pickle; the planner is dropped when it does).

Offsets in the checkpoint are JSON shaped like Spark's Kafka source,
``{"topic": {"0": 23}}``: the next offset to read of every partition.

Versions. pyspark 4.2+ calls ``latestOffset(start, limit)`` with a read limit
from :meth:`getDefaultReadLimit` (``maxOffsetsPerTrigger`` becomes
``ReadMaxRows``; batch sizes are exact) and supports ``Trigger.AvailableNow``
through :meth:`prepareForTriggerAvailableNow`. pyspark 4.0/4.1 call
``latestOffset()`` with no arguments: the reader then caps from the last end
it knows (its own last answer, the last planned batch, or the initial
offsets), which gives the same batches in a running query. There a Python
source cannot declare AvailableNow support, and Spark ends an AvailableNow run
at the source's first ``latestOffset()`` answer: one batch, with
``spark.sql.streaming.triggerAvailableNowWrapper.enabled=true`` (without it Spark
runs one ordinary batch, and after a restart may only replay the pending one).
:mod:`.available_now` recognises the wrapper from the order of Spark's calls and
refuses, before any batch, a run that would leave data unread (a backlog beyond
``maxOffsetsPerTrigger`` or the default read bound).

Read bound. Without ``maxOffsetsPerTrigger`` a streaming read takes at most
``DEFAULT_MAX_OFFSETS_PER_TRIGGER`` offsets a batch, sized from the sink's default
transaction timeout, so a first batch over a large backlog cannot outlive it and fail
on every replay (docs/operations.md, "Sizing the transaction timeout").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from ..errors import EosKafkaError, user_facing
from ..faults import fault_point
from ..formats.plans import ReadPlan
from ..offsets import from_spark_offset, to_spark_offset
from ..options import SourceOptions
from ..timings import Phases
from ..wire.groups import commit_offsets
from .available_now import WrapperWatch
from .packing import to_input_partitions
from .partition_reader import read_input
from .planner import Offsets, SourcePlanner

try:  # pyspark >= 4.2
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

    HAS_READ_LIMITS = True
except ImportError:  # pyspark 4.0 / 4.1: no read limits, no AvailableNow mixin

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in so the class statement below works on every pyspark version."""

    HAS_READ_LIMITS = False

log = logging.getLogger(__name__)


class EosKafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader over Kafka, read_committed from the log's own markers.

    Created by :meth:`EosKafkaDataSource.streamReader` in the driver-side worker.
    """

    def __init__(self, options: SourceOptions, schema: StructType,
                 payload: ReadPlan | None = None) -> None:
        self.options = options
        self.schema = schema
        #: valueFormat/keyFormat: the reader schemas, fixed for this run of the query.
        self.payload = payload
        self._planner: SourcePlanner | None = None
        self._initial: Offsets | None = None
        #: pyspark < 4.2 only: the end of the last batch Spark knows of (see module doc).
        self._known_end: Offsets | None = None
        #: Trigger.AvailableNow: the offsets current when the query started.
        self._target: Offsets | None = None
        self._last_trigger = time.monotonic()
        #: The uncapped latest offsets last seen (lag = latest - end; see reportLatestOffset).
        self._latest: Offsets = {}
        #: The offsets last committed to the progress group (kafka.group.id).
        self._reported: Offsets = {}
        #: pyspark < 4.2: Spark's AvailableNow wrapper, told apart by the order of the hooks.
        self._watch = WrapperWatch(options.max_offsets_per_trigger,
                                   options.min_offsets_per_trigger, _pyspark_version())

    # -- pickling: the planner holds a socket and stays on the driver ----------------------

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_planner"] = None
        return state

    @property
    def planner(self) -> SourcePlanner:
        if self._planner is None:
            self._planner = SourcePlanner(self.options)
        return self._planner

    # -- offsets ---------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        self._watch.hook()
        return to_spark_offset(self._initial_offsets())

    def _initial_offsets(self) -> Offsets:
        # Resolved once: "latest" must mean the same thing in initialOffset and in a
        # latestOffset that pyspark 4.0 may call before it.
        if self._initial is None:
            self._initial = self.planner.initial_offsets()
        return self._initial

    def getDefaultReadLimit(self) -> Any:
        """pyspark >= 4.2: ``maxOffsetsPerTrigger`` as ReadMaxRows: the option, or the
        default read bound when it is not set (``minOffsetsPerTrigger`` still applies, in
        :meth:`latestOffset`). The other branches serve options built without the bound."""
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    @user_facing
    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        """The end of the next batch. ``start``/``limit`` come from pyspark >= 4.2;
        older versions call this with neither (module doc)."""
        if start is None:
            base = self._known_end if self._known_end is not None else self._initial_offsets()
            max_offsets = self.options.max_offsets_per_trigger
            use_min = True
        else:
            base = from_spark_offset(start)
            max_offsets, use_min = _limits(limit)
            # ``start`` is where the last batch Spark committed ended (or the initial offsets):
            # Spark calls commit() for a batch only when it plans the next one, so after a
            # drain this is the only hook that sees the last batch's end.
            self._report_progress(base)
        fault_point("plan.latest")  # the availability harness holds planning here
        timing = Phases("source_latest")
        latest = self.planner.latest_offsets(base, max_offsets, target=self._target)
        timing.mark("latest_offsets")  # Metadata + one Fetch per leader
        timing.write(offsets_from=sum(base.values()), offsets_to=sum(latest.end.values()),
                     spark_start=start is not None)
        self._latest = latest.latest
        end = latest.end
        if use_min and self._target is None and self._too_early(latest.available):
            end = dict(base)
        elif end != base:
            self._last_trigger = time.monotonic()
        if start is None:
            self._known_end = end
            self._watch.latest(base, end, latest.latest)
        return to_spark_offset(end)

    def _too_early(self, available: int) -> bool:
        """minOffsetsPerTrigger: wait for more offsets, up to maxTriggerDelay."""
        wanted = self.options.min_offsets_per_trigger
        if wanted is None or available >= wanted:
            return False
        waited_ms = (time.monotonic() - self._last_trigger) * 1000
        return waited_ms < self.options.max_trigger_delay_ms

    def reportLatestOffset(self) -> dict | None:
        """The latest offsets available (uncapped), shown in the query's progress.

        ``StreamingQueryProgress.sources[0].latestOffset`` minus ``endOffset`` is
        how far the query is behind the last stable offset.
        """
        return to_spark_offset(self._latest) if self._latest else None

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow (pyspark >= 4.2): fix the target at the offsets current now.

        Later ``latestOffset`` calls never pass it, and partitions that appear
        later are left for the next run. Spark calls this before the reader knows the
        checkpoint's offsets, so a topic deleted while a restarted query was down is left
        out here rather than refused (a new query's missing topic is refused by
        ``initialOffset``; a restarted one's is judged by ``failOnDataLoss``).
        """
        self._target = self.planner.latest_offsets({}, missing_ok=True).end

    # -- planning and reading --------------------------------------------------------------

    @user_facing
    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """The input partitions of batch ``(start, end]``: exactly the planned ranges, so a
        replayed batch reads what the original did."""
        s, e = from_spark_offset(start), from_spark_offset(end)
        self._watch.partitions(s, e)  # may refuse an AvailableNow run (pyspark < 4.2)
        self._known_end = e  # after a restart on pyspark < 4.2 this is how the reader learns it
        if s == e:
            return []
        timing = Phases("source_partitions")
        ranges = self.planner.plan(s, e)
        timing.mark("plan")  # Metadata + one Fetch per leader (the data-loss check)
        lag = sum(max(0, off - e.get(tp, off)) for tp, off in self._latest.items())
        log.info("eoskafka source: batch of %d offsets in %d ranges; %d offsets behind latest%s",
                 sum(r.end - r.start for r in ranges), len(ranges), lag,
                 f" (capped by the default maxOffsetsPerTrigger="
                 f"{self.options.max_offsets_per_trigger}; set it to change the bound)"
                 if lag and self.options.default_read_bound else "")
        parts = to_input_partitions(self.options, ranges, self.payload)
        timing.mark("pack")
        timing.write(ranges=len(ranges), tasks=len(parts))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Executor: stream the partition's visible records as Arrow batches."""
        return read_input(partition, self.schema)

    def commit(self, end: dict) -> None:
        """Spark committed the batch ending at ``end``: tell the progress group, if any.

        On pyspark < 4.2 it also tells a restarted reader where the query is.
        """
        offsets = from_spark_offset(end)
        self._watch.hook()
        if self._known_end is None:
            self._known_end = offsets
        self._report_progress(offsets)

    def _report_progress(self, offsets: Offsets) -> None:
        """Commit ``offsets`` (ends of batches Spark committed) to ``kafka.group.id``, if set.

        Advisory only: a failure logs a warning and the query goes on; nothing ever
        reads these offsets back (the checkpoint is the truth).
        """
        group = self.options.progress_group
        if group is None or not offsets or offsets == self._reported:
            return
        try:
            commit_offsets(self.planner.wire, group, offsets,
                           "eoskafka: advisory; the query's Spark checkpoint is the truth")
            self._reported = dict(offsets)
        except (EosKafkaError, OSError) as exc:
            log.warning("eoskafka: could not commit batch end offsets to consumer group %r "
                        "(advisory; the query goes on): %s", group, exc)

    def stop(self) -> None:
        planner, self._planner = self._planner, None
        if planner is not None:
            planner.close()


def _pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def _is(limit: Any, name: str) -> bool:
    return type(limit).__name__ == name


def _limits(limit: Any) -> tuple[int | None, bool]:
    """(max offsets, whether minOffsetsPerTrigger applies) for a pyspark 4.2+ ReadLimit."""
    if _is(limit, "ReadMaxRows"):
        return int(limit.max_rows), True
    if _is(limit, "ReadMinRows"):
        return None, True
    return None, False  # ReadAllAvailable (or a limit that does not count records)
