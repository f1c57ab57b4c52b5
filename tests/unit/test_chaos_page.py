"""docs/chaos.md's "What CI runs" names exactly the lanes' targets .ci/run gives make test."""

from __future__ import annotations

import re

from tests import versions_tested


def _ci_section() -> str:
    text = (versions_tested.ROOT / "docs" / "chaos.md").read_text()
    return text.split("## What CI runs", 1)[1].split("\n## ", 1)[0]


def test_every_ci_target_is_named_and_no_other() -> None:
    section = _ci_section()
    named = set(re.findall(r"`([a-z0-9-]+)`", section))
    targets = set(versions_tested.ci_targets())
    assert targets, "no LANE1/LANE2 in .ci/run: the pattern is stale"
    assert targets <= named, targets - named
    make_targets = set(re.findall(r"^([a-z0-9-]+):", (versions_tested.ROOT / "Makefile")
                                  .read_text(), re.M))
    assert named & make_targets <= targets, (named & make_targets) - targets


def test_ci_settings_the_page_quotes_are_ci_s() -> None:
    ci = (versions_tested.ROOT / ".ci" / "run").read_text()
    section = _ci_section()
    operator = re.search(r"CHAOS_OPERATOR_FAULTS=(\d+)", ci)
    runs = re.search(r"\bRUNS=(\d+)", ci)
    assert operator and runs
    words = {"5": "five", "1": "once"}
    assert words[operator.group(1)] in section and f"RUNS={runs.group(1)}" in section
    assert f"pyspark {versions_tested.ci_smoke_pyspark()[0]}" in section
