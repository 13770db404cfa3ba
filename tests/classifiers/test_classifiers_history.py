"""The history-aware evaluator (classifiers.history) on real recorded RL-Lean verdicts: evidence
counts, the stacker's fit / save / reproduce cycle, the Evaluator contract and the hybrid split of
``learned`` (while Lean runs) and ``combine`` (at the cutoff, with the siblings Lean returned)."""

from __future__ import annotations

import numpy as np
import pytest

from classifiers.baselines import TfidfBaseline
from classifiers.history import (
    FEATURES, STACKER_FILE, History, HistoryEvaluator, Stacker, reveal_siblings, sibling_counts,
)
from leanloop.evaluator import UNSCORED, Evaluator, Prediction


class TfidfEvaluator:
    """TF-IDF + logistic regression as an Evaluator (the learned part in these tests)."""

    def __init__(self, programs, labels):
        self.model = TfidfBaseline().fit(programs, labels)

    def score(self, programs, deadline=None):
        return [Prediction(verdict=s >= 0.5, score=float(s), trace=None, time_s=0.0)
                for s in self.model.scores(programs)]


@pytest.fixture(scope="module")
def rounds(shared_data):
    """RL-Lean answered candidates by round: (name, program, label, round)."""
    from bench.evaluators import rl_lean_rows

    return rl_lean_rows(shared_data)


def test_history_and_sibling_counts():
    history = History.from_rows([{"name": "a", "label": True}, {"name": "a", "label": False},
                                 {"name": "b", "label": None}, {"name": "b", "label": True}])
    assert history.get("a") == (1, 2) and history.get("b") == (1, 1) and history.get("c") == (0, 0)
    assert len(history) == 3 and history.pass_rate() == pytest.approx(2 / 3)
    # an item is never its own sibling; unknown labels do not count
    assert sibling_counts(["a", "a", "a", "b"], [True, None, False, True]) == [(0, 1), (1, 2), (1, 1), (0, 0)]
    assert sibling_counts(["a", "b"], None) == [(0, 0), (0, 0)]


def test_reveal_by_recorded_times_keeps_the_fastest_share(rounds):
    rows = [r for r in rounds if r["round"] == 8]
    known = reveal_siblings([r["name"] for r in rows], [r["label"] for r in rows], 0.43,
                            times=[r["time_s"] for r in rows])
    revealed = [r["time_s"] for r, k in zip(rows, known) if k is not None]
    hidden = [r["time_s"] for r, k in zip(rows, known) if k is None]
    assert 0.40 <= len(revealed) / len(rows) <= 0.46 and max(revealed) <= min(hidden)
    assert all(k == r["label"] for r, k in zip(rows, known) if k is not None)


def test_stacker_fits_saves_and_reproduces(rounds, tmp_path):
    train = [r for r in rounds if r["round"] < 4]
    valid = [r for r in rounds if r["round"] == 4]
    learned = TfidfBaseline().fit([r["program"] for r in train], [r["label"] for r in train])
    history = History.from_rows(train)
    scores = learned.scores([r["program"] for r in valid])
    evidence = [history.get(r["name"]) for r in valid]
    stacker = Stacker.fit(scores, evidence, [r["label"] for r in valid])
    assert stacker.features == list(FEATURES) and len(stacker.coef) == len(FEATURES)
    assert stacker.coef[1] > 0  # a problem Lean accepted before is more likely accepted again
    again = Stacker.load(stacker.save(tmp_path))
    assert (tmp_path / STACKER_FILE).is_file()
    assert np.allclose(again.predict(scores, evidence), stacker.predict(scores, evidence))
    assert again.threshold == stacker.threshold
    with pytest.raises(FileNotFoundError, match="no history stacker"):
        Stacker.load(tmp_path / "elsewhere")


def test_history_evaluator_contract_and_hybrid_split(rounds):
    train = [r for r in rounds if r["round"] < 5]
    evaluator = HistoryEvaluator(TfidfEvaluator([r["program"] for r in train], [r["label"] for r in train]),
                                 Stacker(coef=[1.0, 1.0, 0.0, 0.0], intercept=0.0, prior_mean=0.4),
                                 History.from_rows(train))
    assert isinstance(evaluator, Evaluator)
    step = [r for r in rounds if r["round"] >= 5][:24]
    programs, groups = [r["program"] for r in step], [r["name"] for r in step]
    learned = evaluator.learned(programs)
    full = evaluator.score(programs, groups=groups)
    assert [p.score for p in evaluator.combine(learned, groups)] == [p.score for p in full]
    assert all(p.verdict == (p.score >= evaluator.threshold) for p in full)
    # same evidence, different programs: the learned score still orders them within a problem
    a, b = Prediction(True, 0.9, None, 0.0), Prediction(False, 0.2, None, 0.0)
    first, second = evaluator.combine([a, b], [groups[0], groups[0]])
    assert first.score > second.score
    # a valid sibling raises the score of the unfinished rollouts of its group, an invalid one lowers it
    base = evaluator.combine([b, b], ["fresh", "fresh"])[1].score
    up = evaluator.combine([b, b], ["fresh", "fresh"], known=[True, None])[1].score
    down = evaluator.combine([b, b], ["fresh", "fresh"], known=[False, None])[1].score
    assert down < base < up
    # unscored by the learned part (its deadline passed): unscored, so the caller waits for Lean
    assert evaluator.combine([UNSCORED, a], ["x", "x"])[0] == UNSCORED
    # the step's Lean labels become history for the next
    before = evaluator.combine([b], ["fresh"])[0].score
    evaluator.observe(["fresh", "fresh"], [True, True])
    assert evaluator.combine([b], ["fresh"])[0].score > before
