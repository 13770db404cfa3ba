"""Budgeted compilation replay (seed App. G): how many problems an evaluator's ranking solves when
only ``k`` candidates per problem may be sent to Lean.

Candidates are pooled by (benchmark, run, problem). Within a pool the evaluator ranks candidates by
verdict (accepted first), then by score (highest first); Lean compiles the top ``k``; the pool is
covered when one of them is valid. Coverage is averaged over the pools that hold a valid candidate
(LLF App. G): a pool no order can cover says nothing about the ranking. Candidates the ranking cannot tell apart (same verdict and
score) are taken in random order, and the coverage reported is its exact expectation. The
baseline is random order, whose expected coverage is exact too: a pool of ``n`` candidates with
``v`` valid is covered by ``k`` random draws with probability ``1 - C(n-v, k) / C(n, k)``
(hypergeometric).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb
from typing import Hashable, Sequence

import numpy as np

from leanloop.metrics.verdicts import as_labels


@dataclass(frozen=True)
class Pool:
    key: tuple[Hashable, ...]  # (benchmark, run, problem)
    labels: np.ndarray  # 1 = valid
    verdicts: np.ndarray  # 1 = accepted by the evaluator
    scores: np.ndarray

    @property
    def size(self) -> int:
        return int(self.labels.size)

    @property
    def n_valid(self) -> int:
        return int(self.labels.sum())


def build_pools(
    labels,
    scores,
    problems: Sequence[Hashable],
    verdicts=None,
    benchmarks: Sequence[Hashable] | None = None,
    runs: Sequence[Hashable] | None = None,
    threshold: float = 0.5,
) -> list[Pool]:
    """Pools by (benchmark, run, problem), in first-seen order. ``verdicts`` default to
    ``score >= threshold``."""
    labels = as_labels(labels)
    scores = np.asarray(scores, dtype=np.float64)
    n = labels.size
    if scores.size != n or len(problems) != n:
        raise ValueError(
            f"labels ({n}), scores ({scores.size}) and problems ({len(problems)}) must have one entry per candidate"
        )
    verdicts = (scores >= threshold).astype(np.int64) if verdicts is None else as_labels(verdicts)
    benchmarks = benchmarks if benchmarks is not None else [""] * n
    runs = runs if runs is not None else [""] * n
    members: dict[tuple[Hashable, ...], list[int]] = {}
    for i in range(n):
        members.setdefault((benchmarks[i], runs[i], problems[i]), []).append(i)
    return [
        Pool(key, labels[idx], verdicts[idx], scores[idx])
        for key, idx in ((key, np.asarray(index)) for key, index in members.items())
    ]


def miss_probability(n: int, n_valid: int, k: int) -> float:
    """P(no valid candidate among k drawn without replacement from n holding n_valid valid)."""
    if k <= 0:
        return 1.0
    if k > n - n_valid:
        return 0.0
    return comb(n - n_valid, k) / comb(n, k)


def random_pool_coverage(pool: Pool, k: int) -> float:
    return 1.0 - miss_probability(pool.size, pool.n_valid, min(k, pool.size))


def ranked_pool_coverage(pool: Pool, k: int) -> float:
    """Expected coverage of one pool under the evaluator's ranking, ties in random order."""
    if k <= 0 or pool.n_valid == 0:
        return 0.0
    # Tie blocks in ranking order: (accepted first, higher score first).
    keys = sorted(set(zip((-pool.verdicts).tolist(), (-pool.scores).tolist())))
    remaining = k
    for verdict, score in keys:
        members = (-pool.verdicts == verdict) & (-pool.scores == score)
        size, valid = int(members.sum()), int(pool.labels[members].sum())
        if remaining >= size:
            if valid:
                return 1.0
            remaining -= size
            if remaining == 0:
                return 0.0
        else:
            return 1.0 - miss_probability(size, valid, remaining)
    return 0.0


def coverage_at_budget(pools: Sequence[Pool], k: int, order: str = "ranked") -> float:
    """Mean coverage at budget ``k`` over the pools that hold a valid candidate (LLF App. G; NaN when
    none does), ``order``: ``ranked``, ``random`` or ``oracle``."""
    if not pools:
        raise ValueError("no pools: nothing to replay")
    pools = [pool for pool in pools if pool.n_valid > 0]
    if not pools:
        return float("nan")
    if order == "ranked":
        values = [ranked_pool_coverage(pool, k) for pool in pools]
    elif order == "random":
        values = [random_pool_coverage(pool, k) for pool in pools]
    elif order == "oracle":
        values = [float(pool.n_valid > 0 and k > 0) for pool in pools]
    else:
        raise ValueError(f"unknown order {order!r}: use 'ranked', 'random' or 'oracle'")
    return float(np.mean(values))


def budget_curve(pools: Sequence[Pool], budgets: Sequence[int] | None = None) -> dict[str, list[float]]:
    """Coverage at each budget for the ranking, random order and the oracle (any valid candidate),
    over the ``solvable_pools`` of ``pools``. Budgets default to 1 .. the largest pool."""
    budgets = list(budgets) if budgets is not None else list(range(1, max(pool.size for pool in pools) + 1))
    return {
        "k": [int(k) for k in budgets],
        "pools": len(pools),
        "solvable_pools": sum(pool.n_valid > 0 for pool in pools),
        "ranked": [coverage_at_budget(pools, k, "ranked") for k in budgets],
        "random": [coverage_at_budget(pools, k, "random") for k in budgets],
        "oracle": [coverage_at_budget(pools, k, "oracle") for k in budgets],
    }
