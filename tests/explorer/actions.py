"""The explorer's vocabulary: one action of a sequence, how it prints and parses, and the
seeded chooser that draws the next one from what the query's state allows.

An action is concrete once drawn (a point, a path, which open transaction): a printed
sequence replays as it ran (``python -m tests.explorer --sequence "..."``). The chooser
looks at the state between actions and leans towards what goes deeper into the protocol:
an operator's abort or fence while a decided batch is pending, a kill at a recovery's
points once Kafka aborted a decided transaction, the abort tool on an open recovery. A
uniform draw almost never reaches those states (one kill in sixteen is a recovery's, and
only where there is something to recover). The same seed draws the same sequence on the
same code.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from eos_kafka_source.sink.driver import crash_points

KINDS = ("batch", "crash", "kafka_abort", "fence", "rewind", "prefix", "store_fail",
         "broker_restart")
#: Spark's abort after a commit that raised before its decision (crash path ``abort``).
ABORT_POINTS = ("endtxn.abort.answered", "abort.after_mark", "abort.after_fence")
RECOVER_POINTS = ("recover.after_write", "recover.after_record", "recover.before_done")
#: Points a one-topic query's batch can meet on its commit path (a topic column's claim
#: point is the sweep's: the explorer's query names its topic).
#: Points only a hanging transaction reaches (the sweep's ``hanging`` scenario).
HANGING_POINTS = ("hanging.after_abort",)
COMMIT_POINTS = tuple(p for p in crash_points.names()
                      if p not in ABORT_POINTS + HANGING_POINTS and p != "commit.after_claim")


@dataclass(frozen=True)
class Action:
    """One step. ``crash``: the next batch in a driver process SIGKILLed at ``point``
    (``kill#N``: its Nth passage; no point: the path runs to its end) on ``path``
    (``commit``, Spark's ``abort``, or ``lost``: a zombie fences task 1's decided
    transaction). ``pick``: which open transaction ``kafka_abort`` takes (modulo how many
    are open); for ``broker_restart``, 1 is a SIGKILL of the broker."""

    kind: str
    point: str = ""
    kill: str = "kill"
    path: str = "commit"
    pick: int = 0

    def __str__(self) -> str:
        if self.kind == "crash":
            at = self.point + ("" if self.kill == "kill" else f"={self.kill}")
            return "crash " + " ".join(filter(None, [at or "-", "" if self.path == "commit"
                                                     else f"path={self.path}"]))
        if self.kind == "kafka_abort":
            return f"kafka_abort #{self.pick}"
        if self.kind == "broker_restart":
            return "broker_restart kill" if self.pick else "broker_restart"
        return self.kind

    @classmethod
    def parse(cls, text: str) -> Action:
        """The inverse of ``str``: ``crash recover.after_record path=lost``."""
        kind, *rest = text.split()
        if kind not in KINDS:
            raise ValueError(f"unknown action {text!r} (one of {', '.join(KINDS)})")
        if kind == "crash":
            point, kill, path = "", "kill", "commit"
            for word in rest:
                if word.startswith("path="):
                    path = word.split("=", 1)[1]
                elif word != "-":
                    point, _, k = word.partition("=")
                    kill = k or "kill"
            return cls(kind, point, kill, path)
        if kind == "kafka_abort":
            return cls(kind, pick=int(rest[0].lstrip("#")) if rest else 0)
        if kind == "broker_restart":
            return cls(kind, pick=int(bool(rest)))
        return cls(kind)


def format_sequence(actions: list[Action]) -> str:
    return "; ".join(str(a) for a in actions)


def parse_sequence(text: str) -> list[Action]:
    return [Action.parse(part) for part in text.split(";") if part.strip()]


@dataclass(frozen=True)
class State:
    """What the chooser sees between actions."""

    started: bool  #: a batch has been planned
    unfinished: bool  #: a decision not yet done (something to roll forward)
    lost: bool  #: a transaction of it that Kafka aborted (something to recover)
    recovering: bool  #: a recovery transaction recorded and still open
    open: bool  #: a transaction open on the query's topic


class Chooser:
    """Draws a sequence of ``length`` actions from ``seed`` (one ``random.Random``)."""

    def __init__(self, seed: int, max_length: int = 10, broker_restarts: bool = True) -> None:
        self.rng = random.Random(seed)
        self.length = self.rng.randint(3, max(3, max_length))
        self.broker_restarts = broker_restarts

    def next(self, state: State, done: int) -> Action | None:
        if done >= self.length:
            return None
        weights = {"batch": 2.0, "crash": 5.0, "fence": 1.5 if state.open else 0.5}
        if state.open:
            weights["kafka_abort"] = 4.0
        if state.recovering:  # the operator's tool on a recovery copy
            weights.update(kafka_abort=10.0, crash=4.0)
        elif state.lost:  # a restart recovers: kill it on the way
            weights.update(crash=10.0)
        elif state.unfinished and state.open:  # a decided batch pending: the operator acts
            weights.update(kafka_abort=6.0, fence=4.0, crash=4.0)
        if state.started:
            weights.update(rewind=0.7, prefix=0.5, store_fail=0.7)
        if self.broker_restarts:
            weights["broker_restart"] = 0.4
        kind = self._pick(weights)
        if kind == "crash":
            return self._crash(state)
        if kind == "kafka_abort":
            return Action(kind, pick=self.rng.randrange(1000))
        if kind == "broker_restart":
            return Action(kind, pick=self.rng.randrange(2))
        return Action(kind)

    def _crash(self, state: State) -> Action:
        path = self._pick({"commit": 7.0, "lost": 2.0, "abort": 1.0, "hanging": 1.0})
        if path == "abort":
            return Action("crash", self.rng.choice(ABORT_POINTS), path=path)
        if path == "hanging":  # only points past the decision: an undecided stray hangs
            return Action("crash", self._pick(dict.fromkeys(
                ("", *HANGING_POINTS, *RECOVER_POINTS), 1.0)), path=path)
        recover = 15.0 if state.lost else 0.3
        weights = {p: recover if p in RECOVER_POINTS else 1.0 for p in COMMIT_POINTS}
        if path == "lost":
            weights = {**{p: w * 2 if p in RECOVER_POINTS else w for p, w in weights.items()},
                       "": 3.0}
        point = self._pick(weights)
        kill = "kill#2" if point == "store.write" and self.rng.random() < 0.3 else "kill"
        return Action("crash", point, kill, path)

    def _pick(self, weights: dict[str, float]) -> str:
        names = sorted(weights)
        return self.rng.choices(names, [weights[n] for n in names])[0]
