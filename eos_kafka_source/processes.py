"""Stopping a broker process we started (Tansu or an Apache Kafka node): one routine for both."""

from __future__ import annotations

import subprocess


def stop_process(proc: subprocess.Popen[bytes] | None, *, kill: bool = False,
                 grace_s: float = 10.0) -> None:
    """SIGTERM and wait up to ``grace_s`` for a clean exit, then SIGKILL (``kill``: SIGKILL at
    once, as a crash). Nothing to do for a process that is gone already."""
    if proc is None or proc.poll() is not None:
        return
    if kill:
        proc.kill()
    else:
        proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
