"""``leanloop report PREDICTIONS.jsonl --out DIR``: a Markdown report with tables and PNG plots."""

from __future__ import annotations

import itertools

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from leanloop.jsonl import numbered_jsonl
from leanloop.metrics.bootstrap import N_RESAMPLES, SEED, grouped_bootstrap, paired_bootstrap
from leanloop.metrics.budget import budget_curve, build_pools
from leanloop.metrics.feedback import FEEDBACK_METRICS, feedback_metrics
from leanloop.metrics.verdicts import as_labels, pr_points, roc_points, select_threshold, verdict_metrics

VALID_FRACTIONS = (0.05, 0.1, 0.25, 0.5)
REPORTED = ("accuracy", "f1", "macro_f1", "mcc", "auroc")


@dataclass
class Predictions:
    """Rows of one evaluator with a Lean label."""

    name: str
    labels: np.ndarray
    scores: np.ndarray
    groups: list[str]
    predictions: np.ndarray | None
    rows: list[dict[str, Any]] = field(default_factory=list)

    def subset(self, mask: np.ndarray) -> "Predictions":
        index = np.flatnonzero(mask)
        return Predictions(
            self.name,
            self.labels[index],
            self.scores[index],
            [self.groups[i] for i in index],
            None if self.predictions is None else self.predictions[index],
            [self.rows[i] for i in index],
        )


def read_predictions(path: str | Path) -> tuple[list[dict[str, Any]], int]:
    """Rows with a label, and how many rows had none."""
    rows, unlabelled = [], 0
    for number, row in numbered_jsonl(path):
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{number}: expected a JSON object per line")
        missing = [key for key in ("score", "group") if key not in row] + ([] if "label" in row else ["label"])
        if missing:
            raise ValueError(f"{path}:{number}: missing {', '.join(missing)} (rows need label, score, group)")
        if row["label"] is None:
            unlabelled += 1
            continue
        rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no rows with a label")
    return rows, unlabelled


def split_by_evaluator(rows: list[dict[str, Any]]) -> list[Predictions]:
    names = list(dict.fromkeys(str(row.get("evaluator", "evaluator")) for row in rows))
    out = []
    for name in names:
        mine = [row for row in rows if str(row.get("evaluator", "evaluator")) == name]
        has_predictions = all("prediction" in row and row["prediction"] is not None for row in mine)
        out.append(
            Predictions(
                name,
                as_labels([row["label"] for row in mine]),
                np.asarray([float(row["score"]) for row in mine]),
                [str(row["group"]) for row in mine],
                as_labels([row["prediction"] for row in mine]) if has_predictions else None,
                mine,
            )
        )
    return out


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return "–" if math.isnan(value) else f"{value:.{digits}f}"
    return str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_fmt(cell) for cell in row) + " |" for row in rows]
    return lines + [""]


def _calibration(
    labels: np.ndarray, scores: np.ndarray, bins: int = 10
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(mean score, share valid, count) per equal-width bin on [0, 1], and the expected
    calibration error."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(np.clip(scores, 0.0, 1.0), edges[1:-1]), 0, bins - 1)
    counts = np.bincount(which, minlength=bins).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_score = np.bincount(which, weights=scores, minlength=bins) / counts
        share_valid = np.bincount(which, weights=labels.astype(float), minlength=bins) / counts
    ece = float(np.nansum(counts / counts.sum() * np.abs(mean_score - share_valid)))
    return mean_score, share_valid, counts, ece


def _plots(
    out_dir: Path,
    evaluators: list[Predictions],
    feedback: dict[str, dict[str, Any]],
    curves: dict[str, dict[str, list[float]]],
) -> list[str]:
    from leanloop.plots import pyplot, save

    plt = pyplot()
    written = []

    def write(fig, name: str) -> None:
        save(fig, out_dir / name, dpi=100)
        written.append(name)

    fig, ax = plt.subplots(figsize=(5, 4.5), layout="constrained")
    for ev in evaluators:
        fpr, tpr, _ = roc_points(ev.labels, ev.scores)
        ax.plot(fpr, tpr, label=ev.name)
    ax.plot([0, 1], [0, 1], ls=":", color="grey", label="chance")
    ax.set(xlabel="false-positive rate (invalid accepted)", ylabel="recall (valid accepted)", title="ROC")
    ax.legend(loc="lower right")
    write(fig, "roc.png")

    fig, ax = plt.subplots(figsize=(5, 4.5), layout="constrained")
    for ev in evaluators:
        recall, precision, _ = pr_points(ev.labels, ev.scores)
        ax.plot(np.r_[0.0, recall], np.r_[precision[0] if precision.size else 1.0, precision], label=ev.name)
    base = float(evaluators[0].labels.mean())
    ax.axhline(base, ls=":", color="grey", label=f"valid share {base:.2f}")
    ax.set(xlabel="recall (valid)", ylabel="precision (valid)", title="Precision-recall", ylim=(0, 1.02))
    ax.legend(loc="lower left")
    write(fig, "pr.png")

    fig, ax = plt.subplots(figsize=(5, 4.5), layout="constrained")
    ax.plot([0, 1], [0, 1], ls=":", color="grey", label="perfect calibration")
    for ev in evaluators:
        mean_score, share_valid, counts, ece = _calibration(ev.labels, ev.scores)
        keep = counts > 0
        ax.plot(mean_score[keep], share_valid[keep], marker="o", label=f"{ev.name} (ECE {ece:.3f})")
    ax.set(xlabel="mean score in bin", ylabel="share valid in bin", title="Reliability", xlim=(0, 1), ylim=(0, 1))
    ax.legend(loc="upper left")
    write(fig, "reliability.png")

    fig, axes = plt.subplots(len(evaluators), 1, figsize=(6, 3 * len(evaluators)), squeeze=False, layout="constrained")
    for ax, ev in zip(axes[:, 0], evaluators):
        bins = np.linspace(min(0.0, ev.scores.min()), max(1.0, ev.scores.max()), 26)
        ax.hist(ev.scores[ev.labels == 1], bins=bins, alpha=0.6, label="valid")
        ax.hist(ev.scores[ev.labels == 0], bins=bins, alpha=0.6, label="invalid")
        ax.set(xlabel="score", ylabel="candidates", title=f"Scores by Lean label: {ev.name}")
        ax.legend()
    write(fig, "score_hist.png")

    if feedback:
        fig, axes = plt.subplots(
            1, len(FEEDBACK_METRICS), figsize=(3.2 * len(FEEDBACK_METRICS), 3.2), layout="constrained"
        )
        for ax, metric in zip(axes, FEEDBACK_METRICS):
            for name, result in feedback.items():
                values = [row[metric] for row in result["per_program"] if row is not None]
                ax.hist(values, bins=np.linspace(0, 1, 11), alpha=0.6, label=name)
            ax.set(title=metric, xlabel="per-program value", ylabel="programs")
        axes[0].legend()
        write(fig, "feedback_metrics.png")

    if curves:
        fig, ax = plt.subplots(figsize=(5.5, 4.5), layout="constrained")
        first = next(iter(curves.values()))
        ax.plot(first["k"], first["oracle"], ls="--", color="black", label="oracle")
        ax.plot(first["k"], first["random"], ls=":", color="grey", label="random order (exact)")
        for name, curve in curves.items():
            ax.plot(curve["k"], curve["ranked"], marker=".", label=name)
        ax.set(
            xlabel="compilations per problem (k)",
            ylabel="problems covered",
            title="Budgeted compilation replay",
            ylim=(0, 1.02),
        )
        ax.legend(loc="lower right")
        write(fig, "budget_coverage.png")
    return written


def _validation_rows(ev: Predictions) -> np.ndarray:
    from leanloop.corpus import VALID, canonical_split

    return np.asarray([canonical_split(str(r.get("split", "")).lower()) == VALID for r in ev.rows])


def matched_targets(
    evaluators: Sequence[Predictions], match_to: str | None, threshold: float
) -> tuple[float | None, float | None]:
    """(FPR, recall) of evaluator ``match_to`` on its validation rows, at its own verdicts (LLF
    matches every evaluator's threshold to the cascade's validation rates); (None, None) when that
    evaluator is absent or has no validation rows."""
    reference = next((ev for ev in evaluators if ev.name == match_to), None)
    if reference is None or not _validation_rows(reference).any():
        return None, None
    val = reference.subset(_validation_rows(reference))
    m = verdict_metrics(val.labels, val.scores, val.predictions, threshold)
    return m["fpr"], m["tpr"]


def _thresholds(
    ev: Predictions, validation: np.ndarray, target_fpr: float | None, target_recall: float | None
) -> list[list[Any]]:
    """Thresholds chosen on validation rows, applied to the other rows (a matched criterion without a
    target is left out)."""
    val, test = ev.subset(validation), ev.subset(~validation)
    out = []
    for criterion, target in (("mcc", None), ("fpr", target_fpr), ("recall", target_recall)):
        if criterion != "mcc" and target is None:
            continue
        try:
            choice = select_threshold(val.labels, val.scores, criterion, target)
        except ValueError as exc:
            out.append([criterion, target, None, str(exc), None, None, None])
            continue
        m = verdict_metrics(test.labels, test.scores, threshold=choice.threshold)
        out.append([criterion, target, choice.threshold, m["accuracy"], m["mcc"], m["tpr"], m["fpr"]])
    return out


def build_report(
    predictions_path: str | Path,
    out_dir: str | Path,
    threshold: float = 0.5,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
    target_fpr: float | None = None,
    target_recall: float | None = None,
    match_to: str | None = "cascade",
) -> Path:
    """Write ``report.md`` and its PNG plots to ``out_dir``; returns the report's path. The matched-FPR
    and matched-recall targets default to evaluator ``match_to``'s validation rates (LLF)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows, unlabelled = read_predictions(predictions_path)
    evaluators = split_by_evaluator(rows)
    lines = [f"# Evaluator report: `{Path(predictions_path).name}`", ""]
    lines += [
        f"{len(rows)} labelled rows ({unlabelled} without a Lean label left out), "
        f"{len(evaluators)} evaluator(s), {len(set(evaluators[0].groups))} problem groups, "
        f"{evaluators[0].labels.mean():.1%} valid. Intervals: grouped bootstrap over problems, "
        f"{n_resamples} resamples, seed {seed}, 95% percentile.",
        "",
    ]

    matched_fpr, matched_recall = matched_targets(evaluators, match_to, threshold)
    target_fpr = matched_fpr if target_fpr is None else target_fpr
    target_recall = matched_recall if target_recall is None else target_recall
    reported: list[Predictions] = []
    threshold_rows: list[list[Any]] = []
    for ev in evaluators:
        validation = _validation_rows(ev)
        if validation.any() and (~validation).any():
            threshold_rows += [[ev.name, *row] for row in _thresholds(ev, validation, target_fpr, target_recall)]
            ev = ev.subset(~validation)
        reported.append(ev)

    lines += ["## Verdict metrics", ""]
    table = []
    summaries: dict[str, dict[str, Any]] = {}
    for ev in reported:
        metrics = verdict_metrics(ev.labels, ev.scores, ev.predictions, threshold, VALID_FRACTIONS)
        intervals = grouped_bootstrap(
            ev.labels, ev.groups, ev.scores, ev.predictions, threshold, n_resamples=n_resamples, seed=seed
        )
        summaries[ev.name] = {"metrics": metrics, "intervals": intervals}
        table.append(
            [ev.name, len(ev.labels)]
            + [
                f"{_fmt(metrics[name])} [{_fmt(intervals[name].low)}, {_fmt(intervals[name].high)}]"
                for name in REPORTED
            ]
        )
    lines += [
        "Verdicts: "
        + "; ".join(
            f"{ev.name}: {'its own' if ev.predictions is not None else f'score ≥ {threshold}'}" for ev in reported
        )
        + ".",
        "",
    ]
    lines += _table(["evaluator", "n", *REPORTED], table)

    detail = []
    for name, summary in summaries.items():
        m = summary["metrics"]
        detail.append(
            [
                name,
                m["precision_valid"],
                m["recall_valid"],
                m["f1_valid"],
                m["precision_invalid"],
                m["recall_invalid"],
                m["f1_invalid"],
                m["fpr"],
                m["tp"],
                m["fp"],
                m["tn"],
                m["fn"],
            ]
        )
    lines += ["### Per class", ""]
    lines += _table(
        [
            "evaluator",
            "P valid",
            "R valid",
            "F1 valid",
            "P invalid",
            "R invalid",
            "F1 invalid",
            "FPR",
            "TP",
            "FP",
            "TN",
            "FN",
        ],
        detail,
    )
    lines += ["### Precision of accepted programs at valid fraction π (Eq. 12)", ""]
    lines += _table(
        ["evaluator", *[f"π = {pi}" for pi in VALID_FRACTIONS]],
        [[name, *[s["metrics"]["ppv_at"][str(pi)] for pi in VALID_FRACTIONS]] for name, s in summaries.items()],
    )
    calibration = [[ev.name, _calibration(ev.labels, ev.scores)[3]] for ev in reported]
    lines += ["### Calibration", ""] + _table(["evaluator", "expected calibration error (10 bins)"], calibration)

    if threshold_rows:
        lines += [
            "## Thresholds chosen on validation rows (0.01 grid; midpoints of the observed scores where "
            "they all lie in one grid cell), applied to the rest",
            "",
            f"Matched targets: FPR {_fmt(target_fpr)}, recall {_fmt(target_recall)} "
            + (
                f"(`{match_to}`'s validation rates)"
                if (target_fpr, target_recall) == (matched_fpr, matched_recall) and matched_fpr is not None
                else "(given)"
            ),
            "",
        ]
        lines += _table(
            ["evaluator", "criterion", "target", "threshold", "accuracy", "MCC", "recall", "FPR"], threshold_rows
        )

    if len(reported) > 1:
        lines += ["## Paired differences between every two evaluators (same resamples)", ""]
        paired_rows = []
        for i, j in itertools.combinations(range(len(reported)), 2):
            base, other = reported[i], reported[j]
            a, b = _align(base, other)
            diff = paired_bootstrap(
                a.labels,
                a.groups,
                b.scores,
                a.scores,
                b.predictions,
                a.predictions,
                threshold,
                n_resamples=n_resamples,
                seed=seed,
            )
            for name in REPORTED:
                d = diff[name]
                paired_rows.append([f"{other.name} − {base.name}", name, d.point, d.low, d.high, d.share_positive])
        lines += _table(["comparison", "metric", "difference", "low", "high", "share of resamples > 0"], paired_rows)

    feedback: dict[str, dict[str, Any]] = {}
    for ev in reported:
        if any("reference_trace" in r for r in ev.rows) and any("trace" in r for r in ev.rows):
            feedback[ev.name] = feedback_metrics(
                [r.get("reference_trace") for r in ev.rows], [r.get("trace") for r in ev.rows]
            )
    if feedback:
        lines += ["## Feedback metrics (per-program means; rows without a reference left out)", ""]
        lines += _table(
            ["evaluator", "programs", "excluded", *FEEDBACK_METRICS],
            [[name, f["n"], f["n_excluded"], *[f[m] for m in FEEDBACK_METRICS]] for name, f in feedback.items()],
        )

    curves: dict[str, dict[str, list[float]]] = {}
    for ev in reported:
        pools = build_pools(
            ev.labels,
            ev.scores,
            ev.groups,
            ev.predictions,
            [r.get("benchmark", "") for r in ev.rows],
            [r.get("run", "") for r in ev.rows],
            threshold,
        )
        curves[ev.name] = budget_curve(pools)
    first = next(iter(curves.values()))
    budgets = [k for k in (1, 2, 4, 8, 16, 32) if k <= first["k"][-1]] or [first["k"][-1]]
    lines += [
        "## Budgeted compilation replay",
        "",
        "Pools by (benchmark, run, problem); candidates ranked by verdict, then score; ties and the random "
        "baseline are exact expectations.",
        "",
    ]
    budget_rows = [
        [name, k, curve["ranked"][k - 1], curve["random"][k - 1], curve["oracle"][k - 1]]
        for name, curve in curves.items()
        for k in budgets
    ]
    lines += _table(["evaluator", "k", "coverage (ranked)", "coverage (random)", "oracle"], budget_rows)

    plots = _plots(out, reported, feedback, curves)
    lines += ["## Plots", ""] + [f"![{name[:-4]}]({name})" for name in plots] + [""]
    report = out / "report.md"
    report.write_text("\n".join(lines), encoding="utf-8")
    summary = {
        name: {
            "metrics": {k: v for k, v in s["metrics"].items()},
            "intervals": {k: v.to_dict() for k, v in s["intervals"].items()},
        }
        for name, s in summaries.items()
    }
    (out / "summary.json").write_text(
        json.dumps(
            {
                "evaluators": summary,
                "feedback": {name: {k: v for k, v in f.items() if k != "per_program"} for name, f in feedback.items()},
                "budget": curves,
            },
            indent=2,
            default=_json_default,
        ),
        encoding="utf-8",
    )
    return report


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def _align(a: Predictions, b: Predictions) -> tuple[Predictions, Predictions]:
    """The two evaluators' rows in the same order: by ``id`` when every row has one, else by order."""
    if all("id" in r for r in a.rows + b.rows):
        position = {str(r["id"]): i for i, r in enumerate(b.rows)}
        missing = [str(r["id"]) for r in a.rows if str(r["id"]) not in position]
        if missing or len(position) != len(a.rows):
            raise ValueError(f"evaluators {a.name} and {b.name} do not judge the same ids (e.g. {missing[:3]})")
        order = np.asarray([position[str(r["id"])] for r in a.rows])
        b = Predictions(
            b.name,
            b.labels[order],
            b.scores[order],
            [b.groups[i] for i in order],
            None if b.predictions is None else b.predictions[order],
            [b.rows[i] for i in order],
        )
    if len(a.rows) != len(b.rows) or not np.array_equal(a.labels, b.labels) or a.groups != b.groups:
        raise ValueError(
            f"evaluators {a.name} and {b.name} must judge the same rows (same labels and groups, "
            "paired by 'id' or by order) for paired differences"
        )
    return a, b


def baseline_verdict(
    summary: dict[str, Any], learned: Sequence[str], baselines: Sequence[str], split: str = "test"
) -> list[str]:
    """The first line of every evaluator report: which trivial baseline beats or matches which learned
    evaluator (on AUROC where the evaluator's score is graded, on accuracy where it gives a hard verdict:
    ``summary[name]["auroc_defined"]`` false or no AUROC), or that none does; then a line of the
    baselines' AUROC and accuracy. ``summary``: evaluator -> {"metrics": {...}} on ``split``."""
    baselines = [b for b in baselines if b in summary]
    learned = [n for n in learned if n in summary]
    if not baselines or not learned:
        return []

    def value(name: str, metric: str) -> float:
        got = summary[name]["metrics"].get(metric)
        return float("nan") if got is None else float(got)

    def metric_of(name: str) -> str:
        graded = summary[name].get("auroc_defined", True) and not math.isnan(value(name, "auroc"))
        return "auroc" if graded else "accuracy"

    def shown(name: str, metric: str) -> str:
        return f"{'' if metric == 'auroc' else 'accuracy '}{value(name, metric):.3f}"

    beaten = []
    for name in learned:
        metric = metric_of(name)
        better = [b for b in baselines if value(b, metric) >= value(name, metric)]
        if better:
            best = max(better, key=lambda b: value(b, metric))
            verb = "beats" if value(best, metric) > value(name, metric) else "matches"  # a tie is no gain either
            beaten.append(f"`{best}` ({shown(best, metric)}) {verb} `{name}` ({shown(name, metric)})")
    on = f"on {split} AUROC" + (
        " (accuracy for hard verdicts)" if any(metric_of(n) == "accuracy" for n in learned) else ""
    )
    if beaten:
        first = f"**A BASELINE BEATS THE LEARNED MODEL** {on}: " + "; ".join(beaten) + "."
    else:
        first = (
            f"No baseline beats the learned model {on} ("
            + ", ".join(f"`{n}` {shown(n, metric_of(n))}" for n in learned)
            + f"; best baseline AUROC "
            f"{max(value(b, 'auroc') for b in baselines):.3f}, accuracy {max(value(b, 'accuracy') for b in baselines):.3f})."
        )
    return [
        first,
        "",
        f"Baselines ({split} split): "
        + "; ".join(f"`{b}` AUROC {value(b, 'auroc'):.3f}, accuracy {value(b, 'accuracy'):.3f}" for b in baselines)
        + ".",
        "",
    ]
