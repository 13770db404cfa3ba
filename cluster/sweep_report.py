"""The end of a sweep: final metrics of every run, from the runs' own manifests.

Writes ``artifacts/sweeps/<sweep>/sweep_summary.csv``, a plot of the sweep's metric per run
(``<metric>.png``; a line over the value when a grid varies one number, bars otherwise) and, once
every run has finished, a ``manifest.json`` whose inputs are the runs' manifests (hashed), so the
summary can be traced to exactly the runs it read.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cluster.names import short_keys
from leanloop.artifacts import MANIFEST, Manifest, read_manifest
from leanloop.paths import artifacts_root

if TYPE_CHECKING:  # the sweep runs and then calls this report: types only, no import circle
    from cluster.sweep import RunStatus, SweepConfig

SUMMARY_CSV = "sweep_summary.csv"
PREFERRED_METRICS = ("val/loss", "val_loss")


@dataclass
class Summary:
    rows: list[dict[str, Any]]
    metric: str | None
    best: str | None
    table: str
    csv_path: Path
    plot_path: Path | None = None
    manifest_path: Path | None = None
    columns: list[str] = field(default_factory=list)


def summary_dir(sweep: SweepConfig) -> Path:
    return artifacts_root() / "sweeps" / sweep.name


def metric_number(value: Any) -> float | None:
    """A manifest metric as a float (None for absent, "" or non-numbers)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value)  # manifests keep nan/inf as strings
    except (TypeError, ValueError):
        return None


def choose_metric(sweep: SweepConfig, metric_keys: list[str]) -> str | None:
    if sweep.metric:
        return sweep.metric
    for key in PREFERRED_METRICS:
        if key in metric_keys:
            return key
    return metric_keys[0] if metric_keys else None


def summarize(sweep: SweepConfig, statuses: list[RunStatus]) -> Summary:
    folder = summary_dir(sweep)
    folder.mkdir(parents=True, exist_ok=True)
    varied_keys = list(dict.fromkeys(k for s in statuses for k in s.run.varied))
    short = short_keys(varied_keys)
    manifests: dict[str, dict[str, Any]] = {}
    for status in statuses:
        run_dir = status.run.stage_run.run_dir
        if (run_dir / MANIFEST).is_file():
            manifests[status.run.name] = read_manifest(run_dir, stage=sweep.stage)
    metric_keys = sorted({k for m in manifests.values() for k in (m.get("metrics") or {})})
    metric = choose_metric(sweep, metric_keys)
    if metric and manifests and metric not in metric_keys:
        print(f"warning: metric {metric!r} is in no run's manifest (they have: {', '.join(metric_keys)})")
    ordered_metrics = ([metric] if metric in metric_keys else []) + [k for k in metric_keys if k != metric]

    rows = []
    for status in statuses:
        manifest = manifests.get(status.run.name, {})
        row: dict[str, Any] = {"run": status.run.name, "status": status.status}
        if status.run.label:
            row["label"] = status.run.label
        for key in varied_keys:
            row[short[key]] = status.run.varied.get(key, "")
        for key in ordered_metrics:
            row[key] = (manifest.get("metrics") or {}).get(key, "")
        row["detail"] = status.detail
        rows.append(row)

    best = _best(rows, metric, sweep.mode)
    columns = list(dict.fromkeys(k for row in rows for k in row))
    csv_path = folder / SUMMARY_CSV
    with open(csv_path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k, "") for k in columns})
    plot_path = _plot(sweep, rows, metric, best, varied_keys, short, folder)
    manifest_path = None
    if statuses and all(s.run.name in manifests for s in statuses):
        best_value = metric_number(next((r.get(metric) for r in rows if r["run"] == best), None))
        record = Manifest(
            stage="sweeps",
            run=sweep.name,
            counts={"runs": len(statuses)},
            metrics={"best_value": best_value},
            extra={
                "swept_stage": sweep.stage,
                "metric": metric,
                "mode": sweep.mode,
                "best_run": best,
                "summary": SUMMARY_CSV,
            },
        )
        for status in statuses:
            record.add_input(status.run.name, status.run.stage_run.run_dir)
        manifest_path = record.write(folder)
    return Summary(
        rows=rows,
        metric=metric,
        best=best,
        table=_table(rows, columns, best),
        csv_path=csv_path,
        plot_path=plot_path,
        manifest_path=manifest_path,
        columns=columns,
    )


def _best(rows: list[dict[str, Any]], metric: str | None, mode: str) -> str | None:
    scored = [
        (value, row["run"])
        for row in rows
        if metric and (value := metric_number(row.get(metric))) is not None and math.isfinite(value)
    ]
    if not scored:
        return None
    return (min(scored) if mode == "min" else max(scored))[1]


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.5g}"
    return str(value)


def _table(rows: list[dict[str, Any]], columns: list[str], best: str | None) -> str:
    shown = [c for c in columns if c != "detail" or any(r.get("detail") for r in rows)]
    cells = [[_cell(r.get(c, "")) + (" *" if c == "run" and r["run"] == best else "") for c in shown] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(shown)]
    line = "  ".join(c.ljust(w) for c, w in zip(shown, widths))
    body = ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    footer = ["(* best run)"] if best else []
    return "\n".join([line, "  ".join("-" * w for w in widths), *body, *footer])


def _plot(
    sweep: SweepConfig,
    rows: list[dict[str, Any]],
    metric: str | None,
    best: str | None,
    varied_keys: list[str],
    short: dict[str, str],
    folder: Path,
) -> Path | None:
    points = [(row, metric_number(row.get(metric))) for row in rows] if metric else []
    points = [(row, value) for row, value in points if value is not None and math.isfinite(value)]
    if not points:
        return None
    from leanloop.plots import pyplot, save

    plt = pyplot()

    numeric_axis = (
        sweep.grid is not None
        and len(varied_keys) == 1
        and all(metric_number(row.get(short[varied_keys[0]])) is not None for row, _ in points)
    )
    fig, ax = plt.subplots(figsize=(7, max(3.0, 0.4 * len(points) + 1.5)) if not numeric_axis else (6, 4))
    if numeric_axis:
        key = short[varied_keys[0]]
        xs = [metric_number(row[key]) for row, _ in points]
        order = sorted(range(len(xs)), key=xs.__getitem__)
        ax.plot([xs[i] for i in order], [points[i][1] for i in order], marker="o")
        if min(xs) > 0 and max(xs) / min(xs) >= 10:
            ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_xticks(sorted(set(xs)), [f"{x:g}" for x in sorted(set(xs))])  # the swept values only
        for (row, value), x in zip(points, xs):
            if row["run"] == best:
                ax.scatter([x], [value], s=120, facecolors="none", edgecolors="crimson", label="best")
        ax.set_xlabel(varied_keys[0])
        ax.set_ylabel(metric)
        if best:
            ax.legend()
    else:
        labels = [row.get("label") or row["run"].split("__", 1)[-1] for row, _ in points]
        colors = ["crimson" if row["run"] == best else "steelblue" for row, _ in points]
        ax.barh(range(len(points)), [v for _, v in points], color=colors)
        ax.set_yticks(range(len(points)), labels)
        ax.invert_yaxis()
        ax.set_xlabel(metric + (" (red: best)" if best else ""))
    ax.set_title(f"sweep {sweep.name}: {metric} ({sweep.mode} is better)")
    fig.tight_layout()
    path = folder / (re.sub(r"[^A-Za-z0-9._-]+", "_", metric) + ".png")
    save(fig, path, dpi=100)
    return path
