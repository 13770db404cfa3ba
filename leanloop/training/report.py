"""``report.md`` of a training run: its loss curves as a plot (``loss.png``, from ``metrics.csv``)
and its final metrics, written beside the manifest (the artifact contract's report for a stage that
has no evaluation of its own, e.g. pretraining)."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

PLOT = "loss.png"
REPORT = "report.md"


def loss_curves(metrics_csv: Path) -> dict[str, list[tuple[int, float]]]:
    """Every ``*loss`` column of a Lightning ``metrics.csv``: name -> [(step, value), ...]."""
    curves: dict[str, list[tuple[int, float]]] = {}
    if not metrics_csv.is_file():
        return curves
    with open(metrics_csv, newline="") as handle:
        for row in csv.DictReader(handle):
            step = row.get("step")
            for key, value in row.items():
                if not key or not key.endswith("loss") or value in (None, "") or not step:
                    continue
                number = float(value)
                if math.isfinite(number):
                    curves.setdefault(key, []).append((int(float(step)), number))
    return curves


def write_loss_report(run_dir: Path, title: str, metrics: dict[str, Any], counts: dict[str, Any]) -> Path:
    """``run_dir/report.md`` (+ ``loss.png`` when anything was logged); returns the report's path."""
    run_dir = Path(run_dir)
    curves = loss_curves(run_dir / "metrics.csv")
    lines = [f"# {title}", ""]
    if curves:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.5))
        for name, points in sorted(curves.items()):
            steps, values = zip(*points)
            ax.plot(steps, values, marker="o" if len(points) < 30 else None, markersize=3, label=name)
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(run_dir / PLOT, dpi=100)
        plt.close(fig)
        lines += [f"![loss curves]({PLOT})", ""]
    else:
        lines += ["No loss was logged (metrics.csv is missing or has no loss column).", ""]
    lines += ["| metric | value |", "|---|---|"]
    lines += [
        f"| {key} | {value:.4g} |" if isinstance(value, float) else f"| {key} | {value} |"
        for key, value in sorted(metrics.items())
    ]
    lines += ["", "| count | value |", "|---|---|"]
    lines += [f"| {key} | {value} |" for key, value in counts.items() if not isinstance(value, (dict, list))]
    path = run_dir / REPORT
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


__all__ = ["loss_curves", "write_loss_report"]
