"""Stopping a broker process we started (Tansu or an Apache Kafka node): one routine for both."""

from __future__ import annotations

import socket
import subprocess
import time

from .errors import BrokerUnreachableError


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


def wait_listening(proc: subprocess.Popen[bytes] | None, port: int, *, name: str, log: object,
                   timeout_s: float, poll_s: float = 0.05) -> None:
    """Return once 127.0.0.1:``port`` accepts a connection; BrokerUnreachableError (naming
    ``name`` and its ``log``) when ``proc`` exits first or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is None or proc.poll() is not None:
            code = None if proc is None else proc.returncode
            raise BrokerUnreachableError(f"{name} exited with code {code} while starting; "
                                         f"see its log at {log}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(poll_s)
    raise BrokerUnreachableError(f"{name} did not accept connections on 127.0.0.1:{port} "
                                 f"within {timeout_s:.0f}s; see {log}")
