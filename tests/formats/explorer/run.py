"""One runner for the three formats: generate each seed's cases, check them against the
references in batches, shrink every new difference, and judge the known-difference list.

A seed gives ``per_seed`` cases per format (case ``i`` of seed ``s`` comes from its own
``random.Random(f"{fmt}-{s}-{i}")``, so any one replays alone). A difference in a case
with a feature the format's known list names is counted as known; any other is shrunk to
the smallest case that still shows a difference of the same check, and printed as a case
line and a ready-to-paste test. Every known entry's own case runs too: one that no longer
differs is stale (its fix landed) and fails the run.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.formats.explorer import known as known_list
from tests.formats.explorer.cases import REFERENCES, Case, Difference

FORMATS = ("avro", "protobuf", "json")
BATCH = 100


def _module(fmt: str) -> Any:
    """(generate, check, candidates) of a format."""
    if fmt == "avro":
        from tests.formats.explorer import avro_check, avro_gen, avro_shrink
        return avro_gen.generate, avro_check.check, avro_shrink.candidates
    if fmt == "protobuf":
        from tests.formats.explorer import proto_check, proto_gen
        return proto_gen.generate, proto_check.check, proto_gen.candidates
    from tests.formats.explorer import json_check, json_gen
    return json_gen.generate, json_check.check, json_gen.candidates


@dataclass
class Finding:
    """A new difference and the smallest case found that still shows it."""

    first: Difference
    shrunk: Difference

    def describe(self) -> str:
        d = self.shrunk
        name = f"test_explored_{d.case.fmt}_{d.check}_{d.case.seed}_{d.case.index}"
        return (f"NEW {d.case.fmt} difference ({d.check}), {self.first.case.label}: {d.detail}\n"
                f"  shrunk case: {d.case.printed()}\n"
                f"  ready-to-paste test (needs Spark for Avro):\n\n"
                f"from tests.formats.explorer.run import differences\n\n\n"
                f"def {name}(spark) -> None:\n"
                f"    assert differences({d.case.printed()!r}, spark) == []\n")


@dataclass
class Report:
    fmt: str
    cases: int = 0
    skipped: int = 0
    known: Counter[str] = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return bool(self.findings or self.stale)

    def summary(self) -> str:
        known = ", ".join(f"{tag} x{n}" for tag, n in sorted(self.known.items())) or "none"
        return (f"{self.fmt} vs {REFERENCES[self.fmt]}: {self.cases} schemas "
                f"({self.skipped} skipped), {self.seconds:.0f} s; known differences: {known}; "
                f"new: {len(self.findings)}; stale entries: {len(self.stale)}")


def seeded(fmt: str, seed: int, per_seed: int) -> Iterator[Case]:
    generate = _module(fmt)[0]
    for i in range(per_seed):
        schema, values = generate(random.Random(f"{fmt}-{seed}-{i}"))
        yield Case(fmt, schema, values, seed, i)


def explore(fmt: str, seeds: list[int], per_seed: int, spark: Any = None, *,
            deadline_s: float | None = None, shrink_s: float = 300,
            log: Callable[[str], None] = print) -> Report:
    """Run ``seeds`` (at least one, then until ``deadline_s``) and judge the known list."""
    _, check, candidates = _module(fmt)
    report = Report(fmt)
    started = time.monotonic()
    listed = known_list.entries(fmt)
    new: dict[tuple[str, frozenset[str]], Finding] = {}
    for n, seed in enumerate(seeds):
        if n and deadline_s is not None and time.monotonic() - started > deadline_s:
            log(f"{fmt}: time budget spent after {n} seeds")
            break
        cases = list(seeded(fmt, seed, per_seed))
        for start in range(0, len(cases), BATCH):
            differences, skipped = check(cases[start:start + BATCH], spark)
            report.cases += len(cases[start:start + BATCH])
            report.skipped += skipped
            for d in differences:
                entry = known_list.known(d, listed)
                if entry is not None:
                    report.known[entry.tag] += 1
                    continue
                if (d.check, frozenset(d.features)) in new:
                    continue  # one of a kind is shrunk and printed
                log(f"{d.case.label}: {d.check} difference, shrinking: {d.detail[:300]}")
                finding = Finding(d, shrink(d, check, candidates, spark, shrink_s))
                # A difference the smaller case shows only with a known feature is known.
                entry = known_list.known(finding.shrunk, listed)
                if entry is not None:
                    report.known[entry.tag] += 1
                    continue
                kind = (d.check, frozenset(finding.shrunk.features))
                if kind not in new:
                    new[kind] = finding
                    log(finding.describe())
                new[(d.check, frozenset(d.features))] = new[kind]
        log(f"{fmt} seed {seed}: {report.cases} schemas so far, {len(new)} new differences")
    report.findings = list({id(f): f for f in new.values()}.values())
    report.stale = stale(fmt, listed, check, spark)
    for line in report.stale:
        log(line)
    report.seconds = time.monotonic() - started
    return report


def stale(fmt: str, listed: list[known_list.Entry], check: Any, spark: Any) -> list[str]:
    """Entries whose case no longer shows a difference with the entry's feature."""
    pinned = [e for e in listed if e.case is not None]
    out = [f"{known_list.path(fmt).name}: entry {e.tag!r} has no case line" for e in listed
           if e.case is None]
    if not pinned:
        return out
    cases = [e.case for e in pinned if e.case is not None]
    differences, _ = check(cases, spark)
    for entry, case in zip(pinned, cases, strict=True):
        if not any(d.case is case and entry.tag in d.features for d in differences):
            out.append(f"{known_list.path(fmt).name}: entry {entry.tag!r} no longer differs "
                       "(fixed? remove the entry)")
    return out


def shrink(first: Difference, check: Any, candidates: Any, spark: Any,
           budget_s: float) -> Difference:
    """The smallest case found within ``budget_s`` that still differs on ``first.check``:
    all of one step's candidates checked in one batch, the first that differs kept."""
    best = first
    deadline = time.monotonic() + budget_s
    while time.monotonic() < deadline:
        batch = list(candidates(best.case))
        if not batch:
            break
        for c in batch:
            c.seed, c.index = first.case.seed, first.case.index
        differences, _ = check(batch, spark)
        by_case = {id(d.case): d for d in differences if d.check == first.check}
        found = next((by_case[id(c)] for c in batch if id(c) in by_case), None)
        if found is None:
            break
        best = found
    return best


def differences(printed: str, spark: Any = None) -> list[str]:
    """Replay one printed case: its differences, as text (a ready-to-paste test's body)."""
    from tests.formats.explorer.values import loads

    data = loads(printed)
    case = Case(data["format"], data["schema"], data["values"])
    found, skipped = _module(case.fmt)[1]([case], spark)
    assert not skipped, "the reference writer refuses this case"
    return [f"{d.check}: {d.detail}" for d in found]
