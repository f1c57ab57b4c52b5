"""Python's cyclic garbage collector paused while a codec builds a column.

Decoding a batch creates a few objects per field of every record (messages, dicts, strings)
and frees them all at the end; none form cycles. Each burst of allocations starts a
collection that walks every live object, which cost the Protobuf and JSON decoders about a
third of their time. Reference counting still frees everything as usual.
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
