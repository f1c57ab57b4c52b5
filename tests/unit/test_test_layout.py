"""The test tree's own rule: test directories have no ``__init__.py``, so pytest imports each
test file by its basename, and two files of one name in different directories make
whichever is collected second fail ("import file mismatch") when one run collects both
(CI's pyspark smoke set collects tests/deploy and tests/formats together)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_test_file_basenames_are_unique() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        where[path.name].append(str(path.relative_to(TESTS)))
    clashes = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not clashes, f"rename one of each: {clashes}"
