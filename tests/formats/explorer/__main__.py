"""``python -m tests.formats.explorer``: seeds of generated schemas and values per format,
checked against the reference decoders; prints each new difference shrunk (a case line and
a ready-to-paste test), the known differences counted, and the stale entries of the known
lists. Exit 1 on a new difference or a stale entry."""

from __future__ import annotations

import argparse
import sys
import time

from tests.formats.explorer.run import FORMATS, differences, explore


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.formats.explorer")
    parser.add_argument("--format", action="append", choices=FORMATS,
                        help="only these formats (default: all three)")
    parser.add_argument("--seeds", type=int, default=20, help="how many seeds, from --first")
    parser.add_argument("--first", type=int, default=1, help="the first seed")
    parser.add_argument("--seed", type=int, action="append", help="run these seeds only")
    parser.add_argument("--per-seed", type=int, default=100, help="schemas per seed and format")
    parser.add_argument("--budget", type=float, help="seconds per format (at least one seed)")
    parser.add_argument("--shrink-budget", type=float, default=300, help="seconds per difference")
    parser.add_argument("--case", help="replay one printed case (its JSON line)")
    args = parser.parse_args(argv)
    formats = args.format or list(FORMATS)
    needs_spark = "avro" in formats or (args.case is not None and '"avro"' in args.case)
    spark = None
    if needs_spark:
        from tests.formats.explorer.spark_avro import session

        spark = session()
    try:
        if args.case:
            found = differences(args.case, spark)
            print("\n".join(found) or "no difference")
            return 1 if found else 0
        seeds = args.seed or list(range(args.first, args.first + args.seeds))
        started = time.monotonic()
        reports = [explore(fmt, seeds, args.per_seed, spark, deadline_s=args.budget,
                           shrink_s=args.shrink_budget, log=lambda s: print(s, flush=True))
                   for fmt in formats]
    finally:
        if spark is not None:
            spark.stop()
    for report in reports:
        print(report.summary())
    print(f"explore-formats: seeds {seeds[0]}..{seeds[-1]}, {time.monotonic() - started:.0f} s")
    return 1 if any(r.failed for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
