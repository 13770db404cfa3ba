"""Grouped bootstrap intervals for verdict metrics (seed App. G).

Candidates of one problem are not independent, so the resampling unit is the problem (group):
each resample draws as many groups as there are, with replacement, and takes every row of each
drawn group (a group drawn twice counts twice). Defaults follow the seed: 5,000 resamples, seed
42, 95% percentile intervals. Paired differences between two evaluators use the same resamples for
both, so the interval of ``A - B`` reflects only how they differ.

Everything is vectorized over resamples: a resample is a row of group multiplicities ``W`` (B x G);
confusion counts are ``W @ per_group_counts`` and AUROC is computed for all resamples at once from
score-sorted, weighted rows (ties count half).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable, Hashable, Iterator, Sequence

import numpy as np

from leanloop.metrics.verdicts import as_labels, auroc, rates_from_counts

DEFAULT_METRICS = ("accuracy", "f1", "macro_f1", "mcc", "auroc", "precision_valid", "recall_valid", "fpr")
N_RESAMPLES = 5000
SEED = 42


@dataclass(frozen=True)
class Interval:
    point: float  # the metric on the full data
    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def group_index(groups: Sequence[Hashable]) -> tuple[np.ndarray, int]:
    """Dense group ids 0..G-1 for the rows, and G."""
    if len(groups) == 0:
        raise ValueError("no rows to bootstrap")
    keys = np.asarray([str(g) for g in groups])
    _, inverse = np.unique(keys, return_inverse=True)
    return inverse.astype(np.int64), int(inverse.max()) + 1


def resample_weights(
    n_groups: int, n_resamples: int = N_RESAMPLES, seed: int = SEED, chunk: int = 500
) -> Iterator[np.ndarray]:
    """Group multiplicities of each resample, ``chunk`` resamples at a time (int arrays B x G).
    The draws depend only on ``seed``, ``n_groups`` and ``chunk``."""
    rng = np.random.default_rng(seed)
    for start in range(0, n_resamples, chunk):
        size = min(chunk, n_resamples - start)
        drawn = rng.integers(0, n_groups, size=(size, n_groups))
        flat = (drawn + np.arange(size)[:, None] * n_groups).ravel()
        yield np.bincount(flat, minlength=size * n_groups).reshape(size, n_groups)


def _count_metrics(
    weights: np.ndarray, labels: np.ndarray, predictions: np.ndarray, group: np.ndarray, n_groups: int
) -> dict[str, np.ndarray]:
    per_group = np.zeros((n_groups, 4))
    for column, mask in enumerate(
        (labels & predictions, ~labels & predictions, ~labels & ~predictions, labels & ~predictions)
    ):
        per_group[:, column] = np.bincount(group, weights=mask.astype(float), minlength=n_groups)
    tp, fp, tn, fn = (weights @ per_group).T
    return rates_from_counts(tp, fp, tn, fn)  # type: ignore[return-value]


class _AurocResampler:
    """AUROC of every resample: rows sorted by score once, tie blocks summed per resample."""

    def __init__(self, labels: np.ndarray, scores: np.ndarray, group: np.ndarray):
        order = np.argsort(scores, kind="mergesort")
        sorted_scores = scores[order]
        self.group = group[order]
        self.positive = labels[order].astype(float)
        self.starts = np.r_[0, np.flatnonzero(np.diff(sorted_scores) != 0) + 1]

    def __call__(self, weights: np.ndarray) -> np.ndarray:
        rows = weights[:, self.group].astype(float)
        positive = np.add.reduceat(rows * self.positive, self.starts, axis=1)
        negative = np.add.reduceat(rows * (1.0 - self.positive), self.starts, axis=1)
        below = np.cumsum(negative, axis=1) - negative
        numerator = (positive * (below + 0.5 * negative)).sum(1)
        denominator = positive.sum(1) * negative.sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1), np.nan)


def _evaluator(
    labels: np.ndarray,
    group: np.ndarray,
    n_groups: int,
    scores: np.ndarray | None,
    predictions: np.ndarray | None,
    threshold: float,
    metrics: Sequence[str],
) -> tuple[dict[str, float], Callable[[np.ndarray], dict[str, np.ndarray]]]:
    """Point estimates and a function from resample weights to metric arrays."""
    if predictions is None:
        if scores is None:
            raise ValueError("an evaluator needs scores or predictions")
        predictions = scores >= threshold
    predictions = as_labels(predictions).astype(bool)
    want_auroc = "auroc" in metrics and scores is not None
    resample_auroc = _AurocResampler(labels, scores, group) if want_auroc else None
    ones = np.ones((1, n_groups))
    point = {k: float(v[0]) for k, v in _count_metrics(ones, labels, predictions, group, n_groups).items()}
    point["auroc"] = auroc(labels, scores) if want_auroc else float("nan")

    def compute(weights: np.ndarray) -> dict[str, np.ndarray]:
        values = _count_metrics(weights, labels, predictions, group, n_groups)
        if resample_auroc is not None:
            values["auroc"] = resample_auroc(weights)
        return {name: values[name] for name in metrics if name in values}

    return {name: point[name] for name in metrics if name in point}, compute


def _prepare(labels, groups, scores):
    labels = as_labels(labels).astype(bool)
    group, n_groups = group_index(groups)
    if group.size != labels.size:
        raise ValueError(f"{labels.size} labels but {group.size} groups: every row needs its problem group")
    if scores is not None:
        scores = np.asarray(scores, dtype=np.float64)
        if scores.shape != labels.shape or np.isnan(scores).any():
            raise ValueError("scores must be one finite number per row")
    return labels, group, n_groups, scores


def bootstrap_samples(
    labels,
    groups,
    scores=None,
    predictions=None,
    threshold: float = 0.5,
    metrics: Sequence[str] = DEFAULT_METRICS,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """(point estimates, metric value of every resample) for one evaluator."""
    labels, group, n_groups, scores = _prepare(labels, groups, scores)
    point, compute = _evaluator(labels, group, n_groups, scores, predictions, threshold, metrics)
    chunks = [compute(weights) for weights in resample_weights(n_groups, n_resamples, seed)]
    return point, {name: np.concatenate([c[name] for c in chunks]) for name in point}


def _interval(point: float, samples: np.ndarray, confidence: float) -> Interval:
    finite = samples[np.isfinite(samples)]
    if finite.size == 0:
        return Interval(point, float("nan"), float("nan"))
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(finite, [tail, 100.0 - tail])
    return Interval(point, float(low), float(high))


def grouped_bootstrap(
    labels,
    groups,
    scores=None,
    predictions=None,
    threshold: float = 0.5,
    metrics: Sequence[str] = DEFAULT_METRICS,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
    confidence: float = 0.95,
) -> dict[str, Interval]:
    """Percentile intervals of each metric under the grouped bootstrap. Verdicts are
    ``predictions`` when given, else ``score >= threshold``; AUROC needs scores."""
    point, samples = bootstrap_samples(labels, groups, scores, predictions, threshold, metrics, n_resamples, seed)
    return {name: _interval(point[name], samples[name], confidence) for name in point}


@dataclass(frozen=True)
class PairedInterval(Interval):
    share_positive: float  # share of resamples in which A - B > 0


def paired_bootstrap(
    labels,
    groups,
    scores_a=None,
    scores_b=None,
    predictions_a=None,
    predictions_b=None,
    threshold: float = 0.5,
    metrics: Sequence[str] = DEFAULT_METRICS,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
    confidence: float = 0.95,
) -> dict[str, PairedInterval]:
    """Intervals of the difference A - B between two evaluators on the same rows, both evaluated
    on each resample's rows."""
    labels, group, n_groups, scores_a = _prepare(labels, groups, scores_a)
    scores_b = _prepare(labels, groups, scores_b)[3]
    point_a, compute_a = _evaluator(labels, group, n_groups, scores_a, predictions_a, threshold, metrics)
    point_b, compute_b = _evaluator(labels, group, n_groups, scores_b, predictions_b, threshold, metrics)
    names = [name for name in point_a if name in point_b]
    diffs: dict[str, list[np.ndarray]] = {name: [] for name in names}
    for weights in resample_weights(n_groups, n_resamples, seed):
        a, b = compute_a(weights), compute_b(weights)
        for name in names:
            diffs[name].append(a[name] - b[name])
    out = {}
    for name in names:
        samples = np.concatenate(diffs[name])
        base = _interval(point_a[name] - point_b[name], samples, confidence)
        finite = samples[np.isfinite(samples)]
        share = float(np.mean(finite > 0)) if finite.size else float("nan")
        out[name] = PairedInterval(base.point, base.low, base.high, share)
    return out


def bootstrap_samples_loop(
    labels,
    groups,
    scores=None,
    predictions=None,
    threshold: float = 0.5,
    metrics: Sequence[str] = DEFAULT_METRICS,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
) -> dict[str, np.ndarray]:
    """The same resamples as :func:`bootstrap_samples`, evaluated one at a time on explicitly
    gathered rows with the plain metric functions: the reference the vectorized path is tested and
    benchmarked against."""
    from leanloop.metrics.verdicts import classification_metrics

    labels, group, n_groups, scores = _prepare(labels, groups, scores)
    predicted = as_labels(predictions) if predictions is not None else (scores >= threshold).astype(int)
    rows_of = [np.flatnonzero(group == g) for g in range(n_groups)]
    out: dict[str, list[float]] = {name: [] for name in metrics}
    for weights in resample_weights(n_groups, n_resamples, seed):
        for multiplicity in weights:
            rows = np.concatenate([np.repeat(rows_of[g], m) for g, m in enumerate(multiplicity) if m])
            values = classification_metrics(labels[rows].astype(int), predicted[rows])
            if scores is not None:
                values["auroc"] = auroc(labels[rows].astype(int), scores[rows])
            for name in metrics:
                if name in values:
                    out[name].append(float(values[name]))
    return {name: np.asarray(v) for name, v in out.items() if v}
