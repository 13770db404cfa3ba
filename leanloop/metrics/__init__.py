"""Evaluation metrics shared by every evaluator (seed "Learning Lean Feedback", Sections 5, App. D, G).

- :mod:`leanloop.metrics.feedback`: block F1, anchored block F1, token F1, error-presence agreement;
- :mod:`leanloop.metrics.verdicts`: accuracy, per-class P/R/F1, macro F1, MCC, AUROC, PPV at π,
  threshold selection;
- :mod:`leanloop.metrics.bootstrap`: grouped bootstrap intervals and paired differences;
- :mod:`leanloop.metrics.budget`: budgeted compilation replay against exact random coverage;
- :mod:`leanloop.metrics.report`: Markdown report with plots (``leanloop report``);
- :mod:`leanloop.metrics.cli`: ``leanloop metrics feedback|verdicts`` and ``leanloop report``.
"""

from leanloop.metrics.bootstrap import Interval, grouped_bootstrap, paired_bootstrap
from leanloop.metrics.budget import Pool, budget_curve, build_pools, coverage_at_budget
from leanloop.metrics.feedback import FeedbackScores, feedback_metrics, feedback_scores, multiset_f1
from leanloop.metrics.verdicts import (
    ThresholdChoice,
    auroc,
    classification_metrics,
    ppv_at_prior,
    select_threshold,
    threshold_grid,
    verdict_metrics,
)

__all__ = [
    "Interval",
    "grouped_bootstrap",
    "paired_bootstrap",
    "Pool",
    "budget_curve",
    "build_pools",
    "coverage_at_budget",
    "FeedbackScores",
    "feedback_metrics",
    "feedback_scores",
    "multiset_f1",
    "ThresholdChoice",
    "auroc",
    "classification_metrics",
    "ppv_at_prior",
    "select_threshold",
    "threshold_grid",
    "verdict_metrics",
]
