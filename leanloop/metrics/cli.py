"""``leanloop metrics feedback|verdicts`` and ``leanloop report``.

- ``leanloop metrics feedback REFERENCE.lean PREDICTION.lean`` prints ``block_f1``,
  ``anchored_block_f1``, ``token_f1``, ``error_agreement`` (and the prediction's verdict and source
  preservation against the reference's source).
- ``leanloop metrics verdicts PREDICTIONS.jsonl`` (rows with ``label``, ``score``, ``group``; optional
  ``prediction``) prints ``accuracy``, ``f1``, ``macro_f1``, ``mcc``, ``auroc``, the per-class
  metrics, and ``intervals`` from the grouped bootstrap; ``--valid_fraction [0.1, 0.3]`` adds the
  PPV at those valid fractions.
- ``leanloop report PREDICTIONS.jsonl --out DIR`` writes ``DIR/report.md`` with PNG plots.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leanloop.tool import parse_config


@dataclass
class FeedbackConfig:
    """``leanloop metrics feedback`` options."""

    reference: str
    """REFERENCE.lean: the reference trace."""
    prediction: str
    """PREDICTION.lean: the predicted trace."""


@dataclass
class Bootstrap:
    """The grouped bootstrap's options (``leanloop metrics verdicts``, ``leanloop report``)."""

    threshold: float = 0.5
    """Accept when score >= threshold (used when rows have no 'prediction')."""
    resamples: int = 5000
    """Grouped bootstrap resamples."""
    seed: int = 42
    """Bootstrap seed."""


@dataclass(kw_only=True)
class VerdictsConfig(Bootstrap):
    """``leanloop metrics verdicts`` options."""

    predictions: str
    """PREDICTIONS.jsonl: rows with label, score, group."""
    valid_fraction: list[float] = field(default_factory=list)
    """Also report PPV at these valid fractions π."""


@dataclass(kw_only=True)
class PredictionReportConfig(Bootstrap):
    """``leanloop report`` options."""

    predictions: str
    """PREDICTIONS.jsonl: rows with label, score, group."""
    out: str
    """Folder for report.md and the PNG plots."""
    target_fpr: float | None = None
    """Matched-FPR threshold target (default: the --match_to evaluator's validation FPR)."""
    target_recall: float | None = None
    """Matched-recall threshold target (default: the --match_to evaluator's validation recall)."""
    match_to: str = "cascade"
    """Evaluator whose validation rates set the matched targets."""


def _clean(value: Any) -> Any:
    """JSON without NaN (printed as null) and without numpy scalars."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _read(path: str, what: str) -> str:
    file = Path(path)
    if not file.is_file():
        raise SystemExit(f"error: {what} {path} does not exist")
    return file.read_text(encoding="utf-8")


def feedback(argv: list[str] | None = None, prog: str = "leanloop metrics feedback") -> int:
    from leanloop.metrics.feedback import feedback_scores
    from leanloop.traces.parse import strip_feedback, trace_verdict
    from leanloop.traces.source import source_preservation

    args, _ = parse_config(
        FeedbackConfig,
        argv,
        prog=prog,
        description="feedback metrics of PREDICTION against REFERENCE",
        positional=("reference", "prediction"),
    )
    reference, prediction = _read(args.reference, "reference"), _read(args.prediction, "prediction")
    if not reference.strip():
        print(f"error: reference {args.reference} is blank; feedback metrics need a reference trace", file=sys.stderr)
        return 1
    out = feedback_scores(reference, prediction).to_dict()
    out["prediction_verdict"] = trace_verdict(prediction).to_dict()
    out["source_preservation"] = source_preservation(prediction, strip_feedback(reference))
    print(json.dumps(_clean(out)))
    return 0


def verdicts(argv: list[str] | None = None, prog: str = "leanloop metrics verdicts") -> int:
    from leanloop.metrics.bootstrap import grouped_bootstrap
    from leanloop.metrics.report import read_predictions, split_by_evaluator
    from leanloop.metrics.verdicts import verdict_metrics

    args, _ = parse_config(
        VerdictsConfig,
        argv,
        prog=prog,
        description="verdict metrics with grouped bootstrap intervals",
        positional=("predictions",),
    )
    try:
        rows, unlabelled = read_predictions(args.predictions)
        evaluators = split_by_evaluator(rows)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    results = {}
    for ev in evaluators:
        metrics = verdict_metrics(ev.labels, ev.scores, ev.predictions, args.threshold, args.valid_fraction)
        intervals = grouped_bootstrap(
            ev.labels, ev.groups, ev.scores, ev.predictions, args.threshold, n_resamples=args.resamples, seed=args.seed
        )
        results[ev.name] = {
            **metrics,
            "n_groups": len(set(ev.groups)),
            "n_unlabelled": unlabelled,
            "intervals": {name: [iv.low, iv.high] for name, iv in intervals.items()},
            "bootstrap": {"resamples": args.resamples, "seed": args.seed, "confidence": 0.95, "unit": "group"},
        }
    out = next(iter(results.values())) if len(results) == 1 else {"evaluators": results}
    print(json.dumps(_clean(out)))
    return 0


def report(argv: list[str] | None = None, prog: str = "leanloop report") -> int:
    from leanloop.metrics.report import build_report

    args, _ = parse_config(
        PredictionReportConfig,
        argv,
        prog=prog,
        description="Markdown report with plots from a predictions file",
        positional=("predictions",),
    )
    try:
        path = build_report(
            args.predictions,
            args.out,
            threshold=args.threshold,
            n_resamples=args.resamples,
            seed=args.seed,
            target_fpr=args.target_fpr,
            target_recall=args.target_recall,
            match_to=args.match_to,
        )
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0
