"""The history stacker: a logistic regression over a learned score and its problem's evidence
(:mod:`classifiers.evidence`), saved with a classifier run (``history_stacker.json``) so every
prediction of the history-aware evaluator can be reproduced from the saved coefficients."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from classifiers.evidence import PRIOR_STRENGTH, Evidence, logit, shrunk_rate

STACKER_FILE = "history_stacker.json"
FEATURES = (
    "score_logit",
    "history_logit",
    "history_count",
    "sibling_logit",
    "sibling_count",
    "score_logit_unseen",
    "neighbour_margin",
)


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
    def fit(
        cls,
        scores: Sequence[float],
        evidence: Sequence[Evidence],
        labels: Sequence[bool],
        prior_mean: float | None = None,
        strength: float = PRIOR_STRENGTH,
        C: float = 1.0,
        fitted_on: dict[str, Any] | None = None,
    ) -> "Stacker":
        """Fit on one split's learned scores, evidence and Lean labels; threshold at best MCC there."""
        from sklearn.linear_model import LogisticRegression

        from leanloop.metrics import select_threshold

        labels = np.asarray(labels, dtype=int)
        if len(set(labels.tolist())) < 2:
            raise ValueError("the history stacker needs valid and invalid programs in its fitting split")
        prior = float(labels.mean()) if prior_mean is None else float(prior_mean)
        x = design(scores, evidence, prior, strength)
        model = LogisticRegression(C=C, max_iter=1000).fit(x, labels)
        stacker = cls(
            coef=[float(c) for c in model.coef_[0]],
            intercept=float(model.intercept_[0]),
            prior_mean=prior,
            strength=strength,
            fitted_on=dict(fitted_on or {}, rows=int(len(labels))),
        )
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
            raise FileNotFoundError(
                f"{path} not found: the classifier run has no history stacker "
                "(runs trained before it was saved with them: retrain, or fit one with "
                "classifiers.stacker.Stacker.fit)"
            )
        stacker = cls(**json.loads(path.read_text()))
        if list(stacker.features) != list(FEATURES):
            raise ValueError(
                f"{path} was fitted on features {stacker.features}, this code computes "
                f"{list(FEATURES)}: retrain the classifier run (its stacker is fitted after training)"
            )
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
    return np.column_stack(
        [
            score_logit,
            logit(shrunk_rate(history[:, 0], history[:, 1], prior_mean, strength)),
            np.log1p(history[:, 1]),
            logit(shrunk_rate(siblings[:, 0], siblings[:, 1], prior_mean, strength)),
            np.log1p(siblings[:, 1]),
            score_logit * unseen,
            neighbour,
        ]
    )
