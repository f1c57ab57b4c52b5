"""One entry point per question: ``python -m benchmarks.<question> [command] [options]``.

Each question's ``__main__`` runs its main benchmark, or one of its other commands when the
first argument names one (``python -m benchmarks.throughput connector``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

Main = Callable[[list[str] | None], int]


def dispatch(default: Main, commands: dict[str, tuple[Main, str]],
             argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv[0]`` names, else ``default`` with every argument."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in commands:
        return commands[args[0]][0](args[1:])
    if any(a in ("-h", "--help") for a in args):
        print("other commands (their own --help):")
        for name, (_, what) in commands.items():
            print(f"  {name:<12} {what}")
        print()
    return default(args)
