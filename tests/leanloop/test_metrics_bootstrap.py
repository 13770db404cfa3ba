"""Grouped bootstrap: the vectorized resampling against explicit per-resample evaluation, on the
real RL-Lean candidates (labels and problem groups from the recorded compilations)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from leanloop.metrics.bootstrap import (
    bootstrap_samples,
    bootstrap_samples_loop,
    group_index,
    grouped_bootstrap,
    paired_bootstrap,
    resample_weights,
)
from leanloop.metrics.verdicts import verdict_metrics


@pytest.fixture(scope="module")
def rl(shared_data):
    from bench.traces import rl_lean_predictions

    rows = [row for row in rl_lean_predictions(shared_data, with_traces=False) if row["label"] is not None]
    return (
        np.asarray([int(r["label"]) for r in rows]),
        np.asarray([r["score"] for r in rows]),
        [r["group"] for r in rows],
    )


def test_vectorized_equals_per_resample_loop(rl):
    labels, scores, groups = rl
    _, fast = bootstrap_samples(labels, groups, scores, n_resamples=120)
    slow = bootstrap_samples_loop(labels, groups, scores, n_resamples=120)
    assert set(fast) == set(slow)
    for name in fast:
        assert np.allclose(fast[name], slow[name], equal_nan=True), name


def test_resampled_auroc_matches_weighted_sklearn(rl):
    labels, scores, groups = rl
    group, n_groups = group_index(groups)
    weights = next(resample_weights(n_groups, n_resamples=5, seed=7))
    _, samples = bootstrap_samples(labels, groups, scores, n_resamples=5, seed=7, metrics=("auroc",))
    for b in range(5):
        expected = roc_auc_score(labels, scores, sample_weight=weights[b, group])
        assert samples["auroc"][b] == pytest.approx(expected)


def test_resamples_draw_whole_groups(rl):
    _, _, groups = rl
    group, n_groups = group_index(groups)
    for weights in resample_weights(n_groups, n_resamples=1000, seed=42):
        assert (weights.sum(1) == n_groups).all()  # as many groups as there are, with replacement
    # Doubling every group's rows changes no resample's rates: the unit is the group, not the row.
    labels, scores, groups = rl
    once = grouped_bootstrap(labels, groups, scores, n_resamples=300)
    twice = grouped_bootstrap(np.r_[labels, labels], groups + groups, np.r_[scores, scores], n_resamples=300)
    for name in ("accuracy", "mcc", "auroc"):
        assert once[name].low == pytest.approx(twice[name].low) and once[name].high == pytest.approx(twice[name].high)


def test_defaults_reproducible_and_bracket_the_point(rl):
    labels, scores, groups = rl
    first = grouped_bootstrap(labels, groups, scores)  # 5,000 resamples, seed 42
    again = grouped_bootstrap(labels, groups, scores)
    fewer, other = (grouped_bootstrap(labels, groups, scores, n_resamples=500, seed=seed) for seed in (42, 43))
    point = verdict_metrics(labels, scores)
    for name in ("accuracy", "f1", "macro_f1", "mcc", "auroc"):
        assert first[name] == again[name]
        assert first[name].point == pytest.approx(point[name])
        assert first[name].low <= first[name].point <= first[name].high
        assert first[name].high - first[name].low > 0
    assert fewer["accuracy"] != other["accuracy"]


def test_paired_differences(rl):
    labels, scores, groups = rl
    same = paired_bootstrap(labels, groups, scores, scores, n_resamples=500)
    assert all(iv.point == 0 and iv.low == 0 and iv.high == 0 for iv in same.values())
    # Against its own reversal: the difference of accuracies is acc - (1 - acc) on every resample.
    flipped = paired_bootstrap(
        labels, groups, scores, 1 - scores, predictions_b=(scores < 0.5).astype(int), n_resamples=500
    )
    acc = grouped_bootstrap(labels, groups, scores, n_resamples=500)["accuracy"]
    assert flipped["accuracy"].point == pytest.approx(2 * acc.point - 1)
    assert flipped["accuracy"].low == pytest.approx(2 * acc.low - 1)
    assert flipped["auroc"].point == pytest.approx(2 * verdict_metrics(labels, scores)["auroc"] - 1)
    assert flipped["auroc"].share_positive == 1.0


def test_bad_input():
    with pytest.raises(ValueError, match="group"):
        grouped_bootstrap([1, 0, 1], ["a", "b"], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="no rows"):
        grouped_bootstrap([], [], [])
