"""Fault injection for tests: named points that production code passes through.

Inert unless ``EOSKAFKA_TEST_FAULTS`` is set, e.g.
``commit.after_decision=killgroup@/tmp/flag`` or ``write.after_flush/1=raise``:
at that point, kill the whole process group (a driver crash), once; ``/1``
limits a point to task partition 1; the ``@flag`` file is created when the
fault fires and the fault is skipped while it exists. Actions: ``raise``
(RuntimeError), ``kill`` (SIGKILL this process), ``killgroup`` (SIGKILL the
process group), ``hang`` (block until killed).
"""

from __future__ import annotations

import os
import signal
import time

ENV = "EOSKAFKA_TEST_FAULTS"


class InjectedFault(RuntimeError):
    """Raised by the ``raise`` action."""


def fault_point(name: str, *, task: int | None = None) -> None:
    """Pass through fault point ``name``; entries look like ``point[/task]=action[@flag]``."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    for entry in spec.split(","):
        where, _, action = entry.strip().partition("=")
        point, _, only_task = where.partition("/")
        if point != name or (only_task and str(task) != only_task):
            continue
        action, _, flag = action.partition("@")
        if flag:
            try:
                fd = os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                continue
            os.close(fd)
        _act(action, name)


def _act(action: str, name: str) -> None:
    if action == "raise":
        raise InjectedFault(f"injected fault at {name}")
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "killgroup":
        os.killpg(os.getpgid(0), signal.SIGKILL)
    if action == "hang":
        while True:
            time.sleep(3600)
    raise ValueError(f"{ENV}: unknown action {action!r} at {name}")
