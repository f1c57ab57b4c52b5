"""Run sequences, judge them, shrink a failing one to the shortest that still fails.

A sequence is drawn action by action from its seed (:class:`Chooser`) or given as a list
(a replay, or a candidate while shrinking); either way it runs on a query of its own
(topic, prefix, checkpoint) on the shared cluster, then settles and is judged
(:mod:`.verdict`). Shrinking is delta debugging over the concrete action list: drop
chunks, then single actions, keeping any candidate that fails with the same kinds of
problem; every candidate is a fresh query, so each tried sequence is judged on its own.
"""

from __future__ import annotations

import itertools
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.explorer.actions import Action, Chooser, format_sequence
from tests.explorer.verdict import judge, kafka_tools_agree, kinds
from tests.explorer.world import Cluster, World
from tests.operator_actions import close_leftovers


@dataclass
class Outcome:
    actions: list[Action]
    notes: list[str]
    problems: list[str]
    topic: str
    seconds: float

    @property
    def held(self) -> bool:
        return not self.problems

    def describe(self) -> str:
        lines = [f"  {a}  ->  {n}" for a, n in zip(self.actions, self.notes, strict=False)]
        lines += [f"  (settle)  ->  {n}" for n in self.notes[len(self.actions):]]
        return "\n".join(lines)


@dataclass
class Explorer:
    """Sequences on one cluster; ``log`` prints as they run. Counts every sequence run
    (shrinking's candidates too) and keeps the topics of those that held, for Kafka's
    tools at the end."""

    cluster: Cluster
    max_length: int = 10
    log: Callable[[str], None] = print
    run_id: str = field(default_factory=lambda: f"ex{uuid.uuid4().hex[:6]}")
    sequences: int = 0
    held_topics: list[str] = field(default_factory=list)
    _names: itertools.count = field(default_factory=itertools.count)

    def run(self, seed: int | None = None, actions: list[Action] | None = None) -> Outcome:
        """One sequence: drawn from ``seed``, or ``actions`` as given."""
        started = time.monotonic()
        self.sequences += 1
        world = World(self.cluster, f"{self.run_id}-{next(self._names)}"
                      + ("" if seed is None else f"-s{seed}"))
        chooser = Chooser(seed, self.max_length, self.cluster.restart is not None) \
            if actions is None else None
        done: list[Action] = []
        notes: list[str] = []
        problems: list[str] = []
        try:
            while True:
                if chooser is not None:
                    action = chooser.next(world.state(), len(done))
                else:
                    action = actions[len(done)] if len(done) < len(actions) else None
                if action is None:
                    break
                done.append(action)
                notes.append(world.act(action))
            stuck = world.settle()
            notes.append(stuck or "settled")
            problems = ([stuck.split(":", 1)[0] + ": " + stuck] if stuck else []) + judge(world)
        except Exception as exc:  # noqa: BLE001 - an explorer error is a failure to report
            problems = [f"error: {type(exc).__name__}: {exc}"]
            notes.append(traceback.format_exc(limit=3).splitlines()[-1])
        if problems:
            close_leftovers(self.cluster.bootstrap, world.prefixes)
        else:
            self.held_topics.append(world.name)
        return Outcome(done, notes, problems, world.name, time.monotonic() - started)

    def shrink(self, failing: Outcome, budget_s: float = 1800) -> Outcome:
        """The shortest sub-sequence of ``failing`` found within ``budget_s`` that fails
        with the same kinds of problem."""
        want = kinds(failing.problems)
        best = failing
        deadline = time.monotonic() + budget_s
        chunks = 2
        while len(best.actions) > 1 and time.monotonic() < deadline:
            size = max(1, len(best.actions) // chunks)
            for start in range(0, len(best.actions), size):
                candidate = best.actions[:start] + best.actions[start + size:]
                if not candidate or time.monotonic() > deadline:
                    continue
                outcome = self.run(actions=candidate)
                self.log(f"    shrink: {format_sequence(candidate)} -> "
                         f"{'; '.join(outcome.problems) or 'held'}")
                if outcome.problems and kinds(outcome.problems) == want:
                    best = outcome
                    chunks = max(chunks - 1, 2)
                    break
            else:
                if size == 1:
                    break
                chunks = min(chunks * 2, len(best.actions))
        return best

    def explore(self, seeds: list[int], *, shrink: bool = True, shrink_budget_s: float = 1800,
                stop_at_first: bool = False, deadline_s: float | None = None
                ) -> list[tuple[int, Outcome, Outcome]]:
        """Run ``seeds`` in turn (until ``deadline_s`` has passed: at least one); each
        failure as (seed, outcome, shrunk outcome)."""
        findings = []
        started = time.monotonic()
        for n, seed in enumerate(seeds):
            if n and deadline_s is not None and time.monotonic() - started > deadline_s:
                self.log(f"explorer: time budget spent after {n} seeds")
                break
            outcome = self.run(seed)
            verdict = "held" if outcome.held else "FAILED: " + "; ".join(outcome.problems)
            self.log(f"seed {seed} ({outcome.seconds:.0f} s): {format_sequence(outcome.actions)}"
                     f"\n  -> {verdict}")
            if outcome.held:
                continue
            self.log(outcome.describe())
            shrunk = self.shrink(outcome, shrink_budget_s) if shrink else outcome
            self.log(f"seed {seed}: minimal failing sequence ({len(shrunk.actions)} actions): "
                     f"{format_sequence(shrunk.actions)}\n{shrunk.describe()}\n  -> "
                     + "; ".join(shrunk.problems))
            findings.append((seed, outcome, shrunk))
            if stop_at_first:
                break
        return findings

    def final_check(self) -> list[str]:
        """Kafka's own tools over every sequence that held."""
        return kafka_tools_agree(self.cluster.bootstrap, self.held_topics, self.run_id)
