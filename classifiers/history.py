"""The history-aware evaluator: what Lean already said about a problem, stacked with a learned score.

A learned classifier judges one program at a time. Lean has usually judged the same problem before:
in a corpus run, in earlier RL steps, and, inside one hybrid GRPO step, for the sibling rollouts of
the group whose checks finished before the cutoff. That evidence is strong (a problem's earlier pass
rate ranks the RL-Lean rounds' candidates far better than any learned model here), but it says
nothing about which of a group's unfinished rollouts is right, and GRPO's advantage is
group-relative. So the two are combined:

- **evidence** per problem: the Lean labels of its earlier attempts (:class:`History`) plus the
  verdicts of the sibling rollouts known at scoring time; summarised as a Beta posterior mean that
  shrinks toward the prior pass rate by ``strength`` pseudo-attempts;
- **stacker** (:class:`Stacker`): a logistic regression on the learned score's logit, the
  evidence's posterior logit and its count (:data:`FEATURES`), fitted on the validation split and
  saved with the run (``history_stacker.json``), so every prediction can be reproduced from the
  saved coefficients; its threshold is chosen on the same split.

Rollouts of one group with the same evidence still differ by their own program's score.
:class:`HistoryEvaluator` is an :class:`leanloop.evaluator.Evaluator`; the RL stage's hybrid race
(loaded from a classifier run by :func:`classifiers.evaluator.load_history_evaluator`)
calls :meth:`HistoryEvaluator.learned` while Lean runs and :meth:`HistoryEvaluator.combine` at the
cutoff, with the sibling verdicts Lean has returned by then.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from leanloop.evaluator import UNSCORED, Evaluator, Prediction

STACKER_FILE = "history_stacker.json"
FEATURES = ("score_logit", "evidence_logit", "evidence_count", "score_logit_unseen")
# Scores of exactly 0 or 1 (the majority baseline, a saturated classifier) would have infinite logits.
EPSILON = 1e-4
# The share of rollouts whose Lean verdict is back at the hybrid cutoff, used to simulate siblings:
# seeds/000_8a041fc0978068ca.txt (LLF) Section 6.1, "This cutoff is set by GPU evaluation time, not
# tuned; about 43% of candidates then have Lean verdicts."
REVEAL_FRACTION = 0.43


PRIOR_STRENGTH = 2.0
"""Pseudo-attempts of the prior pass rate in a problem's Beta posterior."""


def shrunk_rate(valid: Any, total: Any, prior_mean: float, strength: float = PRIOR_STRENGTH) -> np.ndarray:
    """A problem's pass rate from ``valid`` of ``total`` Lean labels, shrunk toward ``prior_mean``
    (the Beta posterior mean; ``total`` 0 gives the prior)."""
    valid, total = np.asarray(valid, dtype=float), np.asarray(total, dtype=float)
    return (valid + strength * prior_mean) / (total + strength)


def logit(p: Any) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=float), EPSILON, 1 - EPSILON)
    return np.log(p / (1 - p))


class History:
    """Lean labels per problem: ``counts[group] = [valid, total]``. Unlabelled attempts are not counted."""

    def __init__(self, counts: dict[str, list[int]] | None = None) -> None:
        self.counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for group, (valid, total) in (counts or {}).items():
            self.counts[group] = [int(valid), int(total)]

    def observe(self, group: str | None, label: bool | None) -> None:
        if group is None or label is None:
            return
        entry = self.counts[group]
        entry[0] += int(bool(label))
        entry[1] += 1

    def update(self, groups: Iterable[str | None], labels: Iterable[bool | None]) -> None:
        for group, label in zip(groups, labels):
            self.observe(group, label)

    def get(self, group: str | None) -> tuple[int, int]:
        if group is None or group not in self.counts:
            return 0, 0
        valid, total = self.counts[group]
        return valid, total

    def pass_rate(self) -> float | None:
        valid = sum(v for v, _ in self.counts.values())
        total = sum(t for _, t in self.counts.values())
        return valid / total if total else None

    def __len__(self) -> int:
        return sum(t for _, t in self.counts.values())

    @classmethod
    def from_rows(cls, rows: Iterable[dict[str, Any]], group_field: str = "name",
                  label_field: str = "label") -> "History":
        history = cls()
        for row in rows:
            label = row.get(label_field)
            history.observe(row.get(group_field), None if label is None else bool(label))
        return history

    @classmethod
    def from_corpus(cls, ref: str, group_field: str = "name") -> "History":
        """Every labelled row of a data-stage run (``artifacts://data/<run>`` or its folder), all splits:
        the run is the history, not a training set (the rows it scores need not be in it)."""
        from classifiers.examples import UNLABELLED
        from leanloop.artifacts import resolve_run
        from leanloop.corpus import read_corpus

        run = resolve_run(ref, "data")
        rows = read_corpus(run, tuple(dict.fromkeys((group_field, "label", "category"))))
        return cls.from_rows((r for r in rows if r["category"] not in UNLABELLED), group_field, "label")


def sibling_counts(groups: Sequence[str | None], known: Sequence[bool | None] | None) -> list[tuple[int, int]]:
    """Per item: (valid, total) over the OTHER items of its group whose label is known."""
    if known is None:
        return [(0, 0)] * len(groups)
    if len(known) != len(groups):
        raise ValueError(f"{len(known)} known labels for {len(groups)} programs")
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for group, label in zip(groups, known):
        if group is not None and label is not None:
            totals[group][0] += int(bool(label))
            totals[group][1] += 1
    out = []
    for group, label in zip(groups, known):
        valid, total = totals[group] if group in totals else (0, 0)
        if label is not None and group is not None:  # an item is not its own sibling
            valid, total = valid - int(bool(label)), total - 1
        out.append((valid, total))
    return out


@dataclass
class Stacker:
    """Logistic regression over :data:`FEATURES`; everything needed to reproduce a prediction."""

    coef: list[float]
    intercept: float
    prior_mean: float
    """Pass rate the evidence shrinks toward (the fitting split's)."""
    strength: float = PRIOR_STRENGTH
    """Pseudo-attempts of the prior in the evidence's Beta posterior."""
    threshold: float = 0.5
    threshold_source: str = "default 0.5"
    features: list[str] = field(default_factory=lambda: list(FEATURES))
    fitted_on: dict[str, Any] = field(default_factory=dict)

    def posterior(self, valid: Any, total: Any) -> np.ndarray:
        return shrunk_rate(valid, total, self.prior_mean, self.strength)

    def design(self, scores: Sequence[float], evidence: Sequence[tuple[int, int]]) -> np.ndarray:
        return design(scores, evidence, self.prior_mean, self.strength)

    def predict(self, scores: Sequence[float], evidence: Sequence[tuple[int, int]]) -> np.ndarray:
        z = self.design(scores, evidence) @ np.asarray(self.coef) + self.intercept
        return 1 / (1 + np.exp(-z))

    @classmethod
    def fit(cls, scores: Sequence[float], evidence: Sequence[tuple[int, int]], labels: Sequence[bool],
            prior_mean: float | None = None, strength: float = PRIOR_STRENGTH, C: float = 1.0,
            fitted_on: dict[str, Any] | None = None) -> "Stacker":
        """Fit on one split's learned scores, evidence counts and Lean labels; threshold at best MCC there."""
        from sklearn.linear_model import LogisticRegression

        from leanloop.metrics import select_threshold

        labels = np.asarray(labels, dtype=int)
        if len(set(labels.tolist())) < 2:
            raise ValueError("the history stacker needs valid and invalid programs in its fitting split")
        prior = float(labels.mean()) if prior_mean is None else float(prior_mean)
        x = design(scores, evidence, prior, strength)
        model = LogisticRegression(C=C, max_iter=1000).fit(x, labels)
        stacker = cls(coef=[float(c) for c in model.coef_[0]], intercept=float(model.intercept_[0]),
                      prior_mean=prior, strength=strength, fitted_on=dict(fitted_on or {}, rows=int(len(labels))))
        choice = select_threshold(labels, stacker.predict(scores, evidence))
        stacker.threshold = float(choice.threshold)
        stacker.threshold_source = f"fitting split, best MCC {choice.mcc:.3f} ({len(labels)} programs)"
        return stacker

    def save(self, folder: str | Path) -> Path:
        path = Path(folder) / STACKER_FILE
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")
        return path

    @classmethod
    def load(cls, folder: str | Path) -> "Stacker":
        path = Path(folder) / STACKER_FILE if Path(folder).is_dir() else Path(folder)
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found: the classifier run has no history stacker "
                                    "(runs trained before it was saved with them: retrain, or fit one with "
                                    "classifiers.history.Stacker.fit)")
        stacker = cls(**json.loads(path.read_text()))
        if list(stacker.features) != list(FEATURES):
            raise ValueError(f"{path} was fitted on features {stacker.features}, this code computes {list(FEATURES)}")
        return stacker


def design(scores: Sequence[float], evidence: Sequence[tuple[int, int]], prior_mean: float,
           strength: float) -> np.ndarray:
    """The stacker's inputs. ``score_logit_unseen`` is the score's logit on problems with no evidence
    (zero elsewhere): without it one weight would have to serve both problems Lean has seen, where
    the score mostly breaks ties, and unseen ones, where it is all there is."""
    counts = np.asarray(evidence, dtype=float).reshape(-1, 2)
    valid, total = counts[:, 0], counts[:, 1]
    score_logit = logit(scores)
    evidence_logit = logit(shrunk_rate(valid, total, prior_mean, strength))
    return np.column_stack([score_logit, evidence_logit, np.log1p(total), score_logit * (total == 0)])


def evidence_for(history: History | None, groups: Sequence[str | None],
                 known: Sequence[bool | None] | None) -> list[tuple[int, int]]:
    """History plus known siblings, per item."""
    siblings = sibling_counts(groups, known)
    out = []
    for group, (sv, st) in zip(groups, siblings):
        hv, ht = history.get(group) if history is not None else (0, 0)
        out.append((hv + sv, ht + st))
    return out


class HistoryEvaluator:
    """A learned evaluator's score stacked with per-problem Lean evidence (an Evaluator)."""

    def __init__(self, learned: Evaluator, stacker: Stacker, history: History | None = None,
                 threshold: float | None = None) -> None:
        self.base = learned
        self.stacker = stacker
        self.history = history if history is not None else History()
        self.threshold = stacker.threshold if threshold is None else threshold

    def learned(self, programs: Sequence[str], deadline: float | None = None) -> list[Prediction]:
        return list(self.base.score(programs, deadline))

    def combine(self, predictions: Sequence[Prediction], groups: Sequence[str | None] | None = None,
                known: Sequence[bool | None] | None = None) -> list[Prediction]:
        """Stack learned predictions with the evidence; items the learned evaluator did not score stay
        unscored (the caller waits for Lean for exactly those)."""
        groups = list(groups) if groups is not None else [None] * len(predictions)
        if len(groups) != len(predictions):
            raise ValueError(f"{len(groups)} groups for {len(predictions)} programs")
        evidence = evidence_for(self.history, groups, known)
        scored = [i for i, p in enumerate(predictions) if p.score is not None]
        out = [UNSCORED] * len(predictions)
        if scored:
            values = self.stacker.predict([predictions[i].score for i in scored], [evidence[i] for i in scored])
            for i, value in zip(scored, values.tolist()):
                out[i] = Prediction(verdict=value >= self.threshold, score=float(value), trace=None,
                                    time_s=predictions[i].time_s)
        return out

    def score(self, programs: Sequence[str], deadline: float | None = None,
              groups: Sequence[str | None] | None = None,
              known: Sequence[bool | None] | None = None) -> list[Prediction]:
        return self.combine(self.learned(programs, deadline), groups, known)

    def observe(self, groups: Iterable[str | None], labels: Iterable[bool | None]) -> None:
        """Lean labels of a finished step join the history (later steps see them)."""
        self.history.update(groups, labels)

    def describe(self) -> dict[str, Any]:
        return {"evaluator": "history", "history_attempts": len(self.history), "threshold": self.threshold,
                "stacker": {"coef": dict(zip(self.stacker.features, self.stacker.coef)),
                            "intercept": self.stacker.intercept, "prior_mean": self.stacker.prior_mean}}


def reveal_siblings(groups: Sequence[str], labels: Sequence[bool], fraction: float = REVEAL_FRACTION,
                    times: Sequence[float] | None = None, seed: int = 0) -> list[bool | None]:
    """Which labels a hybrid step would know at its cutoff: the ``fraction`` of items Lean finishes
    first, by recorded verification time when given (one cutoff time over all items, as in a step),
    else a seeded random share of each group. Unrevealed items get None."""
    n = len(labels)
    if times is not None:
        times_arr = np.asarray(times, dtype=float)
        cutoff = np.quantile(times_arr, fraction) if n else 0.0
        return [bool(labels[i]) if times_arr[i] <= cutoff else None for i in range(n)]
    rng = np.random.default_rng(seed)
    members: dict[str, list[int]] = defaultdict(list)
    for i, group in enumerate(groups):
        members[group].append(i)
    out: list[bool | None] = [None] * n
    for group in sorted(members):
        index = members[group]
        k = int(math.floor(fraction * len(index) + rng.random()))  # expected share exactly `fraction`
        for i in rng.permutation(index)[:k].tolist():
            out[i] = bool(labels[i])
    return out


def split_evidence(names: Sequence[str], labels: Sequence[bool], history: History | None,
                   fraction: float = REVEAL_FRACTION, seed: int = 0
                   ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(evidence, siblings) per row of a labelled split, with a hybrid step's siblings simulated: a
    seeded ``fraction`` of each theorem's labels is revealed, and every row sees the revealed labels
    of the OTHER rows of its theorem (plus its history)."""
    known = reveal_siblings(list(names), list(labels), fraction, seed=seed)
    return evidence_for(history, list(names), known), sibling_counts(list(names), known)


def fit_split_stacker(names: Sequence[str], labels: Sequence[bool], scores: Sequence[float],
                      history: History | None, seed: int = 0) -> Stacker:
    """The stacker a classifier run saves: fitted on its validation split's scores, with the training
    split's labels as history and simulated siblings (:func:`split_evidence`)."""
    evidence, _ = split_evidence(names, labels, history, seed=seed)
    prior = history.pass_rate() if history is not None and len(history) else None
    return Stacker.fit(scores, evidence, labels, prior_mean=prior,
                       fitted_on={"split": "valid", "siblings": f"seeded {REVEAL_FRACTION:.0%} per theorem",
                                  "seed": seed, "history_attempts": len(history) if history is not None else 0})
