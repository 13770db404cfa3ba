"""The unbiased pass@k estimator (Chen et al., 2021, "Evaluating Large Language Models Trained on
Code"): with n attempts of which c are correct, pass@k = 1 - C(n-c, k) / C(n, k), the probability
that k attempts drawn without replacement contain a correct one.

Per statement, Lean's categories count as: valid the only success; invalid, precheck_rejected and
no_program (nothing extracted) verified failures; timeout / unavailable / infra_error / input_error
NOT verified, never guessed as passes: :func:`pass_at_k_report` counts them as failures (LLF Eq. 10
divides by all problems) and gives beside it the estimate over verified attempts only and the upper
bound if they had all passed. Shared by the sft evaluation, the RL stage's, search and prm."""

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
        results.append(StatementResult(name, sum(categories.values()), verified, correct, dict(categories)))
    return results


FEWER_THAN_K = ("fail", "refuse")


def pass_at_k_report(results: list[StatementResult], ks: list[int], fewer_than_k: str = "fail") -> dict[str, dict]:
    """Per k: ``pass_at_k`` over every statement, unverified attempts counted as failures (LLF Eq. 10
    divides by all problems); a statement with fewer than k attempts keeps its place in the
    denominator with the missing attempts counted as failed up to k (``fewer_than_k="fail"``: it
    passes iff one of its attempts did) or makes the report refuse (``"refuse"``, ValueError).
    Beside it, diagnostics: the estimate over statements with >= k verified attempts
    (``verified_only_pass_at_k``, how many statements that leaves out) and the upper bound if every
    unverified attempt had passed."""
    if fewer_than_k not in FEWER_THAN_K:
        raise ValueError(f"fewer_than_k must be one of {FEWER_THAN_K}, got {fewer_than_k!r}")
    table = {}
    for k in ks:
        short = [r.name for r in results if r.attempts < k]
        if short and fewer_than_k == "refuse":
            raise ValueError(
                f"pass@{k}: {len(short)} statement(s) have fewer than {k} attempts "
                f"(e.g. {short[0]}); sample more or count them as failed (fewer_than_k: fail)"
            )
        estimable = [(r.verified, r.correct) for r in results if r.verified >= k]
        padded = [(max(r.attempts, k), r.correct) for r in results]
        table[str(k)] = {
            "pass_at_k": mean_pass_at_k(padded, k),
            "statements": len(results),
            "statements_fewer_than_k": len(short),
            "verified_only_pass_at_k": mean_pass_at_k(estimable, k),
            "statements_estimated": len(estimable),
            "statements_left_out": len(results) - len(estimable),
            "upper_bound": mean_pass_at_k([(max(r.attempts, k), r.correct + r.unverified) for r in results], k),
        }
    return table


def repeat_summary(values: list[float | None]) -> dict[str, float | int | None]:
    """Mean and standard deviation of one metric across repeated evaluations of a fixed checkpoint
    (LLF Eq. 11 and Table 7: mean +- standard deviation across repeats; the sample standard
    deviation, ddof 1, None with a single run). A repeat without a value is left out and counted."""
    measured = [float(v) for v in values if v is not None]
    mean = float(np.mean(measured)) if measured else None
    std = float(np.std(measured, ddof=1)) if len(measured) > 1 else None
    return {"mean": mean, "std": std, "runs": len(measured), "runs_without_value": len(values) - len(measured)}
