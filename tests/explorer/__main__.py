"""``python -m tests.explorer``: run seeds (or one printed sequence) on an Apache Kafka of
its own (one node, restartable), print each seed's sequence and verdict, shrink failures,
and end with Kafka's own tools over every sequence that held. Exit 1 on any failure."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from tests.explorer.actions import format_sequence, parse_sequence
from tests.explorer.explore import Explorer
from tests.explorer.world import Cluster
from tests.termination import stop_cleanly_on_sigterm


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.explorer")
    parser.add_argument("--seeds", type=int, default=10, help="how many seeds, from --first")
    parser.add_argument("--first", type=int, default=1, help="the first seed")
    parser.add_argument("--seed", type=int, action="append", help="replay these seeds only")
    parser.add_argument("--sequence", help='replay one sequence: "crash commit.after_decision;'
                        ' fence; batch"')
    parser.add_argument("--max-length", type=int, default=10)
    parser.add_argument("--no-shrink", action="store_true")
    parser.add_argument("--shrink-budget", type=float, default=1800, help="seconds per failure")
    parser.add_argument("--stop-at-first", action="store_true")
    parser.add_argument("--bootstrap", help="use this cluster (no broker restarts)")
    args = parser.parse_args(argv)
    stop_cleanly_on_sigterm()  # a `kill` stops the explorer's broker too
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="eoskafka-explore-") as tmp:
        if args.bootstrap:
            return _explore(Cluster(args.bootstrap, Path(tmp)), args, started)
        from tests.kafka_clusters import kafka_for_tests

        with kafka_for_tests(1) as kafka:
            def restart(kill: bool) -> None:
                kafka.restart_node(1, kill=kill)

            return _explore(Cluster(kafka.bootstrap_servers, Path(tmp), restart), args, started)


def _explore(cluster: Cluster, args: argparse.Namespace, started: float) -> int:
    explorer = Explorer(cluster, max_length=args.max_length,
                        log=lambda line: print(line, flush=True))
    failed = 0
    if args.sequence:
        outcome = explorer.run(actions=parse_sequence(args.sequence))
        print(f"sequence: {format_sequence(outcome.actions)}\n{outcome.describe()}\n  -> "
              + ("; ".join(outcome.problems) or "held"), flush=True)
        failed = int(not outcome.held)
    else:
        seeds = args.seed or list(range(args.first, args.first + args.seeds))
        findings = explorer.explore(seeds, shrink=not args.no_shrink,
                                    shrink_budget_s=args.shrink_budget,
                                    stop_at_first=args.stop_at_first)
        failed = len(findings)
        for seed, _, shrunk in findings:
            print(f"FINDING seed {seed}: {format_sequence(shrunk.actions)} -> "
                  + "; ".join(shrunk.problems), flush=True)
    tools = explorer.final_check()
    for problem in tools:
        print(f"Kafka's tools: {problem}", flush=True)
    print(f"explorer: {explorer.sequences} sequences run ({len(explorer.held_topics)} held), "
          f"{failed} failed, Kafka's tools {'disagree' if tools else 'agree'}, "
          f"{time.monotonic() - started:.0f} s", flush=True)
    return 1 if failed or tools else 0


if __name__ == "__main__":
    sys.exit(main())
