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
@given(st.integers(1, 12).flatmap(lambda n: st.tuples(
    st.just(n), st.integers(0, n), st.integers(1, n))))
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
