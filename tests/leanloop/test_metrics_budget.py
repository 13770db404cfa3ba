"""Budgeted compilation replay: exact expectations against brute-force enumeration of orders."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from leanloop.metrics.budget import (
    Pool,
    budget_curve,
    build_pools,
    coverage_at_budget,
    random_pool_coverage,
    ranked_pool_coverage,
)

small_pools = st.integers(1, 6).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 1), min_size=n, max_size=n),  # Lean labels
        st.lists(st.integers(0, 1), min_size=n, max_size=n),  # evaluator verdicts
        st.lists(st.sampled_from([0.1, 0.5, 0.9]), min_size=n, max_size=n),  # few scores: many ties
    )
)


def _pool(labels, verdicts, scores) -> Pool:
    return Pool(("b", "r", "p"), np.asarray(labels), np.asarray(verdicts), np.asarray(scores, dtype=float))


def _brute_random(labels, k) -> float:
    orders = list(itertools.permutations(range(len(labels))))
    return sum(any(labels[i] for i in order[:k]) for order in orders) / len(orders)


def _brute_ranked(labels, verdicts, scores, k) -> float:
    """Every order consistent with the ranking (accepted first, then higher score), equally likely."""
    key = lambda i: (-verdicts[i], -scores[i])  # noqa: E731
    orders = [
        order
        for order in itertools.permutations(range(len(labels)))
        if all(key(a) <= key(b) for a, b in zip(order, order[1:]))
    ]
    return sum(any(labels[i] for i in order[:k]) for order in orders) / len(orders)


@settings(max_examples=60, deadline=None)
@given(small_pools, st.integers(0, 7))
def test_exact_expectations_match_enumeration(pool_data, k):
    labels, verdicts, scores = pool_data
    pool = _pool(labels, verdicts, scores)
    assert random_pool_coverage(pool, k) == pytest.approx(_brute_random(labels, k))
    assert ranked_pool_coverage(pool, k) == pytest.approx(_brute_ranked(labels, verdicts, scores, k))


@settings(max_examples=40, deadline=None)
@given(st.lists(small_pools, min_size=1, max_size=5))
def test_curve_is_monotone_and_bounded_by_the_oracle(pools_data):
    pools = [_pool(*data) for data in pools_data]
    curve = budget_curve(pools)
    if curve["solvable_pools"] == 0:
        assert all(np.isnan(curve[name]).all() for name in ("ranked", "random", "oracle"))
        return
    assert curve["oracle"] == [1.0] * len(curve["k"])  # averaged over pools with a valid candidate
    for name in ("ranked", "random", "oracle"):
        assert all(a <= b + 1e-12 for a, b in zip(curve[name], curve[name][1:]))
    assert all(r <= o + 1e-12 and x <= o + 1e-12 for r, x, o in zip(curve["ranked"], curve["random"], curve["oracle"]))
    # With every candidate compiled, any order covers exactly the solvable pools.
    assert curve["ranked"][-1] == pytest.approx(curve["oracle"][-1]) == pytest.approx(curve["random"][-1])


def test_perfect_ranking_reaches_the_oracle_at_one():
    pools = build_pools([1, 0, 0, 0, 1, 0], [0.9, 0.2, 0.1, 0.3, 0.8, 0.7], ["a", "a", "a", "b", "b", "b"])
    assert coverage_at_budget(pools, 1) == 1.0
    assert coverage_at_budget(pools, 1, "random") == pytest.approx(1 / 3)  # each pool: 1 valid of 3


def test_coverage_averages_over_pools_with_a_valid_candidate():
    """LLF App. G: a pool with no valid candidate is left out (it used to count as uncovered)."""
    pools = build_pools([1, 0, 0, 0, 0, 0], [0.9, 0.2, 0.1, 0.3, 0.8, 0.7], ["a", "a", "a", "b", "b", "b"])
    assert coverage_at_budget(pools, 1) == 1.0 and coverage_at_budget(pools, 3, "oracle") == 1.0
    assert coverage_at_budget(pools, 1, "random") == pytest.approx(1 / 3)
    curve = budget_curve(pools, [1])
    assert (curve["pools"], curve["solvable_pools"]) == (2, 1)
    assert np.isnan(coverage_at_budget(pools[1:], 1))


def test_pools_by_benchmark_run_problem(shared_data):
    """The real RL-Lean candidates: 9 rounds of 244 miniF2F problems pooled per problem."""
    from bench.traces import rl_lean_predictions

    rows = [row for row in rl_lean_predictions(shared_data, with_traces=False) if row["label"] is not None]
    pools = build_pools(
        [r["label"] for r in rows],
        [r["score"] for r in rows],
        [r["group"] for r in rows],
        benchmarks=[r["benchmark"] for r in rows],
        runs=[r["run"] for r in rows],
    )
    assert len(pools) == len({r["group"] for r in rows}) and max(p.size for p in pools) == 9
    per_round = build_pools(
        [r["label"] for r in rows],
        [r["score"] for r in rows],
        [r["group"] for r in rows],
        runs=[r["round"] for r in rows],
    )
    assert max(p.size for p in per_round) == 1 and len(per_round) == len(rows)
    curve = budget_curve(pools, [1, 9])
    assert curve["solvable_pools"] == sum(p.n_valid > 0 for p in pools) < len(pools)
    assert curve["oracle"] == [1.0, 1.0] and curve["random"][1] == pytest.approx(1.0)


def test_bad_input():
    with pytest.raises(ValueError, match="one entry per candidate"):
        build_pools([1, 0], [0.5], ["a", "a"])
    with pytest.raises(ValueError, match="no pools"):
        coverage_at_budget([], 1)
