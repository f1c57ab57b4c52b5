"""A test session stopped by SIGTERM stops the brokers it started.

Brokers (Tansu, Kafka nodes) and Connect servers run in sessions of their own
(``start_new_session``), so a signal to the test's process group does not reach them:
their fixtures' teardown stops them. Python's default SIGTERM ends the process without
running that teardown, and the brokers lived on, with their memory and CPU, beside
whatever ran next on the machine (CI's deadline sends SIGTERM; so does a developer's
``kill``). As a KeyboardInterrupt, pytest stops the session and tears its fixtures down.
SIGKILL cannot be caught: what it leaves behind stays (``pgrep -fa 'eoskafka|tansu'`` finds it).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"stopped by signal {signum} (SIGTERM): tearing fixtures down")


def stop_cleanly_on_sigterm() -> None:
    """SIGTERM as KeyboardInterrupt in this process, unless someone else handles it."""
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)
