"""Trigger.AvailableNow on pyspark 4.0/4.1, where a Python source cannot declare support.

With ``spark.sql.streaming.triggerAvailableNowWrapper.enabled=true`` Spark wraps the
source: before the query's first batch it calls ``latestOffset()`` once and gives that
answer as the end of every batch of the run, so the run is one batch ending there (its
other ``latestOffset()`` calls only feed the progress report). Without the setting Spark
runs one ordinary batch. Either way the run ends where the source's first answer ends,
and a capped answer would end it normally with data left.

Spark does not tell the source, but the order of its calls does. The wrapper's call is
the reader's first hook, before the checkpoint's offsets reach it; after it comes either
a second ``latestOffset()`` with no batch planned in between (a new query) or the
checkpoint's position (a restart: ``partitions(end, end)``). An ordinary new query's
first answer is instead followed by its first batch, ``partitions(initial, answer)``, and
an ordinary restart starts with ``partitions()``. So :class:`WrapperWatch` knows the run's
end before any batch is logged, and refuses a run that would not read everything
available in one batch within the read bound: failing at start, saying what to set, is
better than a nightly job that silently reads part of its input.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import AvailableNowBacklogError
from .planner import Offsets


@dataclass(frozen=True)
class Opening:
    """The reader's first ``latestOffset()`` answer, given before any other hook."""

    base: Offsets  #: what it was counted from (the initial offsets)
    end: Offsets  #: the answer
    latest: Offsets  #: the uncapped latest offsets then


class WrapperWatch:
    """Tells from the order of a pyspark < 4.2 reader's hooks whether Spark's AvailableNow
    wrapper fixed the run's end at the first answer, and checks that end once."""

    def __init__(self, cap: int | None, min_offsets: int | None, pyspark_version: str) -> None:
        self._cap = cap
        self._min = min_offsets
        self._version = pyspark_version
        self._started = False
        self._opening: Opening | None = None

    def first_call(self) -> bool:
        """Whether no hook has run yet (the next ``latestOffset()`` is the opening)."""
        return not self._started

    def hook(self) -> None:
        """A hook other than the ones below ran first: neither pattern can follow."""
        self._started = True

    def latest(self, base: Offsets, end: Offsets, latest: Offsets) -> None:
        if not self._started:
            self._started = True
            self._opening = Opening(dict(base), dict(end), dict(latest))
        elif self._opening is not None:  # a second answer before any batch: the wrapper's
            opening, self._opening = self._opening, None
            self._check(opening, opening.base)

    def partitions(self, start: Offsets, end: Offsets) -> None:
        self._started = True
        opening, self._opening = self._opening, None
        if opening is None or (start == opening.base and end == opening.end):
            return  # no opening, or it became an ordinary new query's first batch
        self._check(opening, start)  # a restart under the wrapper: ``start`` is the checkpoint's

    def _check(self, opening: Opening, base: Offsets) -> None:
        """The run is the one batch ``(base, opening.end]``: refuse it unless that is every
        offset available at the opening, within the read bound."""
        left = sum(max(0, latest - opening.end.get(tp, 0))
                   for tp, latest in opening.latest.items())
        size = sum(max(0, end - base.get(tp, 0)) for tp, end in opening.end.items())
        if left == 0 and (self._cap is None or size <= self._cap):
            return
        available = sum(max(0, latest - base.get(tp, 0)) for tp, latest in opening.latest.items())
        needed = max(available, sum(max(0, latest - opening.base.get(tp, 0))
                                    for tp, latest in opening.latest.items()))
        if self._cap is not None and needed > self._cap:
            why = f"do not fit one batch of maxOffsetsPerTrigger={self._cap}"
            fix = (f"set maxOffsetsPerTrigger to at least {needed} for this run (one batch "
                   f"that large must fit the sink's transaction timeout)")
        else:
            why = f"were held back by minOffsetsPerTrigger={self._min}"
            fix = "leave minOffsetsPerTrigger out of AvailableNow runs"
        raise AvailableNowBacklogError(
            f"Trigger.AvailableNow on pyspark {self._version} would leave input unread: Spark "
            f"4.0 and 4.1 end an AvailableNow run of a Python source at the source's first "
            f"latestOffset() answer (one batch), and this run's {available} available offsets "
            f"{why}. Nothing was read. Run it on pyspark 4.2+ (AvailableNow in batches of "
            f"maxOffsetsPerTrigger); or {fix}; or use a processing-time trigger and stop the "
            f"query once it has caught up.")
