"""Evaluator refresh (the seed leaves it to future work): fine-tune the evaluator between cycles on
the Lean verdicts collected during training, then measure its drift again.

Labels come only from Lean (a step's finished checks and the timeout audit's rechecks), never
from the evaluator itself. Every ``every_n_steps`` steps, with at least ``min_labels`` collected
programs, the buffer is split by theorem (a hash of the name, so no theorem is on both sides) into
a training part and a held-out part; the held-out agreement (accuracy, FPR) is measured, the
classifier takes ``steps`` optimizer steps of its own training objective on the training part
(:mod:`classifiers.model_io`: the one-token classifier's cross-entropy on the verdict token, or the
encoder's two-class cross-entropy), and the held-out agreement is measured again. The refreshed
evaluator scores the following steps; the run saves it under ``evaluator_refreshed/``.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from rl.curriculum import rng_state, set_rng_state
from rl.drift import Pair, agreement


@dataclass
class RefreshConfig:
    enabled: bool = False
    every_n_steps: int = 10
    steps: int = 4
    lr: float = 1.0e-5
    batch_size: int = 8
    min_labels: int = 16
    holdout_fraction: float = 0.25
    seed: int = 0


@dataclass
class Labelled:
    program: str
    label: bool
    name: str


class LabelBuffer:
    """Lean-labelled programs seen during training, one entry per distinct program."""

    def __init__(self, capacity: int = 4096):
        self.capacity = capacity
        self.items: dict[str, Labelled] = {}

    def add(self, program: str | None, label: bool | None, name: str) -> None:
        if program is None or label is None:
            return
        self.items.pop(program, None)
        self.items[program] = Labelled(program, bool(label), name)
        while len(self.items) > self.capacity:
            self.items.pop(next(iter(self.items)))

    def __len__(self) -> int:
        return len(self.items)

    def state_dict(self) -> list[dict]:
        """The labelled programs, oldest first (the capacity evicts in that order)."""
        return [asdict(x) for x in self.items.values()]

    def load_state_dict(self, state: list[dict]) -> None:
        self.items = {x["program"]: Labelled(**x) for x in state}

    def split(self, holdout_fraction: float) -> tuple[list[Labelled], list[Labelled]]:
        def held_out(name: str) -> bool:
            digest = int(hashlib.sha256(f"refresh\0{name}".encode()).hexdigest()[:8], 16)
            return digest / 0xFFFFFFFF < holdout_fraction

        items = list(self.items.values())
        return [x for x in items if not held_out(x.name)], [x for x in items if held_out(x.name)]


@dataclass
class RefreshReport:
    step: int
    train: int
    holdout: int
    before_accuracy: float | None
    before_fpr: float | None
    after_accuracy: float | None
    after_fpr: float | None
    losses: list[float]
    skipped: str | None = None

    def metrics(self) -> dict[str, float]:
        out = {"refresh/train": float(self.train), "refresh/holdout": float(self.holdout)}
        for key in ("before_accuracy", "before_fpr", "after_accuracy", "after_fpr"):
            value = getattr(self, key)
            if value is not None:
                out[f"refresh/{key}"] = float(value)
        if self.losses:
            out["refresh/loss_first"], out["refresh/loss_last"] = self.losses[0], self.losses[-1]
        return out

    def to_dict(self) -> dict:
        return asdict(self)


class EvaluatorRefresher:
    """Refreshes a :class:`classifiers.evaluator.ClassifierEvaluator` in place."""

    def __init__(self, evaluator: Any, config: RefreshConfig | None = None):
        from classifiers.evaluator import ClassifierEvaluator

        if not isinstance(evaluator, ClassifierEvaluator):
            raise TypeError(
                f"evaluator refresh fine-tunes classifier evaluators; got {type(evaluator).__name__} "
                "(set refresh.enabled: false for other evaluators)"
            )
        self.evaluator = evaluator
        self.config = config or RefreshConfig()
        self.rng = random.Random(self.config.seed)
        self.optimizer = None

    def due(self, step: int) -> bool:
        return self.config.enabled and step > 0 and step % self.config.every_n_steps == 0

    def agreement(self, items: list[Labelled]) -> tuple[float | None, float | None]:
        if not items:
            return None, None
        predictions = self.evaluator.score([x.program for x in items])
        pairs = [Pair(bool(p.verdict), x.label, "refresh") for p, x in zip(predictions, items) if p.verdict is not None]
        accuracy, fpr, *_ = agreement(pairs)
        return accuracy, fpr

    def _loss(self, batch_items: list[Labelled]) -> torch.Tensor:
        return self.evaluator.training_loss([x.program for x in batch_items], [x.label for x in batch_items])

    def refresh(self, step: int, buffer: LabelBuffer) -> RefreshReport:
        c = self.config
        train, holdout = buffer.split(c.holdout_fraction)
        before = self.agreement(holdout)
        if len(buffer) < c.min_labels or not train:
            return RefreshReport(
                step,
                len(train),
                len(holdout),
                *before,
                *before,
                [],
                skipped=f"{len(buffer)} labelled programs < min_labels {c.min_labels}"
                if len(buffer) < c.min_labels
                else "no training programs after the split",
            )
        model = self.evaluator.model
        if self.optimizer is None:
            self.optimizer = self._new_optimizer()
        losses = []
        model.train()
        try:
            for _ in range(c.steps):
                chunk = self.rng.sample(train, min(c.batch_size, len(train)))
                loss = self._loss(chunk)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()
                losses.append(float(loss.detach()))
        finally:
            model.eval()
        after = self.agreement(holdout)
        return RefreshReport(step, len(train), len(holdout), *before, *after, losses)

    def state_dict(self) -> dict[str, Any]:
        """What later refreshes depend on: the batch sampler's state and, once a refresh has trained,
        the evaluator's weights and their optimizer (the refreshed evaluator scores later steps)."""
        trained = self.optimizer is not None
        return {
            "rng": rng_state(self.rng),
            "model": self.evaluator.model.state_dict() if trained else None,
            "optimizer": self.optimizer.state_dict() if trained else None,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        set_rng_state(self.rng, state["rng"])
        if state.get("model") is not None:
            self.evaluator.model.load_state_dict(state["model"])
            self.optimizer = self._new_optimizer()
            self.optimizer.load_state_dict(state["optimizer"])

    def _new_optimizer(self) -> torch.optim.Optimizer:
        """The refreshes' optimizer; a restored one must be built the same way to take the saved state."""
        model = self.evaluator.model
        return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=self.config.lr)

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.evaluator.model.save_pretrained(folder)
        self.evaluator.tokenizer.save_pretrained(folder)
        spec = self.evaluator.spec
        spec.threshold_source = f"{spec.threshold_source}; refreshed on Lean labels collected during RL"
        spec.write(folder)
