"""Baselines on real labelled programs (the shipped RL-Lean candidates with their recorded verdicts,
split by theorem): majority class, per-problem prior, TF-IDF + logistic regression and sibling rate,
thresholds from validation."""

from __future__ import annotations

import numpy as np
import pytest

from classifiers.baselines import TfidfBaseline, TfidfConfig, majority_scores
from classifiers.config import EvaluationConfig
from classifiers.examples import JsonlCorpus, load_jsonl_corpus
from classifiers.run_report import BASELINES, MAJORITY, PRIOR, TFIDF, baseline_rows
from leanloop.metrics import auroc, select_threshold

RL_LEAN = "shared://candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz"


@pytest.fixture(scope="module")
def corpus():
    return load_jsonl_corpus(JsonlCorpus(RL_LEAN, no_label_if="compilation_result.system_errors"))


def test_real_corpus_is_theorem_disjoint_and_leaves_system_errors_unlabelled(corpus):
    names = {split: set(data.names) for split, data in corpus.splits.items()}
    assert not names["train"] & (names["valid"] | names["test"]) and not names["valid"] & names["test"]
    unlabelled = sum(v for k, v in corpus.counts.items() if k.endswith("/unlabelled"))
    assert unlabelled > 0  # recorded timeouts / system errors carry no label
    for data in corpus.splits.values():
        assert all(isinstance(label, bool) for label in data.labels)


def test_tfidf_learns_something_real(corpus):
    train, validation = corpus.splits["train"], corpus.splits["valid"]
    # every other training program: half the fit's cost, still hundreds of theorems
    baseline = TfidfBaseline(TfidfConfig()).fit(train.programs[::2], train.labels[::2])
    scores = baseline.scores(validation.programs)
    assert scores.shape == (len(validation),) and ((scores >= 0) & (scores <= 1)).all()
    assert auroc(np.asarray(validation.labels, dtype=int), scores) > 0.65  # unseen theorems


def test_majority_is_the_training_majority(corpus):
    labels = corpus.splits["train"].labels
    expected = 1.0 if sum(labels) > len(labels) / 2 else 0.0
    assert set(majority_scores(labels, 7).tolist()) == {expected}
    with pytest.raises(ValueError, match="at least one"):
        majority_scores([], 3)


def test_baseline_rows_threshold_on_validation():
    # a 300-program prefix of each split keeps the second TF-IDF fit cheap
    corpus = load_jsonl_corpus(JsonlCorpus(RL_LEAN, no_label_if="compilation_result.system_errors"), 300)
    config = EvaluationConfig()
    rows = baseline_rows(corpus, config, rows={"valid": range(len(corpus.splits["valid"])), "test": range(40)})
    tfidf = [r for r in rows if r["evaluator"] == TFIDF]
    assert {r["split"] for r in tfidf} == {"valid", "test"}
    assert sum(r["split"] == "test" for r in tfidf) == 40
    validation = [r for r in tfidf if r["split"] == "valid"]
    chosen = select_threshold([int(r["label"]) for r in validation], [r["score"] for r in validation]).threshold
    assert all(r["threshold"] == chosen and r["prediction"] == (r["score"] >= chosen) for r in tfidf)
    assert {r["evaluator"] for r in rows} == set(BASELINES)
    # every split theorem is unseen in train: the per-problem prior is the training pass rate
    train_rate = np.mean(corpus.splits["train"].labels)
    prior = {r["score"] for r in rows if r["evaluator"] == PRIOR}
    assert len(prior) == 1 and prior.pop() == pytest.approx(train_rate)
    assert all(r["group"] for r in rows)  # theorem names: the bootstrap's groups


def test_single_class_training_data_is_refused():
    with pytest.raises(ValueError, match="both valid and invalid"):
        TfidfBaseline().fit(["theorem a : True := trivial", "theorem b : True := trivial"], [True, True])
