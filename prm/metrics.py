"""Step-label metrics (LeanPRM-Bench's exact step-label accuracy and companions) and best-of-n.

- ``exact``: fraction of proofs whose every predicted step label equals the reference's.
- ``first_error``: fraction of proofs whose predicted first wrong step (or "none") is the reference's.
- ``step_accuracy``, ``f1_incorrect`` (wrong steps are the positive class), ``f1_correct``.
An answer that does not parse (``None``) is wrong for ``exact`` and ``first_error`` and counts as
"all correct" for the per-step numbers.
- best-of-n: among a problem's candidates, the verifier picks the one it labels all-correct (then
  the most correct steps; ties broken at random); reported beside the expected hit rate of a random
  pick, over problems with >= 2 candidates and known proof labels.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Sequence

from prm.step_labels import first_error


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
    return {"exact": exact, "first_error": first, "step_accuracy": (tp + tn) / len(pairs),
            "f1_incorrect": _f1(tp, fp, fn), "f1_correct": _f1(tn, fn, fp),
            "parsed": sum(p is not None for p in predicted) / n, "proofs": float(n), "steps": float(len(pairs))}


def best_of_n(groups: Sequence[str], predicted: Sequence[list[bool] | None], correct: Sequence[bool | None],
              seed: int = 0) -> dict[str, float] | None:
    """Verifier pick vs random pick over problems with >= 2 candidates whose proof labels are known."""
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
            p = predicted[i] or []
            return (bool(p) and all(p), sum(p) / max(len(p), 1), rng.random())

        best = max(indices, key=score)
        picked.append(bool(correct[best]))
        random_rate.append(sum(bool(correct[i]) for i in indices) / len(indices))
    return {"problems": float(len(problems)), "candidates": float(sum(map(len, problems.values()))),
            "verifier_pick": sum(picked) / len(picked), "random_pick": sum(random_rate) / len(random_rate)}
