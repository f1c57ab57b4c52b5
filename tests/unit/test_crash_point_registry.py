"""The crash-point registry and the source agree (invariant 14): every fault point the
sink passes is registered (so the sweep kills the driver there), and every registered
point is in the source (so a renamed point cannot make its sweep case pass vacuously)."""

from __future__ import annotations

import re
from pathlib import Path

from eos_kafka_source.sink.driver import crash_points

PACKAGE = Path(crash_points.__file__).parents[2]
#: Where the driver's durable steps live: the sink, and the EndTxn request of the wire.
SCANNED = [*sorted((PACKAGE / "sink").rglob("*.py")), PACKAGE / "wire" / "txn.py"]
_LITERAL = re.compile(r"""fault_point\(\s*f?["']([^"']+)["']""")
#: f-string points: the template and the names it stands for.
_TEMPLATES = {"endtxn.{verb}.answered": ("endtxn.commit.answered", "endtxn.abort.answered")}

#: Registered points that branches not yet landed add; empty when every point is here.
PENDING: frozenset[str] = frozenset()


def points_in_source() -> dict[str, list[str]]:
    """Every fault-point name passed in the scanned modules -> where (file:line)."""
    found: dict[str, list[str]] = {}
    for path in SCANNED:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for literal in _LITERAL.findall(line):
                for name in _TEMPLATES.get(literal, (literal,)):
                    found.setdefault(name, []).append(f"{path.name}:{number}")
    return found


def test_every_point_in_the_sink_is_registered() -> None:
    unknown = {name: where for name, where in points_in_source().items()
               if name not in crash_points.BY_NAME
               and name not in crash_points.TASK_POINTS | crash_points.READ_POINTS}
    assert not unknown, (
        f"fault points not in eos_kafka_source/sink/driver/crash_points.py: {unknown}; register "
        "each durable step there (what is durable at that moment, which hook) so the "
        "crash-point sweep kills the driver at it")


def test_every_registered_point_is_in_the_source() -> None:
    present = points_in_source()
    missing = [name for name in [*crash_points.names(), *crash_points.TASK_POINTS,
                                 *crash_points.READ_POINTS]
               if name not in present and name not in PENDING]
    assert not missing, (
        f"registered crash points no fault_point() passes: {missing}; a renamed point "
        "must be renamed in the registry too, or its sweep case proves nothing")


def test_pending_points_are_registered_and_not_yet_in_the_source() -> None:
    """A pending point that reached the source (its branch merged) leaves PENDING."""
    assert PENDING <= set(crash_points.BY_NAME) | crash_points.READ_POINTS
    arrived = sorted(PENDING & set(points_in_source()))
    assert not arrived, f"merged: remove {arrived} from PENDING in this test"


def test_registry_is_well_formed() -> None:
    names = crash_points.names()
    assert len(names) == len(set(names)), "a point registered twice"
    assert not set(names) & (crash_points.TASK_POINTS | crash_points.READ_POINTS)
    for point in crash_points.POINTS:
        assert point.hook in {"prepare", "commit", "abort", "store", "prepare/commit"}, point
        assert point.durable, point
