"""Python's cyclic garbage collector paused over a burst of short-lived objects.

Decoding a batch creates a few objects per field of every record (messages, dicts, strings)
and frees them all at the end; none form cycles. Each burst of allocations starts a
collection that walks every live object, which cost the Protobuf and JSON decoders about a
third of their time. The driver's commit of a large batch is such a burst too (hand-offs to
JSON, thousands of requests, answers and confirmation places): collections of the worker's
whole heap took 13 to 233 ms of a 1,000-task commit, landing anywhere, the EndTxn round
included (benchmarks/scale/RESULTS.md). Reference counting still frees everything as usual.
Imports nothing of the package: any layer may use it.
"""

from __future__ import annotations

import gc
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
