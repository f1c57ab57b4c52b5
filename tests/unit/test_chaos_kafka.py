"""The Kafka chaos round's bookkeeping (no cluster): the schedule's quotas, and how the
verdict counts coordinator kills during a commit and the driver's loss reports."""

from __future__ import annotations

import random

from tests.chaos.__main__ import _args, schedule
from tests.chaos.kafka_faults import (
    KAFKA_KINDS,
    WEIGHTS,
    coordinator_kills_in_commit,
    quotas,
)
from tests.chaos.kafka_verdict import classify, reported_losses
from tests.chaos.verdict import Verdict


def test_a_soak_of_50_has_every_kind_and_enough_coordinator_kills() -> None:
    counts = quotas(50, KAFKA_KINDS, WEIGHTS)
    assert sum(counts.values()) == 50
    assert min(counts.values()) >= 1
    # Six of every seven coordinator kills are aimed at a commit step: >= 10 aimed needs 12.
    assert counts["coordinator_kill"] >= 12
    kinds = schedule(random.Random(1), 50, KAFKA_KINDS, WEIGHTS)
    assert sorted(kinds) == sorted(k for k, n in counts.items() for _ in range(n))


def test_the_operator_round_runs_one_of_each_kind_it_names(monkeypatch) -> None:
    """``make chaos-operator CHAOS_OPERATOR_KINDS=slow_marker``: that kind once, not eleven
    times; unnamed, one of each of the eleven; CHAOS_OPERATOR_FAULTS picks that many."""
    monkeypatch.delenv("SOAK", raising=False)
    one = _args(["--broker", "kafka", "--operator", "--only", "slow_marker"])
    assert (one.faults, one.kinds) == (1, ("slow_marker",))
    every = _args(["--broker", "kafka", "--operator"])
    assert every.faults == len(every.kinds) == 11
    assert _args(["--broker", "kafka", "--operator", "--faults", "5"]).faults == 5


def test_the_short_round_is_one_of_each_kind() -> None:
    assert quotas(len(KAFKA_KINDS), KAFKA_KINDS, WEIGHTS) == {k: 1 for k in KAFKA_KINDS}
    assert quotas(3, KAFKA_KINDS, WEIGHTS) == {k: int(k in KAFKA_KINDS[:3]) for k in KAFKA_KINDS}


def test_fewer_faults_than_kinds_take_turns_by_seed() -> None:
    """A round with fewer faults than kinds (CHAOS_OPERATOR_FAULTS) runs each picked kind
    once, the seed choosing which, so that every kind comes round over a few runs."""
    from tests.chaos.operator_faults import OPERATOR_KINDS

    picked = [schedule(random.Random(seed), 5, OPERATOR_KINDS, WEIGHTS) for seed in range(8)]
    assert all(len(set(kinds)) == 5 for kinds in picked)
    assert set().union(*picked) == set(OPERATOR_KINDS)
    assert schedule(random.Random(3), 5, OPERATOR_KINDS, WEIGHTS) == picked[3]


def test_only_landed_commit_step_coordinator_kills_count() -> None:
    faults = [
        {"kind": "coordinator_kill", "aimed": "commit.between_endtxn", "landed": True},
        {"kind": "coordinator_kill", "aimed": "commit.after_done", "landed": False},
        {"kind": "coordinator_kill", "aimed": None, "landed": None},
        {"kind": "driver_kill", "aimed": "commit.after_decision", "landed": True},
        {"kind": "leader_kill", "aimed": "write.after_batch", "landed": True},
    ]
    assert coordinator_kills_in_commit(faults) == 1


def test_loss_reports_count_each_transaction_once() -> None:
    one = ("transaction eoskafka-ab-0 (producer 7, epoch 3) of task 0 attempt 0: 120 records "
           "[chaos-out-0: 60, chaos-out-1: 60]: PRODUCER_FENCED")
    two = ("transaction eoskafka-ab-2 (producer 9, epoch 1) of task 2 attempt 1: 5 records "
           "[chaos-out-1: 5]: INVALID_PRODUCER_EPOCH")
    errors = [f"[EOSKAFKA_TRANSACTION_LOST] batch 4 was decided but 2 ...: {one}; {two}",
              f"  raise TransactionLostError(...) [EOSKAFKA_TRANSACTION_LOST] {one}",
              "[EOSKAFKA_TRANSACTION_LOST] batch 3: 2 of its transactions were fenced ...; "
              "nothing was committed, the batch fails and will be replayed: transaction "
              "eoskafka-ab-1 (producer 8, epoch 2) of task 1 attempt 0: 99 records []",
              f"batch 9 (no loss word here) {one.replace('producer 7', 'producer 70')}"]
    assert reported_losses(errors) == (2, 125)
    assert reported_losses([]) == (0, 0)


def test_a_loss_is_documented_only_when_reported_and_alone() -> None:
    def verdict(*problems: tuple[str, object]) -> Verdict:
        v = Verdict()
        v.row("records out", 10)
        for name, value in problems:
            v.row(name, value, problem=True)
        return v

    assert classify(verdict(), 0, 0) == "exactly once"
    documented = verdict(("losses", 120))
    assert classify(documented, 120, 125) == "documented loss"
    assert any(n.startswith("DOCUMENTED LOSS") for n in documented.notes)
    assert classify(verdict(("losses", 130)), 130, 125) == "failed"  # more than reported
    assert classify(verdict(("losses", 5)), 5, 0) == "failed"  # nothing reported
    assert classify(verdict(("losses", 5), ("duplicates", 1)), 5, 125) == "failed"
