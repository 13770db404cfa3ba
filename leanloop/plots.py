"""Figures for the reports: one backend setup, one save rule, and the per-step panels of the GRPO
stages (rl and the autoformalizer's Stage 2 plot the same kind of history)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend: reports are written on headless nodes and in tests."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: str | Path, dpi: int = 110) -> Path:
    """Write ``fig`` to ``path`` and free it (figures left open accumulate over a long run)."""
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return Path(path)


@dataclass
class Lines:
    """One panel: a line per ``(history key, label)``."""

    title: str
    series: list[tuple[str, str]]
    ylim: tuple[float, float] | None = None
    ylabel: str | None = None


@dataclass
class Stacked:
    """One panel: bars per step stacked over ``names``, the count of each read from ``key.format(name)``."""

    title: str
    key: str
    names: list[str] = field(default_factory=list)


def step_panels(history: list[dict], path: str | Path, panels: list[Lines | Stacked]) -> Path | None:
    """Side-by-side panels over a run's per-step history (``{"step": n, key: value, ...}`` rows);
    None when there is no step to plot."""
    if not history:
        return None
    plt = pyplot()
    steps = [h["step"] for h in history]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.7 * len(panels), 3.7), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        if isinstance(panel, Lines):
            for (key, label), marker in zip(panel.series, "os.^v"):
                ax.plot(steps, [h.get(key, math.nan) for h in history], marker=marker, label=label)
            if panel.ylim:
                ax.set_ylim(*panel.ylim)
            if panel.ylabel:
                ax.set_ylabel(panel.ylabel)
        else:
            bottom = [0.0] * len(steps)
            for name in panel.names:
                counts = [h.get(panel.key.format(name), 0.0) for h in history]
                if any(counts):
                    ax.bar(steps, counts, bottom=bottom, label=name)
                    bottom = [b + c for b, c in zip(bottom, counts)]
        ax.set_xlabel("step")
        ax.set_title(panel.title)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    return save(fig, path)
