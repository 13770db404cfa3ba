"""Step-label baselines the verifier is reported beside: a TF-IDF step classifier trained on the
train split's labelled steps.

Each step is one example: its text (the prose the verifier reads; on the embedded default that is
the tactic text) with its position in the proof, labelled correct or not. A logistic regression over
word and character n-grams scores each held-out step; a proof's predicted labels are correct up to
the first step scored below 0.5 and incorrect from there on, the shape of Lean's labels
(:meth:`TfidfStepClassifier.wrong_probabilities` gives the scores for other thresholds).
"""

from __future__ import annotations

from typing import Sequence

from prm.labelled_proofs import ProofRecord
from prm.labels_from_lean import training_prefix
from prm.metrics import labels_at


def _text(step: dict, index: int) -> str:
    return f"step{min(index, 9)} " + (step.get("prose") or step.get("tactic") or "")


class TfidfStepClassifier:
    """``fit`` on labelled proofs, ``predict`` first-error-shaped step labels."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.model = None
        self.constant: bool | None = None

    def fit(self, records: Sequence[ProofRecord], max_steps: int) -> "TfidfStepClassifier":
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline

        texts, labels = [], []
        for record in records:
            for index, label in enumerate(training_prefix(record.labels)[:max_steps]):
                texts.append(_text(record.steps[index], index))
                labels.append(bool(label))
        if len(set(labels)) < 2:  # one class (or none) in training: predict it
            self.constant = labels[0] if labels else True
            return self
        self.model = make_pipeline(
            TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), min_df=2, sublinear_tf=True, max_features=50_000),
            LogisticRegression(max_iter=1000, C=1.0, random_state=self.seed),
        )
        self.model.fit(texts, labels)
        return self

    def wrong_probabilities(
        self, records: Sequence[ProofRecord], truth: Sequence[list[bool]], running_max: bool = True
    ) -> list[list[float]]:
        """P(step k is wrong) read first-error shaped: the highest P(wrong) of steps 1..k
        (``running_max=False``: each step's own score)."""
        out = []
        for record, labels in zip(records, truth):
            if self.model is None:
                wrong = [0.0 if self.constant else 1.0] * len(labels)
            else:
                texts = [_text(record.steps[i], i) for i in range(len(labels))]
                wrong = self.model.predict_proba(texts)[:, list(self.model.classes_).index(False)].tolist()
            out.append([max(wrong[: k + 1]) for k in range(len(wrong))] if running_max else wrong)
        return out

    def predict(self, records: Sequence[ProofRecord], truth: Sequence[list[bool]]) -> list[list[bool]]:
        return labels_at(self.wrong_probabilities(records, truth), 0.5)
