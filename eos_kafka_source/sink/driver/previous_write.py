"""What a batch write is told after an earlier write with its decision log was finished
for it (the rerun of a failed batch write may be that write).

Runs on: the driver (planning worker's roll-forward of a batch write).
"""

from __future__ import annotations

import time

from ...errors import PreviousWriteCompletedError
from ..decisions.log import Decision


def previous_write_completed(location: str, decisions: list[Decision | None]
                              ) -> PreviousWriteCompletedError:
    done = [d for d in decisions if d is not None]
    records = sum(h.records for d in done for h in d.handoffs)
    lost = sum(len(d.lost) for d in done)
    topics = sorted({t for d in done for h in d.handoffs for t, _, _ in h.partitions})
    when = ", ".join(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(d.decided_at))
                     for d in done)
    return PreviousWriteCompletedError(
        f"an earlier batch write with decisionLogLocation {location} (decided {when}) was "
        "interrupted after its commit decision, and eoskafka has now finished it: its "
        f"{records} records to {', '.join(topics) or 'its topics'} are committed"
        + (f" ({lost} transaction(s) of it were lost, see `eoskafka txns`)" if lost else "")
        + ". If the write you are starting reruns that write, it is already complete: do not "
        "run it again. Otherwise run your write again (this is reported once)."
    )
