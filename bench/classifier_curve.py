"""``python -m bench.classifier_curve`` (``make bench-classifier-curve``): learning curve of a learned
classifier against TF-IDF on the project's test split.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from leanloop.paths import REPO_ROOT

SIZES = (250, 500, 1000, None)  # None: every training row


@dataclass
class CurveConfig:
    """``python -m bench.classifier_curve`` options."""

    recipe: str = str(REPO_ROOT / "configs/classifiers/encoder_default.yaml")
    """The classifiers stage's config trained at every point (``--config`` of ``python -m classifiers.train``)."""
    corpus: str = "artifacts://data/default"
    sizes: str = "250,500,1000,all"
    """Training rows per point, comma-separated (all: every row)."""
    seeds: str = "0,1,2"
    resamples: int = 200
    """Bootstrap resamples of each run's report."""
    smoke: bool = False
    """configs/classifiers/debug.yaml (its own recorded-verdicts file), 2 sizes, 1 seed, one batch."""
    json: str | None = None
    """Also write the numbers to this file."""


def parse_list(text: str, what: str, allow_all: bool = False) -> list[int | None]:
    try:
        return [None if allow_all and part.strip() == "all" else int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(
            f"{what} is a comma-separated list of integers{' or all' if allow_all else ''}, got {text!r}"
        ) from None


def run_one(
    recipe: str, corpus: str, rows: int | None, seed: int, resamples: int, extra: list[str]
) -> dict[str, float]:
    """Test AUROC of the classifier and of TF-IDF for one (size, seed)."""
    from classifiers.run_report import TFIDF
    from classifiers.train import run

    name = f"curve_{Path(recipe).stem}_n{rows or 'all'}_s{seed}"
    result = run(
        [
            "--config",
            recipe,
            "--run",
            name,
            "--data.corpus",
            corpus,
            "--seed_everything",
            str(seed),
            "--data.train_rows",
            "null" if rows is None else str(rows),
            "--data.train_rows_seed",
            str(seed),
            "--model.init_args.evaluation.n_resamples",
            str(resamples),
            "--log.csv",
            "false",
            *extra,
        ]
    )
    summary = json.loads((result.run_dir / "summary.json").read_text())["evaluators"]
    mine = next(k for k in summary if k.startswith(("encoder:", "onetoken:")))
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    used = manifest.get("counts", {}).get("corpus", {}).get("train/used") or manifest.get("counts", {}).get(
        "corpus", {}
    ).get("train/labelled")
    return {
        "classifier": float(summary[mine]["metrics"]["auroc"]),
        "tfidf": float(summary[TFIDF]["metrics"]["auroc"]),
        "rows": used,
    }


FARTHEST = 100
"""An extrapolated crossing beyond this many times the largest measured size is no crossing in sight
(a nearly flat line through noisy gaps crosses zero at an absurd size)."""


def crossing(sizes: list[int], gaps: list[float]) -> dict[str, Any]:
    """The smallest measured size from which the classifier's mean AUROC stays at or above TF-IDF's
    (at every larger size too); else where a line through the gap against log(rows) crosses zero,
    when that is within :data:`FARTHEST` times the data (``beyond``: the farther crossing, if any)."""
    for i, n in enumerate(sizes):
        if all(gap >= 0 for gap in gaps[i:]):
            return {"measured": True, "rows": n}
    if len(sizes) < 2:
        return {"measured": False, "rows": None}
    slope, intercept = np.polyfit(np.log(sizes), gaps, 1)
    if slope <= 0:
        return {"measured": False, "rows": None, "slope_per_log_row": float(slope)}
    log_rows = -intercept / slope
    if log_rows > math.log(FARTHEST * max(sizes)):
        return {
            "measured": False,
            "rows": None,
            "slope_per_log_row": float(slope),
            "beyond": float(math.exp(min(log_rows, 700.0))),
        }
    return {"measured": False, "rows": float(math.exp(log_rows)), "slope_per_log_row": float(slope)}


def describe_crossing(where: dict[str, Any], learner: str, metric: str, unit: str, rival: str = "TF-IDF") -> str:
    """One line on :func:`crossing`'s answer: from how many training ``unit`` ``learner``'s ``metric``
    stays at or above ``rival``'s."""
    behind = f"{learner} does not stay at or above {rival}"
    if where["measured"]:
        return f"{learner} is at or above {rival}'s {metric} from {where['rows']} training {unit} on"
    if where["rows"]:
        return (
            f"{behind}; a straight line through the gap against log({unit}) crosses zero at ~{where['rows']:,.0f} "
            f"{unit} (an extrapolation)"
        )
    if where.get("beyond"):
        return (
            f"{behind}; a straight line through the gap against log({unit}) (slope "
            f"{where['slope_per_log_row']:+.4f} per e-fold) crosses zero only beyond {FARTHEST}x the data "
            f"(~{where['beyond']:.1e} {unit}): no crossing in sight"
        )
    return f"{behind} and the gap does not shrink with more {unit}: no crossing in sight"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from leanloop.tool import check_output_file, parse_config

    options = parse_config(
        CurveConfig, argv, prog="python -m bench.classifier_curve", description=__doc__.splitlines()[0]
    )[0]
    check_output_file(options.json)
    sizes = parse_list(options.sizes, "sizes", allow_all=True)
    seeds = [int(s) for s in parse_list(options.seeds, "seeds")]
    if any(n is not None and n < 1 for n in sizes):
        raise ValueError(f"sizes must be at least 1 training row each, got {options.sizes!r}")
    extra: list[str] = []
    recipe, corpus = options.recipe, options.corpus
    if options.smoke:
        recipe, sizes, seeds = str(REPO_ROOT / "configs/classifiers/debug.yaml"), [16, None], [0]
        corpus, extra = "null", ["--trainer.fast_dev_run", "true"]
    else:  # named inputs are checked before the first of the runs, not inside it
        from leanloop.artifacts import resolve_run
        from leanloop.paths import repo_file

        repo_file(recipe, "--recipe")
        resolve_run(corpus, "data")
    began = time.perf_counter()
    points: list[dict[str, Any]] = []
    for rows in sizes:
        runs = [run_one(recipe, corpus, rows, seed, options.resamples, extra) for seed in seeds]
        point = {
            "rows": runs[0]["rows"] if rows is None else rows,
            "requested": rows or "all",
            "classifier": [r["classifier"] for r in runs],
            "tfidf": [r["tfidf"] for r in runs],
        }
        point["classifier_mean"], point["tfidf_mean"] = (
            float(np.mean(point["classifier"])),
            float(np.mean(point["tfidf"])),
        )
        point["gap"] = point["classifier_mean"] - point["tfidf_mean"]
        points.append(point)
        print(
            f"rows {point['rows']!s:>5}: {Path(recipe).stem} AUROC {point['classifier_mean']:.3f} "
            f"({', '.join(f'{v:.3f}' for v in point['classifier'])}) vs TF-IDF {point['tfidf_mean']:.3f} "
            f"({', '.join(f'{v:.3f}' for v in point['tfidf'])}): gap {point['gap']:+.3f}",
            flush=True,
        )
    where = crossing([int(p["rows"]) for p in points if p["rows"]], [p["gap"] for p in points if p["rows"]])
    print(describe_crossing(where, "the classifier", "mean test AUROC", "rows"))
    out = {
        "recipe": recipe,
        "corpus": corpus,
        "seeds": seeds,
        "points": points,
        "crossing": where,
        "wall_s": time.perf_counter() - began,
    }
    print(f"bench.classifier_curve: {out['wall_s']:.0f} s")
    if options.json:
        Path(options.json).write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m bench.classifier_curve"))
