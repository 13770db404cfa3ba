"""Verdict classifiers ("Learning Lean Feedback", Section 4.1): an encoder sequence classifier and a
one-token causal-LM classifier, trained on the labelled corpus and served through the shared
Evaluator interface (:mod:`leanloop.evaluator`).

- :mod:`classifiers.truncation` head+tail truncation (first 1/4, last 3/4 of the context), shared by both;
- :mod:`classifiers.model_io` input formats and score functions (one forward pass each);
- :mod:`classifiers.module` / :mod:`classifiers.data` / :mod:`classifiers.config` / :mod:`classifiers.train`
  the Lightning stage (``python -m classifiers.train --config configs/classifiers/X.yaml``);
- :mod:`classifiers.evaluator` batch scoring of a finished run (``ClassifierEvaluator.load(<run>/final)``);
- :mod:`classifiers.baselines` / :mod:`classifiers.run_report` / :mod:`classifiers.combined_report` the trivial
  baselines (majority, per-problem prior, TF-IDF, sibling rate, nearest proof), thresholds on validation, reports with
  grouped bootstrap intervals;
- :mod:`classifiers.cli` ``leanloop classify``.
"""
