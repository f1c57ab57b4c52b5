"""Python's cyclic garbage collector kept off the hot path: paused over a burst of
short-lived objects, and a reused Spark worker's modules frozen out of its collections.

Decoding a batch creates a few objects per field of every record (messages, dicts, strings)
and frees them all at the end; none form cycles. Each burst of allocations starts a
collection that walks every live object, which cost the Protobuf and JSON decoders about a
third of their time. The driver's commit of a large batch is such a burst too (hand-offs to
JSON, thousands of requests, answers and confirmation places): collections of the worker's
whole heap took 13 to 233 ms of a 1,000-task commit, landing anywhere, the EndTxn round
included (benchmarks/scale/RESULTS.md). Reference counting still frees everything as usual.

A worker Spark reuses (``spark.python.worker.reuse``, the default) runs a full
``gc.collect()`` after every task and every driver-side call (pyspark's daemon), and the
imported modules are most of what it walks: ~100,000 objects in a worker that has run
eoskafka's reader and writer, 25-30 ms of CPU each time, six times a micro-batch (two
reading and two writing workers, the planning and the commit worker; pyspark and pyarrow
alone: ~7 ms), beside the batch's own work and Spark's commit-log write on the same cores
(benchmarks/latency/RESULTS.md). :func:`freeze_imports` moves what is alive then, the
modules mostly, to the permanent generation (``gc.freeze``), which collections skip.
Imports nothing of the package: any layer may use it.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside the block (nested blocks are fine)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


#: ``len(sys.modules)`` at this process's last freeze (0: never).
_frozen_at_modules = 0


def freeze_imports() -> bool:
    """In a reused Spark worker that imported modules since the last call, freeze the heap
    (``gc.freeze``); True if it froze. Call it at a hook's entry, after its imports.

    Frozen objects are still freed by reference counting; only a reference cycle frozen
    as garbage would stay, and a freeze happens only when modules were added, after
    pyspark's collection of the previous task, so there is next to none. Outside a reused
    Spark worker (no ``SPARK_REUSE_WORKER``) it does nothing.
    """
    global _frozen_at_modules
    if not os.environ.get("SPARK_REUSE_WORKER"):
        return False
    loaded = len(sys.modules)
    if loaded <= _frozen_at_modules:
        return False
    gc.freeze()
    _frozen_at_modules = loaded
    return True
