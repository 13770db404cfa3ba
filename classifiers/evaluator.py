"""Batch scoring of programs with a trained classifier: the :class:`leanloop.evaluator.Evaluator`
the cascade gate and the hybrid reward call.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, Sequence

import torch

from classifiers.model_io import (
    FALSE_TOKEN,
    ONETOKEN_SUFFIX,
    TRUE_TOKEN,
    EncoderInputs,
    OneTokenInputs,
    encoder_logits,
    encoder_scores,
    onetoken_logits,
    onetoken_loss,
    onetoken_scores,
    prepare_pooling,
)
from classifiers.truncation import HEAD_FRACTION
from leanloop.evaluator import UNSCORED, Prediction, deadline_passed

CLASSIFIER_FILE = "classifier.json"


@dataclass
class ClassifierSpec:
    """What ``classifier.json`` records beside the weights."""

    kind: Literal["encoder", "onetoken"]
    max_length: int
    head_fraction: float
    threshold: float = 0.5
    threshold_source: str = "default 0.5 (not yet calibrated on validation)"
    suffix: str | None = None  # one-token only
    true_token: str | None = None
    false_token: str | None = None
    pooling: str = "cls"  # encoder only: cls (the model's own head) or mean (masked mean of the token states)
    program_tokens: int | None = None  # the program's budget with special tokens / suffix on top
    preamble: str = "keep"  # what of the program's start is dropped before tokenizing (model_io.PREAMBLES)

    def write(self, folder: str | Path) -> Path:
        path = Path(folder) / CLASSIFIER_FILE
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")
        return path

    @classmethod
    def onetoken(cls, max_length: int, threshold: float, threshold_source: str) -> "ClassifierSpec":
        """The one-token format with the project's suffix, answer tokens and head/tail truncation
        (for a model that was not trained as a classifier here, e.g. a debug evaluator)."""
        return cls(
            kind="onetoken",
            max_length=max_length,
            head_fraction=HEAD_FRACTION,
            threshold=threshold,
            threshold_source=threshold_source,
            suffix=ONETOKEN_SUFFIX,
            true_token=TRUE_TOKEN,
            false_token=FALSE_TOKEN,
        )

    @classmethod
    def read(cls, folder: str | Path) -> "ClassifierSpec":
        path = Path(folder) / CLASSIFIER_FILE
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} not found: {folder} is not a trained classifier's final/ folder "
                "(train one with `make classifiers`, then pass artifacts/classifiers/<run>/final)"
            )
        return cls(**json.loads(path.read_text()))


def build_inputs(spec: ClassifierSpec, tokenizer: Any) -> EncoderInputs | OneTokenInputs:
    if spec.kind == "encoder":
        return EncoderInputs(
            tokenizer, spec.max_length, spec.head_fraction, spec.pooling, spec.program_tokens, spec.preamble
        )
    if spec.kind == "onetoken":
        return OneTokenInputs(
            tokenizer,
            spec.max_length,
            spec.head_fraction,
            spec.suffix,
            spec.true_token,
            spec.false_token,
            spec.program_tokens,
            spec.preamble,
        )
    raise ValueError(f"unknown classifier kind {spec.kind!r} in {CLASSIFIER_FILE}; expected encoder or onetoken")


def model_scores(
    kind: str, model: Any, inputs: EncoderInputs | OneTokenInputs, batch: dict[str, torch.Tensor]
) -> torch.Tensor:
    """Scores in [0, 1] for one collated batch (no grad handling: the caller decides)."""
    if kind == "encoder":
        return encoder_scores(encoder_logits(model, batch, inputs.pooling))
    return onetoken_scores(onetoken_logits(model, batch), inputs.true_id, inputs.false_id)


class ClassifierEvaluator:
    """An Evaluator over a model, its input format and a decision threshold."""

    def __init__(
        self,
        spec: ClassifierSpec,
        model: Any,
        tokenizer: Any,
        batch_size: int = 16,
        device: str | torch.device = "cpu",
        threshold: float | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.spec = spec
        self.model = model.eval().to(device)
        self.tokenizer = tokenizer
        self.inputs = build_inputs(spec, tokenizer)
        if spec.kind == "encoder":
            prepare_pooling(self.model, spec.pooling)
        self.batch_size = batch_size
        self.device = torch.device(device)
        self.threshold = spec.threshold if threshold is None else threshold

    @classmethod
    def load(
        cls,
        final_dir: str | Path,
        batch_size: int = 16,
        device: str = "cpu",
        threshold: float | None = None,
        dtype: str = "float32",
    ) -> "ClassifierEvaluator":
        from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

        final_dir = Path(final_dir)
        spec = ClassifierSpec.read(final_dir)
        auto = AutoModelForSequenceClassification if spec.kind == "encoder" else AutoModelForCausalLM
        model = auto.from_pretrained(final_dir, dtype=getattr(torch, dtype))
        tokenizer = AutoTokenizer.from_pretrained(final_dir)
        return cls(spec, model, tokenizer, batch_size=batch_size, device=device, threshold=threshold)

    @torch.inference_mode()
    def raw_scores(
        self, programs: Sequence[str], deadline: float | None = None
    ) -> tuple[list[float | None], list[float]]:
        """Per program: score (None if its batch had not started by the deadline) and time share."""
        encoded = [self.inputs.encode(p) for p in programs]
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        scores: list[float | None] = [None] * len(encoded)
        times = [0.0] * len(encoded)
        for start in range(0, len(order), self.batch_size):
            if deadline_passed(deadline):
                break
            chunk = order[start : start + self.batch_size]
            began = time.perf_counter()
            batch = {k: v.to(self.device) for k, v in self.inputs.collate([encoded[i] for i in chunk]).items()}
            values = model_scores(self.spec.kind, self.model, self.inputs, batch).tolist()
            share = (time.perf_counter() - began) / len(chunk)
            for i, value in zip(chunk, values):
                scores[i], times[i] = float(value), share
        return scores, times

    def training_loss(self, programs: Sequence[str], labels: Sequence[bool]) -> torch.Tensor:
        """The classifier's own training loss on labelled programs (with grad: for fine-tuning in place,
        as the RL stage's evaluator refresh does)."""
        encoded = [self.inputs.encode(p) for p in programs]
        batch = {k: v.to(self.device) for k, v in self.inputs.collate(encoded).items()}
        if self.spec.kind == "onetoken":
            targets = torch.tensor([self.inputs.target(bool(label)) for label in labels], device=self.device)
            return onetoken_loss(onetoken_logits(self.model, batch), targets)
        targets = torch.tensor([int(label) for label in labels], device=self.device)
        return torch.nn.functional.cross_entropy(encoder_logits(self.model, batch).float(), targets)

    def score(self, programs: Sequence[str], deadline: float | None = None) -> list[Prediction]:
        scores, times = self.raw_scores(programs, deadline)
        return [
            UNSCORED if s is None else Prediction(verdict=s >= self.threshold, score=s, trace=None, time_s=t)
            for s, t in zip(scores, times)
        ]


# The history-aware evaluator and the trivial baselines are part of this public loader: other stages
# (rl's hybrid reward, the cascade report, which leads with the same baselines) reach them here.
from classifiers.baselines import BASELINES, Baselines  # noqa: E402
from classifiers.evidence import History, sibling_counts  # noqa: E402
from classifiers.history import HistoryEvaluator, reveal_siblings  # noqa: E402
from classifiers.stacker import Stacker  # noqa: E402


def load_history_evaluator(
    final_dir: str | Path, history: History | None = None, threshold: float | None = None, **evaluator_options: Any
) -> HistoryEvaluator:
    """A classifier run's ``final/`` (model, ``classifier.json``, ``history_stacker.json``) as the
    history-aware evaluator; ``evaluator_options`` go to :meth:`ClassifierEvaluator.load`."""
    stacker = Stacker.load(final_dir)  # first: a run without one fails before its model loads
    return HistoryEvaluator(ClassifierEvaluator.load(final_dir, **evaluator_options), stacker, history, threshold)


__all__ = [
    "BASELINES",
    "Baselines",
    "CLASSIFIER_FILE",
    "ClassifierEvaluator",
    "ClassifierSpec",
    "History",
    "HistoryEvaluator",
    "Stacker",
    "build_inputs",
    "load_history_evaluator",
    "model_scores",
    "reveal_siblings",
    "sibling_counts",
]
