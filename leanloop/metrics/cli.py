"""``leanloop metrics feedback|verdicts`` and ``leanloop report``.

- ``leanloop metrics feedback REFERENCE.lean PREDICTION.lean`` prints ``block_f1``,
  ``anchored_block_f1``, ``token_f1``, ``error_agreement`` (and the prediction's verdict and source
  preservation against the reference's source).
- ``leanloop metrics verdicts PREDICTIONS.jsonl`` (rows with ``label``, ``score``, ``group``; optional
  ``prediction``) prints ``accuracy``, ``f1``, ``macro_f1``, ``mcc``, ``auroc``, the per-class
  metrics, and ``intervals`` from the grouped bootstrap.
- ``leanloop report PREDICTIONS.jsonl --out DIR`` writes ``DIR/report.md`` with PNG plots.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any


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


def _feedback(args: argparse.Namespace) -> int:
    from leanloop.metrics.feedback import feedback_scores
    from leanloop.traces.parse import strip_feedback, trace_verdict
    from leanloop.traces.source import source_preservation

    reference, prediction = _read(args.reference, "reference"), _read(args.prediction, "prediction")
    if not reference.strip():
        print(f"error: reference {args.reference} is blank; feedback metrics need a reference trace", file=sys.stderr)
        return 1
    out = feedback_scores(reference, prediction).to_dict()
    out["prediction_verdict"] = trace_verdict(prediction).to_dict()
    out["source_preservation"] = source_preservation(prediction, strip_feedback(reference))
    print(json.dumps(_clean(out)))
    return 0


def _verdicts(args: argparse.Namespace) -> int:
    from leanloop.metrics.bootstrap import grouped_bootstrap
    from leanloop.metrics.report import read_predictions, split_by_evaluator
    from leanloop.metrics.verdicts import verdict_metrics

    try:
        rows, unlabelled = read_predictions(args.predictions)
        evaluators = split_by_evaluator(rows)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    results = {}
    for ev in evaluators:
        metrics = verdict_metrics(ev.labels, ev.scores, ev.predictions, args.threshold, args.valid_fraction)
        intervals = grouped_bootstrap(ev.labels, ev.groups, ev.scores, ev.predictions, args.threshold,
                                      n_resamples=args.resamples, seed=args.seed)
        results[ev.name] = {**metrics, "n_groups": len(set(ev.groups)), "n_unlabelled": unlabelled,
                            "intervals": {name: [iv.low, iv.high] for name, iv in intervals.items()},
                            "bootstrap": {"resamples": args.resamples, "seed": args.seed, "confidence": 0.95,
                                          "unit": "group"}}
    out = next(iter(results.values())) if len(results) == 1 else {"evaluators": results}
    print(json.dumps(_clean(out)))
    return 0


def _report(args: argparse.Namespace) -> int:
    from leanloop.metrics.report import build_report

    try:
        path = build_report(args.predictions, args.out, threshold=args.threshold, n_resamples=args.resamples,
                            seed=args.seed, target_fpr=args.target_fpr, target_recall=args.target_recall)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


def _bootstrap_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threshold", type=float, default=0.5, help="accept when score >= threshold "
                        "(used when rows have no 'prediction')")
    parser.add_argument("--resamples", type=int, default=5000, help="grouped bootstrap resamples")
    parser.add_argument("--seed", type=int, default=42, help="bootstrap seed")


def register(subparsers: argparse._SubParsersAction) -> None:
    metrics = subparsers.add_parser("metrics", help="feedback and verdict metrics as JSON")
    commands = metrics.add_subparsers(dest="metrics_command", metavar="SUBCOMMAND")
    metrics.set_defaults(func=lambda args: (metrics.print_help(), 2)[1])

    feedback = commands.add_parser("feedback", help="feedback metrics of PREDICTION against REFERENCE")
    feedback.add_argument("reference", metavar="REFERENCE.lean")
    feedback.add_argument("prediction", metavar="PREDICTION.lean")
    feedback.set_defaults(func=_feedback)

    verdicts = commands.add_parser("verdicts", help="verdict metrics with grouped bootstrap intervals")
    verdicts.add_argument("predictions", metavar="PREDICTIONS.jsonl", help="rows with label, score, group")
    verdicts.add_argument("--valid-fraction", type=float, action="append", default=[],
                          help="also report PPV at this valid fraction π (repeatable)")
    _bootstrap_options(verdicts)
    verdicts.set_defaults(func=_verdicts)

    report = subparsers.add_parser("report", help="Markdown report with plots from a predictions file")
    report.add_argument("predictions", metavar="PREDICTIONS.jsonl")
    report.add_argument("--out", required=True, metavar="DIR", help="folder for report.md and the PNG plots")
    report.add_argument("--target-fpr", type=float, default=0.05, help="matched-FPR threshold target")
    report.add_argument("--target-recall", type=float, default=0.9, help="matched-recall threshold target")
    _bootstrap_options(report)
    report.set_defaults(func=_report)
