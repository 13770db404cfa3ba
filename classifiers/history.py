"""The history-aware evaluator: what Lean already said about a problem, stacked with a learned score."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Iterable, Sequence

import numpy as np

from classifiers.evidence import Evidence, History, gather_evidence
from classifiers.stacker import Stacker
from leanloop.evaluator import UNSCORED, Evaluator, Prediction

# The share of rollouts whose Lean verdict is back at the hybrid cutoff, used to simulate siblings:
# seeds/000_8a041fc0978068ca.txt (LLF) Section 6.1, "This cutoff is set by GPU evaluation time, not
# tuned; about 43% of candidates then have Lean verdicts."
REVEAL_FRACTION = 0.43


class HistoryEvaluator:
    """A learned evaluator's score stacked with per-problem Lean evidence (an Evaluator)."""

    def __init__(
        self, learned: Evaluator, stacker: Stacker, history: History | None = None, threshold: float | None = None
    ) -> None:
        self.base = learned
        self.stacker = stacker
        self.history = history if history is not None else History()
        self.threshold = stacker.threshold if threshold is None else threshold

    def learned(self, programs: Sequence[str], deadline: float | None = None) -> list[Prediction]:
        return list(self.base.score(programs, deadline))

    def evidence(
        self,
        programs: Sequence[str],
        groups: Sequence[str | None] | None = None,
        known: Sequence[bool | None] | None = None,
    ) -> list[Evidence]:
        groups = list(groups) if groups is not None else [None] * len(programs)
        return gather_evidence(self.history, programs, groups, known)

    def combine(
        self,
        programs: Sequence[str],
        predictions: Sequence[Prediction],
        groups: Sequence[str | None] | None = None,
        known: Sequence[bool | None] | None = None,
    ) -> list[Prediction]:
        """Stack learned predictions of ``programs`` with their evidence; items the learned evaluator
        did not score stay unscored (the caller waits for Lean for exactly those)."""
        if len(programs) != len(predictions):
            raise ValueError(f"{len(predictions)} predictions for {len(programs)} programs")
        return self.stack(predictions, self.evidence(programs, groups, known))

    def stack(self, predictions: Sequence[Prediction], evidence: Sequence[Evidence]) -> list[Prediction]:
        """The stacker over learned predictions and their already gathered evidence."""
        scored = [i for i, p in enumerate(predictions) if p.score is not None]
        out = [UNSCORED] * len(predictions)
        if scored:
            values = self.stacker.predict([predictions[i].score for i in scored], [evidence[i] for i in scored])
            for i, value in zip(scored, values.tolist()):
                out[i] = Prediction(
                    verdict=value >= self.threshold, score=float(value), trace=None, time_s=predictions[i].time_s
                )
        return out

    def score(
        self,
        programs: Sequence[str],
        deadline: float | None = None,
        groups: Sequence[str | None] | None = None,
        known: Sequence[bool | None] | None = None,
    ) -> list[Prediction]:
        return self.combine(programs, self.learned(programs, deadline), groups, known)

    def observe(
        self, groups: Iterable[str | None], labels: Iterable[bool | None], programs: Iterable[str | None] | None = None
    ) -> None:
        """Lean labels (and programs) of a finished step join the history (later steps see them)."""
        self.history.update(groups, labels, programs)

    def describe(self) -> dict[str, Any]:
        return {
            "evaluator": "history",
            "history_attempts": len(self.history),
            "threshold": self.threshold,
            "stacker": {
                "coef": dict(zip(self.stacker.features, self.stacker.coef)),
                "intercept": self.stacker.intercept,
                "prior_mean": self.stacker.prior_mean,
            },
        }


def reveal_siblings(
    groups: Sequence[str],
    labels: Sequence[bool],
    fraction: float = REVEAL_FRACTION,
    times: Sequence[float] | None = None,
    seed: int = 0,
) -> list[bool | None]:
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


def split_evidence(
    programs: Sequence[str],
    names: Sequence[str],
    labels: Sequence[bool],
    history: History | None,
    fraction: float = REVEAL_FRACTION,
    seed: int = 0,
) -> list[Evidence]:
    """Evidence per row of a labelled split, with a hybrid step's siblings simulated: a seeded
    ``fraction`` of each theorem's labels is revealed, and every row sees the revealed labels (and
    programs) of the OTHER rows of its theorem, plus its history."""
    known = reveal_siblings(list(names), list(labels), fraction, seed=seed)
    return gather_evidence(history, list(programs), list(names), known)


SIMULATED_DRAWS = 8
"""Draws of :func:`simulated_evidence` with a simulated history, besides the draw without one."""


def simulated_evidence(
    programs: Sequence[str],
    names: Sequence[str],
    labels: Sequence[bool],
    history: History | None,
    draws: int = SIMULATED_DRAWS,
    fraction: float = REVEAL_FRACTION,
    seed: int = 0,
) -> list[tuple[int, Evidence]]:
    """(row, evidence) pairs to fit a stacker on a split whose problems ``history`` has not seen (a
    theorem-disjoint validation split), with the evidence of each use simulated from the split's own
    labels. Fitted only where the history was empty, a stacker cannot learn what a problem's history
    is worth and gives it no weight, though every use of a saved one (``leanloop classify --history``
    on new attempts, rl's hybrid reward with the corpus and earlier steps) comes with one.

    - draw 0: :func:`split_evidence` for every row (``history`` only, ``fraction`` of each problem's
      rows revealed as siblings): a hybrid step on problems never seen;
    - draws 1..``draws``: per problem, a random share of its rows (none up to all but one) becomes its
      history (earlier attempts, labels and programs); on every other draw ``fraction`` of the rest is
      revealed as siblings (a hybrid step), otherwise none (scoring a file of new attempts).

    In draws 1..``draws`` a row is fitted when it is neither history nor a revealed sibling."""
    names, labels = list(names), [bool(y) for y in labels]
    out = list(enumerate(split_evidence(programs, names, labels, history, fraction, seed)))
    members: dict[str, list[int]] = defaultdict(list)
    for i, name in enumerate(names):
        members[name].append(i)
    for draw in range(1, draws + 1):
        rng = np.random.default_rng([seed, draw])
        drawn = history.subset(members) if history is not None else History()
        rest: list[int] = []
        for name in sorted(members):
            index = rng.permutation(members[name]).tolist()
            earlier = int(rng.integers(0, len(index)))
            for i in index[:earlier]:
                drawn.observe(name, labels[i], programs[i])
            rest += index[earlier:]
        rest.sort()
        share = fraction if draw % 2 == 0 else 0.0
        revealed = reveal_siblings([names[i] for i in rest], [labels[i] for i in rest], share, seed=seed + draw)
        fitted = [j for j, k in enumerate(revealed) if k is None]
        evidence = gather_evidence(drawn, [programs[i] for i in rest], [names[i] for i in rest], revealed, fitted)
        out += [(rest[j], e) for j, e in zip(fitted, evidence)]
    return out


def fit_split_stacker(
    programs: Sequence[str],
    names: Sequence[str],
    labels: Sequence[bool],
    scores: Sequence[float],
    history: History | None,
    seed: int = 0,
) -> Stacker:
    """The stacker a classifier run saves: fitted on its validation split's scores, with the training
    split's labels as history and each use's evidence simulated (:func:`simulated_evidence`)."""
    pairs = simulated_evidence(programs, names, labels, history, seed=seed)
    prior = history.pass_rate() if history is not None and len(history) else None
    return Stacker.fit(
        [scores[i] for i, _ in pairs],
        [e for _, e in pairs],
        [labels[i] for i, _ in pairs],
        prior_mean=prior,
        fitted_on={
            "split": "valid",
            "evidence": f"simulated, {SIMULATED_DRAWS} draws with a share "
            f"of each theorem as history (siblings: {REVEAL_FRACTION:.0%} on every other "
            "draw) and one without",
            "seed": seed,
            "history_attempts": len(history) if history is not None else 0,
        },
    )
