"""The unbiased pass@k estimator (Chen et al., 2021, "Evaluating Large Language Models Trained on
Code"): with n attempts of which c are correct, pass@k = 1 - C(n-c, k) / C(n, k), the probability
that k attempts drawn without replacement contain a correct one."""

from __future__ import annotations

import numpy as np


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
