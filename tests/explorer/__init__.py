"""The sequence explorer (docs/design.md, invariant 17; docs/chaos.md): seeded random
sequences of batches, driver kills at any crash point (recovery's included), Kafka's
``kafka-transactions abort`` on any open transaction, ``eoskafka fence``, rewound
checkpoints, prefix changes, decision-store failures and broker restarts, on one Apache
Kafka; every sequence judged from the outside, a failing one shrunk to the shortest
sequence that still fails.

``python -m tests.explorer --seeds 50`` (``make explore``); ``--seed S`` replays a seed,
``--sequence "crash commit.after_decision; fence; batch"`` a printed sequence.
Modules: ``actions`` (the vocabulary and the seeded chooser), ``world`` (one sequence's
query, as Spark drives it), ``driver`` (its batch in a process of its own, to kill),
``verdict``, ``explore`` (run, shrink), ``__main__``.
"""
