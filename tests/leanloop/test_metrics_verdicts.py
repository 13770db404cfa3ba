"""Verdict metrics against scikit-learn, PPV at π, threshold selection, and the real RL-Lean labels."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st
from sklearn.metrics import (
    accuracy_score,
    f1_score,
    matthews_corrcoef,
    precision_recall_fscore_support,
    roc_auc_score,
    roc_curve,
)

from leanloop.metrics.verdicts import (
    THRESHOLD_GRID,
    as_labels,
    auroc,
    classification_metrics,
    grid_rates,
    ppv_at_prior,
    pr_points,
    roc_points,
    select_threshold,
    verdict_metrics,
)

# Scores on a coarse grid so that ties are common (they count half in AUROC).
labelled = st.integers(2, 60).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 1), min_size=n, max_size=n),
        st.lists(st.integers(0, 20).map(lambda k: k / 20), min_size=n, max_size=n),
    )
)


@settings(max_examples=40, deadline=None)
@given(labelled)
def test_auroc_matches_sklearn(data):
    labels, scores = data
    assume(0 < sum(labels) < len(labels))
    assert auroc(labels, scores) == pytest.approx(roc_auc_score(labels, scores))
    fpr, tpr, _ = roc_points(labels, scores)
    sk_fpr, sk_tpr, _ = roc_curve(labels, scores, drop_intermediate=False)
    assert np.allclose(fpr, sk_fpr) and np.allclose(tpr, sk_tpr)
    assert np.trapezoid(tpr, fpr) == pytest.approx(auroc(labels, scores))


@pytest.mark.filterwarnings("ignore")  # scikit-learn warns on constant predictions; we compare its values
@settings(max_examples=40, deadline=None)
@given(labelled)
def test_classification_metrics_match_sklearn(data):
    labels, scores = data
    predictions = [int(s >= 0.5) for s in scores]
    ours = classification_metrics(labels, predictions)
    assert ours["accuracy"] == pytest.approx(accuracy_score(labels, predictions))
    assert ours["mcc"] == pytest.approx(matthews_corrcoef(labels, predictions), abs=1e-12)
    assert ours["f1"] == pytest.approx(f1_score(labels, predictions, zero_division=0))
    assert ours["macro_f1"] == pytest.approx(
        f1_score(labels, predictions, average="macro", labels=[0, 1], zero_division=0)
    )
    p, r, f, _ = precision_recall_fscore_support(labels, predictions, labels=[0, 1], zero_division=0)
    assert (ours["precision_invalid"], ours["precision_valid"]) == pytest.approx(tuple(p))
    assert (ours["recall_invalid"], ours["recall_valid"]) == pytest.approx(tuple(r))
    assert (ours["f1_invalid"], ours["f1_valid"]) == pytest.approx(tuple(f))


def test_auroc_ties_count_half():
    assert auroc([1, 0], [0.5, 0.5]) == 0.5
    assert auroc([1, 1, 0], [0.7, 0.5, 0.5]) == 0.75
    assert math.isnan(auroc([1, 1], [0.2, 0.3]))


@settings(max_examples=40, deadline=None)
@given(labelled)
def test_ppv_at_the_sample_prevalence_is_precision(data):
    labels, scores = data
    assume(0 < sum(labels) < len(labels))
    m = verdict_metrics(labels, scores, valid_fractions=[float(np.mean(labels))])
    ppv = m["ppv_at"][str(float(np.mean(labels)))]
    if m["tp"] + m["fp"]:
        assert ppv == pytest.approx(m["precision_valid"])
    else:
        assert math.isnan(ppv)


def test_ppv_formula():
    # Eq. 12 with TPR 0.8, FPR 0.1 at π = 0.2: 0.16 / (0.16 + 0.08).
    assert ppv_at_prior(0.8, 0.1, 0.2) == pytest.approx(2 / 3)
    assert ppv_at_prior(0.8, 0.0, 0.01) == 1.0
    with pytest.raises(ValueError, match="π"):
        ppv_at_prior(0.5, 0.5, 1.5)


def _mcc(labels, predictions) -> float:
    y, p = np.asarray(labels, bool), np.asarray(predictions, bool)
    tp, tn, fp, fn = (y & p).sum(), (~y & ~p).sum(), (~y & p).sum(), (y & ~p).sum()
    den = math.sqrt(float((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)))
    return float(tp * tn - fp * fn) / den if den else 0.0


@settings(max_examples=40, deadline=None)
@given(labelled, st.floats(0.0, 0.5), st.floats(0.3, 1.0))
def test_threshold_selection_on_the_grid(data, target_fpr, target_recall):
    labels, scores = data
    rates = grid_rates(labels, scores)
    best = select_threshold(labels, scores, "mcc")
    assert best.threshold in THRESHOLD_GRID
    brute = [_mcc(labels, [s >= t for s in scores]) for t in THRESHOLD_GRID]
    assert best.mcc == pytest.approx(max(brute), abs=1e-12)
    assert best.threshold == THRESHOLD_GRID[int(np.argmax(np.asarray(brute) >= max(brute) - 1e-12))]
    feasible = rates["fpr"] <= target_fpr + 1e-12
    if feasible.any():
        fpr_choice = select_threshold(labels, scores, "fpr", target_fpr)
        assert fpr_choice.fpr <= target_fpr + 1e-12
        assert fpr_choice.tpr == pytest.approx(rates["tpr"][feasible].max())
    else:  # invalid programs scored 1.0: no grid threshold rejects them
        with pytest.raises(ValueError, match="no threshold"):
            select_threshold(labels, scores, "fpr", target_fpr)
    feasible = rates["tpr"] >= target_recall - 1e-12
    if feasible.any():
        recall_choice = select_threshold(labels, scores, "recall", target_recall)
        assert recall_choice.tpr >= target_recall - 1e-12
        assert recall_choice.fpr == pytest.approx(rates["fpr"][feasible].min())


def test_label_forms_and_errors():
    assert as_labels(["valid", "invalid", True, 0]).tolist() == [1, 0, 1, 0]
    with pytest.raises(ValueError, match="missing"):
        as_labels([1, None])
    with pytest.raises(ValueError, match="expected"):
        as_labels(["maybe"])
    with pytest.raises(ValueError, match="NaN"):
        verdict_metrics([1, 0], [0.5, float("nan")])
    with pytest.raises(ValueError, match="criterion"):
        select_threshold([1, 0], [0.4, 0.6], "accuracy")


def test_pr_points_end_at_full_recall():
    recall, precision, _ = pr_points([1, 0, 1, 0], [0.9, 0.8, 0.3, 0.1])
    assert recall[-1] == 1.0 and precision[-1] == 0.5 and precision[0] == 1.0


def test_on_real_rl_lean_labels(shared_data):
    """The earlier-rounds pass-rate evaluator on the 2,128 answered RL-Lean candidates, cross-checked
    with scikit-learn on real data."""
    from bench.traces import rl_lean_predictions

    rows = [row for row in rl_lean_predictions(shared_data, with_traces=False) if row["label"] is not None]
    labels = [int(row["label"]) for row in rows]
    scores = [row["score"] for row in rows]
    assert len(rows) == 2128 and sum(labels) == 900
    m = verdict_metrics(labels, scores)
    assert m["auroc"] == pytest.approx(roc_auc_score(labels, scores))
    assert m["mcc"] == pytest.approx(matthews_corrcoef(labels, [int(s >= 0.5) for s in scores]))
    assert m["tp"] + m["fn"] == 900


def test_scores_inside_one_grid_cell_get_thresholds_between_them():
    """A barely trained classifier: good ranking, every score within 0.004 (seen on the embedded
    one-token default). The 0.01 grid can only accept all or none; the midpoints separate them."""
    from leanloop.metrics.verdicts import threshold_grid

    labels = [0, 1, 0, 0, 1, 1]
    scores = [0.2739, 0.2775, 0.2741, 0.2744, 0.2748, 0.2770]
    assert select_threshold(labels, scores, "mcc", grid=THRESHOLD_GRID).mcc == 0.0  # the grid alone: accept all
    grid, source = threshold_grid(scores)
    assert "midpoints" in source and not np.isin(grid, THRESHOLD_GRID).all()
    choice = select_threshold(labels, scores, "mcc", grid=grid)
    assert choice.threshold == pytest.approx((0.2744 + 0.2748) / 2) and choice.mcc == pytest.approx(1.0)
    assert _mcc(labels, [s >= choice.threshold for s in scores]) == pytest.approx(1.0)
    # spread scores keep the grid; so do constant ones (nothing to separate)
    assert threshold_grid([0.1, 0.5, 0.9])[1] == threshold_grid([0.3, 0.3])[1] == "0.01 grid"
