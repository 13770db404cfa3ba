"""What Lean has already said about a program's problem: the evidence the history-aware evaluator
(:mod:`classifiers.history`) stacks with a learned score.

- **history**: the Lean labels of the problem's earlier attempts (:class:`History`), as a Beta
  posterior mean shrunk toward the prior pass rate, and their count;
- **siblings**: the same for the group's rollouts whose verdicts are known at scoring time, kept
  apart from the history (a step's fast verdicts are a biased sample);
- **neighbour**: how close this program's proof is to the nearest proof of the same problem Lean
  accepted, minus the nearest it rejected (:func:`neighbour_margin`): a proof that repeats an
  accepted one, up to small edits, is usually accepted again.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Sequence

import numpy as np

# Scores of exactly 0 or 1 (the majority baseline, a saturated classifier) would have infinite logits.
EPSILON = 1e-4

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
    return " ".join(program[found.end() if found else 0 :].split())


@lru_cache(maxsize=4096)
def _shingles(view: str) -> np.ndarray:
    # hash() of a str is salted per process; shingle sets are only compared within one process
    grams = {view[i : i + SHINGLE] for i in range(max(1, len(view) - SHINGLE + 1))}
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
            lambda: {True: deque(maxlen=KEPT_PROGRAMS), False: deque(maxlen=KEPT_PROGRAMS)}
        )
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

    def update(
        self, groups: Iterable[str | None], labels: Iterable[bool | None], programs: Iterable[str | None] | None = None
    ) -> None:
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
    def from_rows(
        cls,
        rows: Iterable[dict[str, Any]],
        group_field: str = "name",
        label_field: str = "label",
        program_field: str = "program",
    ) -> "History":
        history = cls()
        for row in rows:
            label = row.get(label_field)
            history.observe(row.get(group_field), None if label is None else bool(label), row.get(program_field))
        return history

    @classmethod
    def from_columns(
        cls, names: Sequence[str | None], labels: Sequence[bool | None], programs: Sequence[str | None]
    ) -> "History":
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


def gather_evidence(
    history: History | None,
    programs: Sequence[str],
    groups: Sequence[str | None],
    known: Sequence[bool | None] | None,
    items: Sequence[int] | None = None,
) -> list[Evidence]:
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
        out.append(
            Evidence(
                history=history.get(group) if history is not None else (0, 0),
                siblings=siblings[i],
                neighbour=neighbour_margin(views[i], pool),
            )
        )
    return out
