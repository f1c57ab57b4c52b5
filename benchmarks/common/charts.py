"""PNG charts beside the benchmarks' tables (matplotlib: the ``bench`` extra).

Three calls cover every chart the benchmarks draw:

- :func:`line_chart`: named series of (x, y) points (commit time against tasks, the
  long-run curves);
- :func:`cdf_chart`: named samples drawn as cumulative distributions (latency);
- :func:`bar_chart`: groups of named bars (throughput against the built-in connector).

matplotlib is imported inside each call, with the non-interactive Agg backend, so
importing this module costs nothing and a benchmark without the extra still writes its
tables: :func:`available` says whether charts can be drawn.

>>> line_chart("bench-results/commit.png", "Driver commit", "tasks", "ms",
...            {"8 partitions": [(64, 40.0), (256, 150.0)]}, logx=True)  # doctest: +SKIP
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: One colour per series name, the same in every chart (built-in first, then eoskafka).
_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
            "#8c8c8c")


def available() -> bool:
    """Whether matplotlib is installed (``pip install -e '.[bench]'``)."""
    return importlib.util.find_spec("matplotlib") is not None


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    _pyplot().close(fig)
    return out


def line_chart(path: str | Path, title: str, xlabel: str, ylabel: str,
               series: Mapping[str, Sequence[tuple[float, float]]], logx: bool = False,
               logy: bool = False) -> Path:
    """One line (with markers) per series; points are drawn in x order."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (name, points) in enumerate(series.items()):
        pts = sorted(points)
        ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o" if len(pts) < 40 else "",
                markersize=4, label=name, color=_COLOURS[i % len(_COLOURS)])
    _finish(ax, title, xlabel, ylabel, logx, logy)
    return _save(fig, path)


def cdf_chart(path: str | Path, title: str, xlabel: str,
              samples: Mapping[str, Sequence[float] | Mapping[float, int]],
              logx: bool = False) -> Path:
    """Cumulative share of each series at or below x. A series is either its values or a
    histogram ``{value: count}`` (a million latencies need not be kept one by one)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (name, values) in enumerate(samples.items()):
        hist = values if isinstance(values, Mapping) else _histogram(values)
        total = sum(hist.values())
        if not total:
            continue
        xs, ys, seen = [], [], 0
        for x in sorted(hist):
            seen += hist[x]
            xs.append(x)
            ys.append(seen / total)
        ax.step(xs, ys, where="post", label=name, color=_COLOURS[i % len(_COLOURS)])
    ax.set_ylim(0, 1.01)
    _finish(ax, title, xlabel, "share of records", logx, False)
    return _save(fig, path)


def bar_chart(path: str | Path, title: str, ylabel: str,
              groups: Mapping[str, Mapping[str, float]]) -> Path:
    """Bars side by side: ``{group label: {series name: value}}``."""
    plt = _pyplot()
    names = list(dict.fromkeys(n for g in groups.values() for n in g))
    fig, ax = plt.subplots(figsize=(max(7, 1.4 * len(groups)), 4.5))
    width = 0.8 / max(len(names), 1)
    for i, name in enumerate(names):
        xs = [g + (i - (len(names) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, [grp.get(name, 0.0) for grp in groups.values()], width, label=name,
               color=_COLOURS[i % len(_COLOURS)])
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(list(groups), fontsize=8, rotation=15, ha="right")
    _finish(ax, title, "", ylabel, False, False)
    return _save(fig, path)


def _histogram(values: Sequence[float]) -> dict[float, int]:
    out: dict[float, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def _finish(ax: Any, title: str, xlabel: str, ylabel: str, logx: bool, logy: bool) -> None:
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
