"""The history-aware evaluator (classifiers.history) on real recorded RL-Lean verdicts: evidence
counts, the neighbour margin, the stacker's fit / save / reproduce cycle, the Evaluator contract and
the hybrid split of ``learned`` (while Lean runs) and ``combine`` (at the cutoff, with the siblings
Lean returned)."""

from __future__ import annotations

import numpy as np
import pytest

from classifiers.baselines import TfidfBaseline
from classifiers.evidence import (
    KEPT_PROGRAMS,
    Evidence,
    History,
    gather_evidence,
    neighbour_margin,
    proof_view,
    sibling_counts,
)
from classifiers.history import HistoryEvaluator, reveal_siblings
from classifiers.stacker import FEATURES, STACKER_FILE, Stacker
from leanloop.evaluator import UNSCORED, Evaluator, Prediction


class TfidfEvaluator:
    """TF-IDF + logistic regression as an Evaluator (the learned part in these tests)."""

    def __init__(self, programs, labels):
        self.model = TfidfBaseline().fit(programs, labels)

    def score(self, programs, deadline=None):
        return [
            Prediction(verdict=s >= 0.5, score=float(s), trace=None, time_s=0.0) for s in self.model.scores(programs)
        ]


@pytest.fixture(scope="module")
def rounds(shared_data):
    """RL-Lean answered candidates by round: (name, program, label, round)."""
    from bench.evaluators import rl_lean_rows

    return rl_lean_rows(shared_data)


def test_history_and_sibling_counts():
    history = History.from_rows(
        [
            {"name": "a", "label": True},
            {"name": "a", "label": False},
            {"name": "b", "label": None},
            {"name": "b", "label": True},
        ]
    )
    assert history.get("a") == (1, 2) and history.get("b") == (1, 1) and history.get("c") == (0, 0)
    assert len(history) == 3 and history.pass_rate() == pytest.approx(2 / 3)
    # an item is never its own sibling; unknown labels do not count
    assert sibling_counts(["a", "a", "a", "b"], [True, None, False, True]) == [(0, 1), (1, 2), (1, 1), (0, 0)]
    assert sibling_counts(["a", "b"], None) == [(0, 0), (0, 0)]


def test_reveal_by_recorded_times_keeps_the_fastest_share(rounds):
    rows = [r for r in rounds if r["round"] == 8]
    known = reveal_siblings(
        [r["name"] for r in rows], [r["label"] for r in rows], 0.43, times=[r["time_s"] for r in rows]
    )
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
    evidence = gather_evidence(history, [r["program"] for r in valid], [r["name"] for r in valid], None)
    stacker = Stacker.fit(scores, evidence, [r["label"] for r in valid])
    assert stacker.features == list(FEATURES) and len(stacker.coef) == len(FEATURES)
    assert dict(zip(FEATURES, stacker.coef))["neighbour_margin"] > 0  # a proof close to an accepted one
    # on the next round (not fitted on) the stack ranks better than the learned score alone
    from sklearn.metrics import roc_auc_score

    after = [r for r in rounds if r["round"] == 5]
    later = learned.scores([r["program"] for r in after])
    stacked = stacker.predict(
        later, gather_evidence(history, [r["program"] for r in after], [r["name"] for r in after], None)
    )
    labels = [r["label"] for r in after]
    assert roc_auc_score(labels, stacked) > roc_auc_score(labels, later)
    again = Stacker.load(stacker.save(tmp_path))
    assert (tmp_path / STACKER_FILE).is_file()
    assert np.allclose(again.predict(scores, evidence), stacker.predict(scores, evidence))
    assert again.threshold == stacker.threshold
    with pytest.raises(FileNotFoundError, match="no history stacker"):
        Stacker.load(tmp_path / "elsewhere")


def test_history_evaluator_contract_and_hybrid_split(rounds):
    train = [r for r in rounds if r["round"] < 5]
    weights = {"score_logit": 1.0, "history_logit": 1.0, "sibling_logit": 1.0, "neighbour_margin": 2.0}
    evaluator = HistoryEvaluator(
        TfidfEvaluator([r["program"] for r in train], [r["label"] for r in train]),
        Stacker(coef=[weights.get(f, 0.0) for f in FEATURES], intercept=0.0, prior_mean=0.4),
        History.from_rows(train),
    )
    assert isinstance(evaluator, Evaluator)
    step = [r for r in rounds if r["round"] >= 5][:24]
    programs, groups = [r["program"] for r in step], [r["name"] for r in step]
    learned = evaluator.learned(programs)
    full = evaluator.score(programs, groups=groups)
    assert [p.score for p in evaluator.combine(programs, learned, groups)] == [p.score for p in full]
    assert all(p.verdict == (p.score >= evaluator.threshold) for p in full)
    # same evidence, different programs: the learned score still orders them within a problem
    a, b = Prediction(True, 0.9, None, 0.0), Prediction(False, 0.2, None, 0.0)
    same = [programs[0], programs[0]]
    first, second = evaluator.combine(same, [a, b], [groups[0], groups[0]])
    assert first.score > second.score
    # a valid sibling raises the score of the unfinished rollouts of its group, an invalid one lowers it
    pair = programs[:2]
    base = evaluator.combine(pair, [b, b], ["fresh", "fresh"])[1].score
    up = evaluator.combine(pair, [b, b], ["fresh", "fresh"], known=[True, None])[1].score
    down = evaluator.combine(pair, [b, b], ["fresh", "fresh"], known=[False, None])[1].score
    assert down < base < up
    # unscored by the learned part (its deadline passed): unscored, so the caller waits for Lean
    assert evaluator.combine(pair, [UNSCORED, a], ["x", "x"])[0] == UNSCORED
    with pytest.raises(ValueError, match="1 predictions for 2 programs"):
        evaluator.combine(pair, [a], ["x", "x"])
    # the step's Lean labels (and programs) become history for the next
    before = evaluator.combine(pair[:1], [b], ["fresh"])[0].score
    evaluator.observe(["fresh", "fresh"], [True, True], pair)
    assert evaluator.history.get("fresh") == (2, 2)
    assert evaluator.combine(pair[:1], [b], ["fresh"])[0].score > before


def test_proof_view_and_neighbour_margin(rounds):
    # the header and statement a problem's programs share are not part of the view
    program = next(r["program"] for r in rounds if r["label"])
    view = proof_view(program)
    assert "import Mathlib" not in view and view and view in " ".join(program.split())
    assert proof_view("theorem t : 1 = 1 :=\n  rfl") == "rfl"
    assert neighbour_margin(view, []) == 0.0
    assert neighbour_margin(view, [(view, True)]) == pytest.approx(1.0)  # Lean accepted this very proof
    assert neighbour_margin(view, [(view, False), ("simp", True)]) < -0.9
    # on a problem with accepted and rejected attempts in rounds 0-5, the later programs that repeat an
    # accepted proof sit closer to it than to the rejected ones, and vice versa
    earlier = [r for r in rounds if r["round"] < 6]
    history = History.from_rows(earlier)
    later = [r for r in rounds if r["round"] >= 6]
    evidence = gather_evidence(history, [r["program"] for r in later], [r["name"] for r in later], None)
    margins = np.asarray([e.neighbour for e in evidence])
    labels = np.asarray([r["label"] for r in later])
    assert margins[labels].mean() > 0.3 > -0.3 > margins[~labels].mean()


def test_gather_evidence_keeps_history_and_siblings_apart():
    rows = [
        {"name": "p", "label": True, "program": "theorem p : 1 = 1 := by\n  norm_num"},
        {"name": "p", "label": False, "program": "theorem p : 1 = 1 := by\n  linarith"},
    ]
    history = History.from_rows(rows)
    programs = ["theorem p : 1 = 1 := by\n  norm_num", "theorem p : 1 = 1 := by\n  simp", "theorem q : 2 = 2 := by rfl"]
    evidence = gather_evidence(history, programs, ["p", "p", "q"], [None, False, None])
    assert (evidence[0].history, evidence[0].siblings, evidence[0].counts) == ((1, 2), (0, 1), (1, 3))
    assert evidence[0].neighbour > 0.5  # the very proof Lean accepted, against a rejected linarith and simp
    assert evidence[1].siblings == (0, 0)  # its own known label is not its own evidence
    assert evidence[2] == Evidence()  # a problem Lean never saw: no evidence at all
    assert evidence[0].to_json() == {
        "history": [1, 2],
        "siblings": [0, 1],
        "neighbour": round(evidence[0].neighbour, 6),
    }
    # the history keeps a bounded number of programs per problem and verdict
    for i in range(KEPT_PROGRAMS + 5):
        history.observe("p", True, f"theorem p : 1 = 1 := by\n  exact rfl -- {i}")
    assert len([v for v, label in history.known_programs("p") if label]) == KEPT_PROGRAMS
    assert history.get("p") == (KEPT_PROGRAMS + 6, KEPT_PROGRAMS + 7)


def test_a_split_stacker_learns_what_history_is_worth_on_a_split_the_history_never_saw(rounds):
    """A classifier run fits its stacker on a theorem-disjoint validation split, where the training
    history is always empty: fitted on that alone, the history gets no weight, though every use of the
    saved stacker comes with one. simulated_evidence moves a share of each theorem's own rows into its
    history (never the fitted row itself) and reveals siblings on every other draw."""
    from classifiers.history import SIMULATED_DRAWS, fit_split_stacker, simulated_evidence, split_evidence

    split = set(sorted({r["name"] for r in rounds})[:40])  # a theorem-disjoint "validation split"
    rows = [r for r in rounds if r["name"] in split and r["round"] < 5]
    programs, names, labels = [r["program"] for r in rows], [r["name"] for r in rows], [r["label"] for r in rows]
    others = [r for r in rounds if r["name"] not in split]  # the "training split"
    train = History.from_rows(others)
    pairs = simulated_evidence(programs, names, labels, train)
    first = split_evidence(programs, names, labels, train)
    assert [e for _, e in pairs[: len(rows)]] == first  # draw 0: the split's own evidence, every row
    later = pairs[len(rows) :]
    per_theorem = {n: names.count(n) for n in names}
    assert later and all(e.history[1] + e.siblings[1] <= per_theorem[names[i]] - 1 for i, e in later)
    assert any(e.history[1] for _, e in later) and any(e.siblings[1] for _, e in later)
    assert any(e.history[1] and not e.siblings[1] for _, e in later)  # draws without siblings
    assert all(e.history == (0, 0) for e in first)  # what the split alone offers the history features
    assert simulated_evidence(programs, names, labels, train) == pairs  # seeded
    scores = TfidfBaseline().fit([r["program"] for r in others], [r["label"] for r in others]).scores(programs)
    stacker = fit_split_stacker(programs, names, labels, scores, train)
    alone = Stacker.fit(scores, first, labels, prior_mean=train.pass_rate())
    history_weight = FEATURES.index("history_logit")
    assert abs(alone.coef[history_weight]) < 0.05 < stacker.coef[history_weight]
    assert stacker.fitted_on["rows"] == len(pairs) > len(rows) * (1 + SIMULATED_DRAWS // 4)
