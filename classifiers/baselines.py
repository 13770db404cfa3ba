"""The trivial baselines every evaluator report leads with (the classifiers' and ``cascade-eval``'s)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

TFIDF = "tfidf_logreg"
MAJORITY = "majority_class"
PRIOR = "per_problem_prior"
SIBLINGS = "sibling_rate"
NEAREST = "nearest_proof"
# Every evaluator report leads with these; its first line says whether one of them beats a learned model.
BASELINES = (MAJORITY, PRIOR, TFIDF, SIBLINGS, NEAREST)


@dataclass
class TfidfConfig:
    ngram_max: int = 2
    """Word n-grams from 1 to this."""
    min_df: int = 2
    """Ignore tokens seen in fewer programs than this."""
    max_features: int | None = 200_000
    C: float = 1.0
    """Inverse regularisation strength of the logistic regression."""
    token_pattern: str = r"[^\s]+"
    """Whitespace-separated Lean tokens (keeps `<;>`, `h₀`, `nlinarith` and `[sq_nonneg` intact)."""
    sublinear_tf: bool = True
    seed: int = 0


def majority_scores(train_labels: Sequence[bool], n: int) -> np.ndarray:
    """Constant score: 1.0 if most training programs are valid, else 0.0 (ties: invalid)."""
    if len(train_labels) == 0:
        raise ValueError("majority baseline needs at least one labelled training program")
    majority = float(np.mean(np.asarray(train_labels, dtype=float)) > 0.5)
    return np.full(n, majority)


class TfidfBaseline:
    """Fit on the training split's programs and labels; score any programs."""

    def __init__(self, config: TfidfConfig | None = None) -> None:
        self.config = config or TfidfConfig()
        self.pipeline = None

    def fit(self, programs: Sequence[str], labels: Sequence[bool]) -> "TfidfBaseline":
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline

        labels = np.asarray(labels, dtype=bool)
        if len(programs) != len(labels):
            raise ValueError(f"{len(programs)} programs but {len(labels)} labels")
        if len(set(labels.tolist())) < 2:
            raise ValueError("TF-IDF baseline needs both valid and invalid training programs")
        c = self.config
        self.pipeline = make_pipeline(
            TfidfVectorizer(
                ngram_range=(1, c.ngram_max),
                min_df=c.min_df,
                max_features=c.max_features,
                token_pattern=c.token_pattern,
                sublinear_tf=c.sublinear_tf,
                lowercase=False,
            ),
            LogisticRegression(C=c.C, max_iter=5000, random_state=c.seed),
        )
        self.pipeline.fit(list(programs), labels)
        return self

    def scores(self, programs: Sequence[str]) -> np.ndarray:
        if self.pipeline is None:
            raise RuntimeError("TfidfBaseline.scores called before fit")
        return self.pipeline.predict_proba(list(programs))[:, 1]


class Baselines:
    """The baselines (:data:`BASELINES`) fitted on one training split's programs, labels and
    problem names."""

    def __init__(
        self, programs: Sequence[str], labels: Sequence[bool], names: Sequence[str], tfidf: TfidfConfig | None = None
    ) -> None:
        from classifiers.evidence import History
        from classifiers.history import REVEAL_FRACTION

        self.reveal_fraction = REVEAL_FRACTION
        """Share of each problem's labels the sibling rate sees (a hybrid step's cutoff)."""
        self.labels = [bool(y) for y in labels]
        self.tfidf = TfidfBaseline(tfidf).fit(programs, self.labels)
        self.history = History.from_columns(names, self.labels, programs)
        self.prior_mean = float(np.mean(self.labels))

    def scores(
        self, programs: Sequence[str], labels: Sequence[bool], names: Sequence[str], seed: int = 0
    ) -> dict[str, np.ndarray]:
        """Each baseline's scores of these rows. The sibling rate and the nearest proof reveal a
        seeded share of each problem's ``labels`` among these rows (the same draw as the history-aware
        evaluator's evidence for the same rows and seed), so score a whole split, or whole problems, at once."""
        from classifiers.evidence import shrunk_rate
        from classifiers.history import split_evidence

        names, labels = list(names), [bool(y) for y in labels]
        if not names:
            return {name: np.zeros(0) for name in BASELINES}
        evidence = split_evidence(programs, names, labels, self.history, self.reveal_fraction, seed=seed)
        siblings = [e.siblings for e in evidence]
        prior = [self.history.get(name) for name in names]
        return {
            MAJORITY: majority_scores(self.labels, len(names)),
            PRIOR: shrunk_rate([v for v, _ in prior], [t for _, t in prior], self.prior_mean),
            TFIDF: self.tfidf.scores(programs),
            SIBLINGS: shrunk_rate([v for v, _ in siblings], [t for _, t in siblings], self.prior_mean),
            NEAREST: (np.asarray([e.neighbour for e in evidence]) + 1) / 2,
        }
