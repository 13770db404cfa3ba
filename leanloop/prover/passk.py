"""The unbiased pass@k estimator (Chen et al., 2021, "Evaluating Large Language Models Trained on
Code"): with n attempts of which c are correct, pass@k = 1 - C(n-c, k) / C(n, k), the probability
that k attempts drawn without replacement contain a correct one.

Per statement, Lean's categories count as: valid a success; invalid, precheck_rejected and
no_program (nothing extracted) failures; timeout / unavailable / infra_error / input_error NOT
verified, never guessed: :func:`pass_at_k_report` estimates over verified attempts only and gives
the bounds the unverified attempts allow. Shared by the sft evaluation and the RL stage's."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from leanloop.lean.types import Category

NO_PROGRAM = "no_program"
SUCCESS = {Category.VALID.value}
FAILURE = {Category.INVALID.value, Category.PRECHECK_REJECTED.value, NO_PROGRAM}


@dataclass
class StatementResult:
    name: str
    attempts: int
    verified: int
    correct: int
    categories: dict[str, int]

    @property
    def unverified(self) -> int:
        return self.attempts - self.verified


def pass_at_k(n: int, c: int, k: int) -> float:
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass@{k} needs at least {k} attempts, got n={n}")
    if n - c < k:
        return 1.0
    # The product form avoids the huge binomials of C(n-c,k)/C(n,k) (n reaches thousands).
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def mean_pass_at_k(counts: list[tuple[int, int]], k: int) -> float | None:
    """Mean pass@k over statements given as (n, c); statements with n < k are not estimable and
    must be filtered out by the caller (the report says how many). None for an empty list."""
    if not counts:
        return None
    return float(np.mean([pass_at_k(n, c, k) for n, c in counts]))


def per_statement(records: list[dict]) -> list[StatementResult]:
    grouped: dict[str, Counter] = {}
    for record in records:
        grouped.setdefault(record["name"], Counter())[record["category"]] += 1
    results = []
    for name, categories in grouped.items():
        correct = sum(categories[c] for c in SUCCESS)
        verified = correct + sum(categories[c] for c in FAILURE)
        results.append(StatementResult(name, sum(categories.values()), verified, correct,
                                       dict(categories)))
    return results


def pass_at_k_report(results: list[StatementResult], ks: list[int]) -> dict[str, dict]:
    """Per k: the estimate over statements with >= k verified attempts, how many were left out,
    and the all-fail / all-pass bounds over every statement with >= k attempts."""
    table = {}
    for k in ks:
        estimable = [(r.verified, r.correct) for r in results if r.verified >= k]
        sized = [r for r in results if r.attempts >= k]
        table[str(k)] = {
            "pass_at_k": mean_pass_at_k(estimable, k),
            "statements_estimated": len(estimable),
            "statements_left_out": len(results) - len(estimable),
            "lower_bound": mean_pass_at_k([(r.attempts, r.correct) for r in sized], k),
            "upper_bound": mean_pass_at_k([(r.attempts, r.correct + r.unverified) for r in sized], k),
        }
    return table
