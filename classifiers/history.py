"""The history-aware evaluator: what Lean already said about a problem, stacked with a learned score.

A learned classifier judges one program at a time. Lean has usually judged the same problem before:
in a corpus run, in earlier RL steps, and, inside one hybrid GRPO step, for the sibling rollouts of
the group whose checks finished before the cutoff. That evidence is strong (a problem's earlier pass
rate ranks the RL-Lean rounds' candidates far better than any learned model here), but a pass rate
says nothing about which of a group's unfinished rollouts is right, and GRPO's advantage is
group-relative. So three kinds of evidence are combined with the learned score:

- **history**: the Lean labels of the problem's earlier attempts (:class:`History`), as a Beta
  posterior mean shrunk toward the prior pass rate by ``strength`` pseudo-attempts, and their count;
- **siblings**: the same for the group's rollouts whose verdicts are known at scoring time, kept
  apart from the history (a step's fast verdicts are a biased sample; the stacker weighs them itself);
- **neighbour**: how close this program's proof is to the nearest proof of the same problem Lean
  accepted, minus the nearest it rejected (:func:`neighbour_margin`, over the history's kept programs
  and the known siblings). It is what tells one rollout of a problem from another: a proof that
  repeats an accepted one, up to small edits, is usually accepted again.

A **stacker** (:class:`Stacker`): a logistic regression over :data:`FEATURES`, fitted on the
validation split (with each use's evidence simulated there: :func:`simulated_evidence`) and saved
with the run (``history_stacker.json``), so every prediction can be
reproduced from the saved coefficients; its threshold is chosen on the same split.
:class:`HistoryEvaluator` is an :class:`leanloop.evaluator.Evaluator`; the RL stage's hybrid race
(loaded from a classifier run by :func:`classifiers.evaluator.load_history_evaluator`) calls
:meth:`HistoryEvaluator.learned` while Lean runs and :meth:`HistoryEvaluator.combine` at the
cutoff, with the sibling verdicts Lean has returned by then.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict, deque
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from leanloop.evaluator import UNSCORED, Evaluator, Prediction

STACKER_FILE = "history_stacker.json"
FEATURES = ("score_logit", "history_logit", "history_count", "sibling_logit", "sibling_count",
            "score_logit_unseen", "neighbour_margin")
# Scores of exactly 0 or 1 (the majority baseline, a saturated classifier) would have infinite logits.
EPSILON = 1e-4
# The share of rollouts whose Lean verdict is back at the hybrid cutoff, used to simulate siblings:
# seeds/000_8a041fc0978068ca.txt (LLF) Section 6.1, "This cutoff is set by GPU evaluation time, not
# tuned; about 43% of candidates then have Lean verdicts."
REVEAL_FRACTION = 0.43


PRIOR_STRENGTH = 2.0
"""Pseudo-attempts of the prior pass rate in a problem's Beta posterior."""
KEPT_PROGRAMS = 16
"""A problem's most recent programs the history keeps per verdict, for :func:`neighbour_margin`
(bounded, so a long RL run's history stays small)."""
SHINGLE = 5
"""Characters per shingle of :func:`neighbour_margin`'s Jaccard similarity. Measured on the RL-Lean
rounds (bench.evaluators, all four splits): 5-character shingles of the proof view gave the stack a
larger margin over the problem prior than whitespace tokens, token 2/3/5-grams, or the whole file."""
_PROOF_START = re.compile(r":=(\s*by\b)?")


def shrunk_rate(valid: Any, total: Any, prior_mean: float, strength: float = PRIOR_STRENGTH) -> np.ndarray:
    """A problem's pass rate from ``valid`` of ``total`` Lean labels, shrunk toward ``prior_mean``
    (the Beta posterior mean; ``total`` 0 gives the prior)."""
    valid, total = np.asarray(valid, dtype=float), np.asarray(total, dtype=float)
    return (valid + strength * prior_mean) / (total + strength)


def logit(p: Any) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=float), EPSILON, 1 - EPSILON)
    return np.log(p / (1 - p))


def proof_view(program: str) -> str:
    """What follows a program's first ``:=`` (and the ``by`` right after it; all of the program if it
    has none), whitespace folded: the header and statement a problem's programs share would make
    every pair look alike."""
    found = _PROOF_START.search(program)
    return " ".join(program[found.end() if found else 0:].split())


@lru_cache(maxsize=4096)
def _shingles(view: str) -> np.ndarray:
    # hash() of a str is salted per process; shingle sets are only compared within one process
    grams = {view[i:i + SHINGLE] for i in range(max(1, len(view) - SHINGLE + 1))}
    return np.unique(np.fromiter((hash(g) for g in grams), dtype=np.int64, count=len(grams)))


def similarity(a: str, b: str) -> float:
    """Jaccard similarity of two proof views' character shingles."""
    x, y = _shingles(a), _shingles(b)
    both = len(np.intersect1d(x, y, assume_unique=True))
    return both / (len(x) + len(y) - both)


def neighbour_margin(view: str, known: Iterable[tuple[str, bool]]) -> float:
    """Similarity to the nearest known accepted proof minus that to the nearest known rejected one
    (0 for a side with none), over ``known`` (proof view, Lean label) pairs of the same problem."""
    nearest = {True: 0.0, False: 0.0}
    for other, label in known:
        nearest[label] = max(nearest[label], similarity(view, other))
    return nearest[True] - nearest[False]


@dataclass(frozen=True)
class Evidence:
    """What Lean had said about one program's problem when the program was scored."""

    history: tuple[int, int] = (0, 0)
    """(valid, total) Lean labels of the problem's earlier attempts."""
    siblings: tuple[int, int] = (0, 0)
    """(valid, total) known verdicts of the other rollouts of its group (never its own)."""
    neighbour: float = 0.0
    """:func:`neighbour_margin` over the history's kept programs and the known siblings."""

    @property
    def counts(self) -> tuple[int, int]:
        """History and siblings together."""
        return self.history[0] + self.siblings[0], self.history[1] + self.siblings[1]

    def to_json(self) -> dict[str, Any]:
        return {"history": list(self.history), "siblings": list(self.siblings), "neighbour": round(self.neighbour, 6)}


class History:
    """Lean labels per problem: ``counts[group] = [valid, total]``, and the problem's most recent
    programs per verdict (:data:`KEPT_PROGRAMS`, as proof views). Unlabelled attempts are not counted."""

    def __init__(self, counts: dict[str, list[int]] | None = None) -> None:
        self.counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.programs: dict[str, dict[bool, deque[str]]] = defaultdict(
            lambda: {True: deque(maxlen=KEPT_PROGRAMS), False: deque(maxlen=KEPT_PROGRAMS)})
        for group, (valid, total) in (counts or {}).items():
            self.counts[group] = [int(valid), int(total)]

    def observe(self, group: str | None, label: bool | None, program: str | None = None) -> None:
        if group is None or label is None:
            return
        entry = self.counts[group]
        entry[0] += int(bool(label))
        entry[1] += 1
        if program is not None:
            self.programs[group][bool(label)].append(proof_view(program))

    def update(self, groups: Iterable[str | None], labels: Iterable[bool | None],
               programs: Iterable[str | None] | None = None) -> None:
        groups, labels = list(groups), list(labels)
        programs = list(programs) if programs is not None else [None] * len(groups)
        for group, label, program in zip(groups, labels, programs, strict=True):
            self.observe(group, label, program)

    def get(self, group: str | None) -> tuple[int, int]:
        if group is None or group not in self.counts:
            return 0, 0
        valid, total = self.counts[group]
        return valid, total

    def subset(self, groups: Iterable[str]) -> "History":
        """A copy holding only these problems' counts and kept programs."""
        out = History()
        for group in groups:
            if group in self.counts:
                out.counts[group] = list(self.counts[group])
            if group in self.programs:
                for label, views in self.programs[group].items():
                    out.programs[group][label].extend(views)
        return out

    def known_programs(self, group: str | None) -> list[tuple[str, bool]]:
        """(proof view, label) of the problem's kept programs."""
        if group is None or group not in self.programs:
            return []
        return [(view, label) for label, views in self.programs[group].items() for view in views]

    def pass_rate(self) -> float | None:
        valid = sum(v for v, _ in self.counts.values())
        total = sum(t for _, t in self.counts.values())
        return valid / total if total else None

    def __len__(self) -> int:
        return sum(t for _, t in self.counts.values())

    @classmethod
    def from_rows(cls, rows: Iterable[dict[str, Any]], group_field: str = "name",
                  label_field: str = "label", program_field: str = "program") -> "History":
        history = cls()
        for row in rows:
            label = row.get(label_field)
            history.observe(row.get(group_field), None if label is None else bool(label), row.get(program_field))
        return history

    @classmethod
    def from_columns(cls, names: Sequence[str | None], labels: Sequence[bool | None],
                     programs: Sequence[str | None]) -> "History":
        """One split's columns (a corpus split's names, labels and programs) as a history."""
        history = cls()
        history.update(names, labels, programs)
        return history

    @classmethod
    def from_corpus(cls, ref: str, group_field: str = "name") -> "History":
        """Every labelled row of a data-stage run (``artifacts://data/<run>`` or its folder), all splits:
        the run is the history, not a training set (the rows it scores need not be in it)."""
        from classifiers.examples import UNLABELLED
        from leanloop.artifacts import resolve_run
        from leanloop.corpus import read_corpus

        run = resolve_run(ref, "data")
        rows = read_corpus(run, tuple(dict.fromkeys((group_field, "label", "category", "program"))))
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


def gather_evidence(history: History | None, programs: Sequence[str], groups: Sequence[str | None],
                    known: Sequence[bool | None] | None, items: Sequence[int] | None = None) -> list[Evidence]:
    """Per item: its problem's history, its known siblings, and its neighbour margin over both.
    ``items``: only these indices (e.g. the unrevealed ones a step scores); every item's known label
    and program still informs the others."""
    if len(programs) != len(groups):
        raise ValueError(f"{len(groups)} groups for {len(programs)} programs")
    siblings = sibling_counts(groups, known)
    views = [proof_view(p) for p in programs]
    revealed: dict[str, list[int]] = defaultdict(list)
    for i, group in enumerate(groups):
        if group is not None and known is not None and known[i] is not None:
            revealed[group].append(i)
    out = []
    for i in range(len(groups)) if items is None else items:
        group = groups[i]
        pool = history.known_programs(group) if history is not None else []
        pool += [(views[j], bool(known[j])) for j in revealed.get(group, ()) if j != i]
        out.append(Evidence(history=history.get(group) if history is not None else (0, 0),
                            siblings=siblings[i], neighbour=neighbour_margin(views[i], pool)))
    return out


@dataclass
class Stacker:
    """Logistic regression over :data:`FEATURES`; everything needed to reproduce a prediction."""

    coef: list[float]
    intercept: float
    prior_mean: float
    """Pass rate the history and sibling rates shrink toward (the fitting split's)."""
    strength: float = PRIOR_STRENGTH
    """Pseudo-attempts of the prior in the Beta posteriors."""
    threshold: float = 0.5
    threshold_source: str = "default 0.5"
    features: list[str] = field(default_factory=lambda: list(FEATURES))
    fitted_on: dict[str, Any] = field(default_factory=dict)

    def design(self, scores: Sequence[float], evidence: Sequence[Evidence]) -> np.ndarray:
        return design(scores, evidence, self.prior_mean, self.strength)

    def predict(self, scores: Sequence[float], evidence: Sequence[Evidence]) -> np.ndarray:
        z = self.design(scores, evidence) @ np.asarray(self.coef) + self.intercept
        return 1 / (1 + np.exp(-z))

    @classmethod
    def fit(cls, scores: Sequence[float], evidence: Sequence[Evidence], labels: Sequence[bool],
            prior_mean: float | None = None, strength: float = PRIOR_STRENGTH, C: float = 1.0,
            fitted_on: dict[str, Any] | None = None) -> "Stacker":
        """Fit on one split's learned scores, evidence and Lean labels; threshold at best MCC there."""
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
            raise ValueError(f"{path} was fitted on features {stacker.features}, this code computes "
                             f"{list(FEATURES)}: retrain the classifier run (its stacker is fitted after training)")
        return stacker


def design(scores: Sequence[float], evidence: Sequence[Evidence], prior_mean: float, strength: float) -> np.ndarray:
    """The stacker's inputs (:data:`FEATURES`). History and siblings are separate features because
    they are different samples: the history is every earlier attempt, the siblings a step's fastest
    verdicts. ``score_logit_unseen`` is the score's logit on problems with no evidence at all (zero
    elsewhere): without it one weight would have to serve both problems Lean has seen, where the score
    mostly breaks ties, and unseen ones, where it is all there is."""
    history = np.asarray([e.history for e in evidence], dtype=float).reshape(-1, 2)
    siblings = np.asarray([e.siblings for e in evidence], dtype=float).reshape(-1, 2)
    neighbour = np.asarray([e.neighbour for e in evidence], dtype=float)
    score_logit = logit(scores)
    unseen = (history[:, 1] + siblings[:, 1]) == 0
    return np.column_stack([
        score_logit,
        logit(shrunk_rate(history[:, 0], history[:, 1], prior_mean, strength)), np.log1p(history[:, 1]),
        logit(shrunk_rate(siblings[:, 0], siblings[:, 1], prior_mean, strength)), np.log1p(siblings[:, 1]),
        score_logit * unseen, neighbour,
    ])


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

    def evidence(self, programs: Sequence[str], groups: Sequence[str | None] | None = None,
                 known: Sequence[bool | None] | None = None) -> list[Evidence]:
        groups = list(groups) if groups is not None else [None] * len(programs)
        return gather_evidence(self.history, programs, groups, known)

    def combine(self, programs: Sequence[str], predictions: Sequence[Prediction],
                groups: Sequence[str | None] | None = None,
                known: Sequence[bool | None] | None = None) -> list[Prediction]:
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
                out[i] = Prediction(verdict=value >= self.threshold, score=float(value), trace=None,
                                    time_s=predictions[i].time_s)
        return out

    def score(self, programs: Sequence[str], deadline: float | None = None,
              groups: Sequence[str | None] | None = None,
              known: Sequence[bool | None] | None = None) -> list[Prediction]:
        return self.combine(programs, self.learned(programs, deadline), groups, known)

    def observe(self, groups: Iterable[str | None], labels: Iterable[bool | None],
                programs: Iterable[str | None] | None = None) -> None:
        """Lean labels (and programs) of a finished step join the history (later steps see them)."""
        self.history.update(groups, labels, programs)

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


def split_evidence(programs: Sequence[str], names: Sequence[str], labels: Sequence[bool],
                   history: History | None, fraction: float = REVEAL_FRACTION, seed: int = 0) -> list[Evidence]:
    """Evidence per row of a labelled split, with a hybrid step's siblings simulated: a seeded
    ``fraction`` of each theorem's labels is revealed, and every row sees the revealed labels (and
    programs) of the OTHER rows of its theorem, plus its history."""
    known = reveal_siblings(list(names), list(labels), fraction, seed=seed)
    return gather_evidence(history, list(programs), list(names), known)


SIMULATED_DRAWS = 8
"""Draws of :func:`simulated_evidence` with a simulated history, besides the draw without one."""


def simulated_evidence(programs: Sequence[str], names: Sequence[str], labels: Sequence[bool],
                       history: History | None, draws: int = SIMULATED_DRAWS, fraction: float = REVEAL_FRACTION,
                       seed: int = 0) -> list[tuple[int, Evidence]]:
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


def fit_split_stacker(programs: Sequence[str], names: Sequence[str], labels: Sequence[bool],
                      scores: Sequence[float], history: History | None, seed: int = 0) -> Stacker:
    """The stacker a classifier run saves: fitted on its validation split's scores, with the training
    split's labels as history and each use's evidence simulated (:func:`simulated_evidence`)."""
    pairs = simulated_evidence(programs, names, labels, history, seed=seed)
    prior = history.pass_rate() if history is not None and len(history) else None
    return Stacker.fit([scores[i] for i, _ in pairs], [e for _, e in pairs], [labels[i] for i, _ in pairs],
                       prior_mean=prior,
                       fitted_on={"split": "valid", "evidence": f"simulated, {SIMULATED_DRAWS} draws with a share "
                                  f"of each theorem as history (siblings: {REVEAL_FRACTION:.0%} on every other "
                                  "draw) and one without", "seed": seed,
                                  "history_attempts": len(history) if history is not None else 0})
