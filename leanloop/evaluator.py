"""The Evaluator interface shared by every learned judge of a program (docs/design.md, "Interfaces").

An Evaluator scores a batch of programs, optionally within a deadline, and returns one
:class:`Prediction` per program in input order. The encoder and one-token classifiers, the feedback
model, the cascade and self-consistency all implement it; the RL stage's hybrid reward consumes it.

Deadline contract: ``deadline`` is an absolute ``time.monotonic()`` value. Items the evaluator has
not scored when it passes come back with ``verdict=None`` and ``score=None`` (never a guess), so a
caller can fall back to Lean for exactly those items.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Protocol, Sequence, runtime_checkable


@dataclass(frozen=True)
class Prediction:
    verdict: bool | None  # None: not scored (deadline passed, or the evaluator could not judge it)
    score: float | None  # higher = more likely valid; in [0, 1] for the classifiers
    trace: str | None  # the feedback model's annotated program; None for classifiers
    time_s: float  # wall time spent on this item (its share of the batch it was scored in)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


UNSCORED = Prediction(verdict=None, score=None, trace=None, time_s=0.0)


@runtime_checkable
class Evaluator(Protocol):
    def score(self, programs: Sequence[str], deadline: float | None = None) -> list[Prediction]:
        """One prediction per program, in order; unscored items (deadline) have verdict None."""
        ...


@runtime_checkable
class DescribedEvaluator(Evaluator, Protocol):
    """An Evaluator that says what it is, for the caller's manifest and logs."""

    def describe(self) -> dict[str, Any]: ...


@runtime_checkable
class HistoryAwareEvaluator(Evaluator, Protocol):
    """An Evaluator that also reads what Lean has already said about a problem (classifiers.history).

    A caller that races it against Lean scores the programs with :meth:`learned` while Lean runs,
    then :meth:`combine`s those predictions with the verdicts Lean has returned by the cutoff
    (``known``, None where Lean has not answered) and the problem of each program (``groups``);
    :meth:`observe` adds a finished step's Lean labels to the history later steps see. ``base`` is
    the learned evaluator behind :meth:`learned` (what a refresher retrains)."""

    base: Evaluator

    def learned(self, programs: Sequence[str], deadline: float | None = None) -> list[Prediction]: ...

    def combine(
        self,
        programs: Sequence[str],
        predictions: Sequence[Prediction],
        groups: Sequence[str | None] | None = None,
        known: Sequence[bool | None] | None = None,
    ) -> list[Prediction]: ...

    def observe(
        self, groups: Iterable[str | None], labels: Iterable[bool | None], programs: Iterable[str | None] | None = None
    ) -> None: ...


def deadline_passed(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def deadline_in(seconds: float) -> float:
    """An absolute deadline ``seconds`` from now, in the clock the interface uses."""
    return time.monotonic() + seconds
