"""The unbiased pass@k estimator against brute force over every k-subset of the attempts."""

from __future__ import annotations

from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leanloop.prover.passk import mean_pass_at_k, pass_at_k


def brute_force(n: int, c: int, k: int) -> float:
    attempts = [True] * c + [False] * (n - c)
    subsets = list(combinations(range(n), k))
    return sum(any(attempts[i] for i in subset) for subset in subsets) / len(subsets)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 12).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_estimator_equals_brute_force(case):
    n, c, k = case
    assert pass_at_k(n, c, k) == pytest.approx(brute_force(n, c, k), abs=1e-12)


def test_large_n_stays_finite_and_monotone():
    values = [pass_at_k(4096, 3, k) for k in (1, 8, 64, 512)]
    assert values == sorted(values) and 0 < values[0] < values[-1] < 1
    assert values[0] == pytest.approx(3 / 4096)


def test_invalid_inputs_and_mean():
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)
    assert mean_pass_at_k([], 1) is None
    assert mean_pass_at_k([(4, 0), (4, 4)], 2) == pytest.approx(0.5)


def test_a_statement_with_fewer_than_k_attempts_stays_in_the_denominator():
    """Three statements at k = 4: one with four attempts (one valid), one cut short at two attempts
    with a valid one, one cut short at one invalid attempt. The short statements keep their place,
    their missing attempts failed: (pass@4 of 1-in-4 = 1) + 1 + 0 over 3 statements; the old rule
    (short statements left out) would have given 1.0 over one statement."""
    from leanloop.prover.passk import StatementResult, pass_at_k_report

    results = [
        StatementResult("full", 4, 4, 1, {"valid": 1, "invalid": 3}),
        StatementResult("short_solved", 2, 2, 1, {"valid": 1, "invalid": 1}),
        StatementResult("short_failed", 1, 1, 0, {"invalid": 1}),
    ]
    row = pass_at_k_report(results, [4])["4"]
    assert row["statements"] == 3 and row["statements_fewer_than_k"] == 2
    assert row["pass_at_k"] == pytest.approx(2 / 3)
    assert pass_at_k_report(results, [1])["1"]["pass_at_k"] == pytest.approx((0.25 + 0.5 + 0) / 3)
    with pytest.raises(ValueError, match="fewer than 4 attempts"):
        pass_at_k_report(results, [4], fewer_than_k="refuse")


def test_repeated_evaluations_report_the_standard_deviation_across_runs():
    """LLF Table 7 reports mean +- standard deviation across repeats; three runs of pass@32."""
    from rl.passk_eval import mean_over_runs
    from leanloop.prover.passk import repeat_summary

    summary = repeat_summary([0.70, 0.72, 0.74])
    assert summary["mean"] == pytest.approx(0.72) and summary["std"] == pytest.approx(0.02)
    assert repeat_summary([0.7])["std"] is None and repeat_summary([None, 0.5])["runs_without_value"] == 1
    tables = [
        {"32": {"pass_at_k": v, "verified_only_pass_at_k": v, "upper_bound": v, "statements": 2}}
        for v in (0.70, 0.72, 0.74)
    ]
    row = mean_over_runs(tables)["32"]
    assert row["pass_at_k"] == pytest.approx(0.72) and row["std_over_runs"] == pytest.approx(0.02)
    assert row["per_run"] == [0.70, 0.72, 0.74] and row["runs"] == 3
