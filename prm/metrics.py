"""Step-label metrics (LeanPRM-Bench's exact step-label accuracy and companions) and best-of-n."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any, Callable, Sequence

from prm.verifier_io import first_error


def _f1(tp: int, fp: int, fn: int) -> float:
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def step_metrics(predicted: Sequence[list[bool] | None], truth: Sequence[list[bool]]) -> dict[str, float]:
    n = len(truth)
    if n == 0:
        return {}
    exact = sum(p == t for p, t in zip(predicted, truth)) / n
    first = sum(p is not None and first_error(p) == first_error(t) for p, t in zip(predicted, truth)) / n
    pairs = [(pl, tl) for p, t in zip(predicted, truth) for pl, tl in zip(p if p is not None else [True] * len(t), t)]
    tp = sum(not p and not t for p, t in pairs)
    fp = sum(not p and t for p, t in pairs)
    fn = sum(p and not t for p, t in pairs)
    tn = len(pairs) - tp - fp - fn
    return {
        "exact": exact,
        "first_error": first,
        "step_accuracy": (tp + tn) / len(pairs),
        "f1_incorrect": _f1(tp, fp, fn),
        "f1_correct": _f1(tn, fn, fp),
        "precision_incorrect": tp / (tp + fp) if tp + fp else None,
        "recall_incorrect": tp / (tp + fn) if tp + fn else None,
        "parsed": sum(p is not None for p in predicted) / n,
        "proofs": float(n),
        "steps": float(len(pairs)),
    }


def cumulative(hazards: Sequence[float]) -> list[float]:
    """P(step k wrong) = 1 - prod_{j <= k} (1 - h_j) from per-step hazards h_j (P(wrong at j | steps
    before j correct)): a step is wrong when it or any earlier step is."""
    import numpy as np

    return (1 - np.cumprod(1 - np.asarray(hazards, dtype=float))).tolist()


def labels_at(wrong: Sequence[Sequence[float]], threshold: float) -> list[list[bool]]:
    """Step labels (True: correct) from P(step wrong): wrong from the first step scored >= threshold."""
    return [[p < threshold for p in proof] for proof in wrong]


def choose_threshold(
    wrong: Sequence[Sequence[float]],
    truth: Sequence[list[bool]],
    objective: str = "exact",
    labels: Callable[[float], list[list[bool]]] | None = None,
) -> tuple[float, dict[str, float]]:
    """The threshold on P(step wrong) with the best ``objective`` (``exact`` or ``f1_incorrect``) on
    these proofs (then the best of the other; then the highest, flagging least), and its metrics.
    Candidates: midpoints between the distinct scores, the lowest (flag all) and one above them all
    (flag nothing). ``labels``: the rule's step labels at a threshold (default: :func:`labels_at`
    on ``wrong``), for rules that decide from these scores some other way."""
    if labels is None:
        labels = lambda t: labels_at(wrong, t)
    other = "f1_incorrect" if objective == "exact" else "exact"
    values = sorted({p for proof in wrong for p in proof})
    candidates = [(a + b) / 2 for a, b in zip(values, values[1:])] + [values[-1] + 1e-9 if values else 0.5]
    if values:
        candidates.insert(0, values[0])
    best = max(candidates, key=lambda t: ((m := step_metrics(labels(t), truth))[objective], m[other], t))
    return best, step_metrics(labels(best), truth)


def ranking(wrong: Sequence[Sequence[float]], truth: Sequence[list[bool]]) -> dict[str, Any]:
    """How well P(step wrong) ranks the wrong steps first, at every threshold: average precision and
    AUROC (wrong steps positive) and the precision-recall curve (a random score's precision is the
    share of wrong steps at every recall)."""
    from sklearn.metrics import average_precision_score, precision_recall_curve, roc_auc_score

    y = [not label for labels in truth for label in labels]
    scores = [p for proof in wrong for p in proof]
    if len(set(y)) < 2:
        return {}
    precision, recall, _ = precision_recall_curve(y, scores)
    return {
        "average_precision": float(average_precision_score(y, scores)),
        "auroc": float(roc_auc_score(y, scores)),
        "curve": {"precision": precision.tolist(), "recall": recall.tolist()},
    }


def best_of_n(
    groups: Sequence[str],
    predicted: Sequence[list[bool] | None],
    correct: Sequence[bool | None],
    seed: int = 0,
    wrong: Sequence[float] | None = None,
) -> dict[str, float] | None:
    """A method's pick vs a random pick over problems with >= 2 candidates whose proof labels are
    known. ``wrong``: each candidate's P(some step wrong); when given, the pick is the lowest."""
    by_problem: dict[str, list[int]] = defaultdict(list)
    for i, (g, c) in enumerate(zip(groups, correct)):
        if c is not None:
            by_problem[g].append(i)
    problems = {g: idx for g, idx in by_problem.items() if len(idx) >= 2}
    if not problems:
        return None
    rng = random.Random(seed)
    picked, random_rate = [], []
    for indices in problems.values():

        def score(i: int) -> tuple:
            if wrong is not None:
                return (-wrong[i], rng.random())
            p = predicted[i] or []
            return (bool(p) and all(p), sum(p) / max(len(p), 1), rng.random())

        best = max(indices, key=score)
        picked.append(bool(correct[best]))
        random_rate.append(sum(bool(correct[i]) for i in indices) / len(indices))
    return {
        "problems": float(len(problems)),
        "candidates": float(sum(map(len, problems.values()))),
        "verifier_pick": sum(picked) / len(picked),
        "random_pick": sum(random_rate) / len(random_rate),
    }
