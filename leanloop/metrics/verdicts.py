"""Verdict metrics for evaluators (seed Sections 5 and Appendix G).

Conventions: ``labels`` are 1 for a valid program (Lean accepts it) and 0 for an invalid one;
``scores`` are the evaluator's belief that the program is valid; ``predictions`` are its verdicts
(1 = accept). The *valid* class is the positive class: ``f1`` is the valid-class F1, ``recall`` of
the valid class is the share of valid programs accepted, ``fpr`` the share of invalid programs
accepted. Undefined ratios (no predicted positives, a class absent) follow scikit-learn: precision,
recall, F1 and MCC are 0 there; AUROC is NaN when only one class is present.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

THRESHOLD_GRID = np.round(np.arange(0, 101) / 100.0, 2)  # 0.00, 0.01, ..., 1.00
GRID_CANDIDATES = "0.01 grid"  # ThresholdChoice.candidates when THRESHOLD_GRID was used


def as_labels(values: Sequence[object] | np.ndarray) -> np.ndarray:
    """0/1 int array from bools, 0/1 numbers or ``"valid"``/``"invalid"`` strings."""
    array = np.asarray(values) if not isinstance(values, np.ndarray) else values
    if array.dtype.kind in "biuf" and array.ndim == 1:
        if array.dtype.kind == "f" and np.isnan(array).any():
            raise ValueError(f"{int(np.isnan(array).sum())} labels are missing: drop rows without a Lean verdict first")
        if not np.isin(array, (0, 1)).all():
            bad = array[~np.isin(array, (0, 1))][0]
            raise ValueError(f"label {bad!r}: expected 0/1")
        return array.astype(np.int64)
    out = np.empty(len(values), dtype=np.int64)
    for i, value in enumerate(values):
        if isinstance(value, str):
            text = value.strip().lower()
            if text in ("valid", "true", "1", "yes", "pass"):
                out[i] = 1
            elif text in ("invalid", "false", "0", "no", "fail"):
                out[i] = 0
            else:
                raise ValueError(f"label {value!r} at index {i}: expected valid/invalid, true/false or 1/0")
        elif value is None or (isinstance(value, float) and np.isnan(value)):
            raise ValueError(f"label at index {i} is missing: drop rows without a Lean verdict first")
        elif value in (0, 1) or isinstance(value, (bool, np.bool_)):
            out[i] = int(bool(value))
        else:
            raise ValueError(f"label {value!r} at index {i}: expected 0/1")
    return out


def _scores(values: Sequence[float] | np.ndarray) -> np.ndarray:
    scores = np.asarray(values, dtype=np.float64)
    if scores.ndim != 1:
        raise ValueError(f"scores must be one-dimensional, got shape {scores.shape}")
    if np.isnan(scores).any():
        raise ValueError(f"{int(np.isnan(scores).sum())} scores are NaN: every row needs a score")
    return scores


@dataclass(frozen=True)
class Confusion:
    tp: int  # valid, accepted
    fp: int  # invalid, accepted
    tn: int  # invalid, rejected
    fn: int  # valid, rejected

    @classmethod
    def from_predictions(cls, labels: np.ndarray, predictions: np.ndarray) -> "Confusion":
        labels, predictions = np.asarray(labels).astype(bool), np.asarray(predictions).astype(bool)
        if labels.shape != predictions.shape:
            raise ValueError(f"labels {labels.shape} and predictions {predictions.shape} differ in length")
        return cls(
            int(np.sum(labels & predictions)),
            int(np.sum(~labels & predictions)),
            int(np.sum(~labels & ~predictions)),
            int(np.sum(labels & ~predictions)),
        )


def rates_from_counts(tp, fp, tn, fn) -> dict[str, np.ndarray | float]:
    """All count-based metrics from confusion counts; works elementwise on arrays (the bootstrap
    passes one entry per resample)."""
    tp, fp, tn, fn = (np.asarray(x, dtype=np.float64) for x in (tp, fp, tn, fn))
    n = tp + fp + tn + fn

    def ratio(num, den):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den > 0, num / np.where(den > 0, den, 1), 0.0)

    precision_valid, recall_valid = ratio(tp, tp + fp), ratio(tp, tp + fn)
    precision_invalid, recall_invalid = ratio(tn, tn + fn), ratio(tn, tn + fp)
    f1_valid = ratio(2 * tp, 2 * tp + fp + fn)
    f1_invalid = ratio(2 * tn, 2 * tn + fn + fp)
    mcc_den = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    mcc = ratio(tp * tn - fp * fn, mcc_den)
    out = {
        "accuracy": ratio(tp + tn, n),
        "precision_valid": precision_valid,
        "recall_valid": recall_valid,
        "f1_valid": f1_valid,
        "precision_invalid": precision_invalid,
        "recall_invalid": recall_invalid,
        "f1_invalid": f1_invalid,
        "f1": f1_valid,
        "macro_f1": (f1_valid + f1_invalid) / 2,
        "mcc": mcc,
        "fpr": ratio(fp, fp + tn),
        "tpr": recall_valid,
    }
    return {k: (float(v) if np.ndim(v) == 0 else v) for k, v in out.items()}


def classification_metrics(labels, predictions) -> dict[str, float]:
    """Accuracy, per-class precision/recall/F1, ``f1`` (valid class), ``macro_f1``, ``mcc``,
    ``tpr``/``fpr`` and the confusion counts."""
    labels, predictions = as_labels(labels), as_labels(predictions)
    confusion = Confusion.from_predictions(labels, predictions)
    return {
        **rates_from_counts(confusion.tp, confusion.fp, confusion.tn, confusion.fn),
        **asdict(confusion),
        "n": int(labels.size),
    }


def auroc(labels, scores) -> float:
    """Area under the ROC curve: the probability that a random valid program outscores a random
    invalid one, ties counting half (Mann-Whitney U / (n_valid n_invalid)). NaN with one class."""
    labels, scores = as_labels(labels), _scores(scores)
    n_pos, n_neg = int(labels.sum()), int(labels.size - labels.sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = scores[order]
    # Midranks (1-based) give ties half credit.
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    midrank_of_block = first + (counts + 1) / 2.0
    ranks = np.empty_like(scores)
    ranks[order] = np.repeat(midrank_of_block, counts)
    u = ranks[labels == 1].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def ppv_at_prior(tpr: float, fpr: float, valid_fraction: float) -> float:
    """Eq. 12: precision of accepted programs when a share ``π`` of candidates is valid,
    ``PPV(π) = π·TPR / (π·TPR + (1-π)·FPR)``; NaN when nothing would be accepted."""
    if not 0.0 <= valid_fraction <= 1.0:
        raise ValueError(f"valid fraction π must lie in [0, 1], got {valid_fraction}")
    accepted = valid_fraction * tpr + (1.0 - valid_fraction) * fpr
    return float(valid_fraction * tpr / accepted) if accepted > 0 else float("nan")


def roc_points(labels, scores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fpr, tpr, thresholds) for accepting ``score >= threshold`` at each distinct score, from
    (0, 0) (threshold +inf) to (1, 1)."""
    labels, scores = as_labels(labels), _scores(scores)
    order = np.argsort(-scores, kind="mergesort")
    sorted_scores, sorted_labels = scores[order], labels[order]
    last_of_block = np.r_[np.flatnonzero(np.diff(sorted_scores) != 0), sorted_scores.size - 1]
    tp = np.cumsum(sorted_labels)[last_of_block]
    fp = np.cumsum(1 - sorted_labels)[last_of_block]
    pos, neg = max(int(labels.sum()), 1), max(int((1 - labels).sum()), 1)
    return (np.r_[0.0, fp / neg], np.r_[0.0, tp / pos], np.r_[np.inf, sorted_scores[last_of_block]])


def pr_points(labels, scores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(recall, precision, thresholds) of the valid class at each distinct score."""
    labels, scores = as_labels(labels), _scores(scores)
    fpr, tpr, thresholds = roc_points(labels, scores)
    tp, fp = tpr[1:] * labels.sum(), fpr[1:] * (labels.size - labels.sum())
    precision = np.where(tp + fp > 0, tp / np.maximum(tp + fp, 1e-300), 1.0)
    return tpr[1:], precision, thresholds[1:]


@dataclass(frozen=True)
class ThresholdChoice:
    criterion: str
    threshold: float
    target: float | None
    mcc: float
    tpr: float
    fpr: float
    candidates: str
    """Where the threshold was picked from (see :func:`threshold_grid`)."""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def grid_rates(labels, scores, grid: np.ndarray = THRESHOLD_GRID) -> dict[str, np.ndarray]:
    """Count-based metrics at every grid threshold (accept when ``score >= t``)."""
    labels, scores = as_labels(labels).astype(bool), _scores(scores)
    accepted = scores[None, :] >= grid[:, None]
    tp = (accepted & labels).sum(1)
    fp = (accepted & ~labels).sum(1)
    fn = labels.sum() - tp
    tn = (~labels).sum() - fp
    return rates_from_counts(tp, fp, tn, fn)  # type: ignore[return-value]


def threshold_grid(scores) -> tuple[np.ndarray, str]:
    """(candidate thresholds, how they were made) for :func:`select_threshold` on these scores.

    The 0.01 grid, unless every score lies inside one of its cells: a barely trained model can rank
    programs well (AUROC) with all its scores within 0.004 of each other, and there every grid
    threshold accepts all programs or none. Then the candidates are the midpoints between
    consecutive distinct scores (plus both ends), so the chosen threshold still separates them.
    """
    scores = _scores(scores)
    cells = np.unique(np.floor(np.round(scores * 100.0, 9)))
    distinct = np.unique(scores)
    if cells.size > 1 or distinct.size < 2:
        return THRESHOLD_GRID, GRID_CANDIDATES
    midpoints = (distinct[:-1] + distinct[1:]) / 2.0
    return np.concatenate(
        [[distinct[0]], midpoints, [np.nextafter(distinct[-1], np.inf)]]
    ), f"midpoints of the observed scores (all in [{distinct[0]:.4f}, {distinct[-1]:.4f}], one 0.01 grid cell)"


def select_threshold(
    labels, scores, criterion: str = "mcc", target: float | None = None, grid: np.ndarray | None = None
) -> ThresholdChoice:
    """Pick a threshold on validation data from ``grid`` (default: :func:`threshold_grid` of the
    scores, i.e. the 0.01 grid unless every score lies in one of its cells).

    - ``mcc``: the threshold with the highest MCC (ties: the lowest threshold);
    - ``fpr``: matched FPR, the threshold with the highest recall among those whose FPR is at most
      ``target`` (ties: the highest threshold);
    - ``recall``: matched recall, the threshold with the lowest FPR among those whose recall is at
      least ``target`` (ties: the highest threshold).
    """
    if grid is None:
        grid, candidates = threshold_grid(scores)
    else:
        candidates = GRID_CANDIDATES if grid is THRESHOLD_GRID else f"{len(grid)} given thresholds"
    rates = grid_rates(labels, scores, grid)
    mcc, tpr, fpr = rates["mcc"], rates["tpr"], rates["fpr"]
    if criterion == "mcc":
        index = int(np.flatnonzero(mcc == mcc.max())[0])
    elif criterion in ("fpr", "recall"):
        if target is None:
            raise ValueError(f"criterion {criterion!r} needs a target value")
        if criterion == "fpr":
            feasible = np.flatnonzero(fpr <= target + 1e-12)
            key = tpr
        else:
            feasible = np.flatnonzero(tpr >= target - 1e-12)
            key = -fpr
        if feasible.size == 0:
            raise ValueError(
                f"no threshold on the grid reaches {criterion} {'<=' if criterion == 'fpr' else '>='} {target}"
            )
        best = key[feasible].max()
        index = int(feasible[key[feasible] == best][-1])
    else:
        raise ValueError(f"unknown criterion {criterion!r}: use 'mcc', 'fpr' or 'recall'")
    return ThresholdChoice(
        criterion, float(grid[index]), target, float(mcc[index]), float(tpr[index]), float(fpr[index]), candidates
    )


def verdict_metrics(
    labels, scores, predictions=None, threshold: float = 0.5, valid_fractions: Sequence[float] = ()
) -> dict[str, object]:
    """Everything for one evaluator: classification metrics at its verdicts (or at
    ``score >= threshold`` when no verdicts are given), AUROC, and PPV at each valid fraction π."""
    labels, scores = as_labels(labels), _scores(scores)
    if labels.size != scores.size:
        raise ValueError(f"{labels.size} labels but {scores.size} scores")
    predicted = (scores >= threshold).astype(int) if predictions is None else as_labels(predictions)
    out: dict[str, object] = dict(classification_metrics(labels, predicted))
    out["auroc"] = auroc(labels, scores)
    out["threshold"] = None if predictions is not None else threshold
    out["ppv_at"] = {str(pi): ppv_at_prior(out["tpr"], out["fpr"], pi) for pi in valid_fractions}  # type: ignore[arg-type]
    return out
