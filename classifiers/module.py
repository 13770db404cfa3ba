"""The two verdict classifiers as LightningModules ("Learning Lean Feedback", Section 4.1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import torch
import torch.nn.functional as F

from classifiers.config import EvaluationConfig, InputConfig, OneTokenFormat
from classifiers.evaluator import ClassifierSpec
from classifiers.model_io import (
    EncoderInputs,
    OneTokenInputs,
    encoder_logits,
    encoder_scores,
    onetoken_logits,
    onetoken_loss,
    onetoken_scores,
    prepare_pooling,
)
from leanloop.corpus import EVAL_SPLITS, VALID
from leanloop.training.models import ModelSpec
from leanloop.training.module import HFModule
from leanloop.training.optim import OptimConfig

LOGGED_TEST_METRICS = ("auroc", "accuracy", "f1", "macro_f1", "mcc", "tpr", "fpr")


class ClassifierModule(HFModule):
    """What both classifiers share: batches, collection of scores, threshold, export."""

    kind: ClassVar[str] = ""

    def __init__(
        self,
        base: ModelSpec,
        optim: OptimConfig | None = None,
        inputs: InputConfig | None = None,
        evaluation: EvaluationConfig | None = None,
        gradient_checkpointing: bool = False,
        class_weight: Literal["balanced"] | None = None,
    ) -> None:
        super().__init__(base, optim)  # HFModule puts the model in train mode (dropout on)
        if gradient_checkpointing:
            self.model.gradient_checkpointing_enable()
        self.input_config = inputs or InputConfig()
        self.evaluation = evaluation or EvaluationConfig()
        self.class_weight = class_weight
        self._class_weights: torch.Tensor | None = None  # per class (invalid, valid), set at fit start
        self.threshold = 0.5
        self.threshold_source = "default 0.5 (no validation scores yet)"
        self.scored: dict[str, dict[int, float]] = {}  # split -> corpus row index -> score
        self._collected: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {}

    # -- per-classifier pieces --------------------------------------------------------------
    format: EncoderInputs | OneTokenInputs

    def logits(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def scores(self, logits: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def spec(self) -> ClassifierSpec:
        raise NotImplementedError

    # -- data hooks used by classifiers.data ----------------------------------------------------
    def encode(self, program: str) -> list[int]:
        return self.format.encode(program)

    def collate(self, items: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch = self.format.collate([item["input_ids"] for item in items])
        return self._with_labels(batch, items)

    def train_collate(self, items: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """Training batches: as ``collate``, or one packed row (``inputs.pack_tokens``, one-token)."""
        if self.input_config.pack_tokens:
            return self._with_labels(self.format.collate_packed([item["input_ids"] for item in items]), items)
        return self.collate(items)

    @staticmethod
    def _with_labels(batch: dict[str, torch.Tensor], items: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch["labels"] = torch.tensor([int(item["label"]) for item in items], dtype=torch.long)
        batch["index"] = torch.tensor([item["index"] for item in items], dtype=torch.long)
        return batch

    # -- loops ------------------------------------------------------------------------------
    def on_fit_start(self) -> None:
        """``class_weight: balanced``: each class weighs n / (2 n_class) in the training loss (sklearn's
        rule), from the training split's labels, so the minority class (a quarter of this corpus's
        programs are valid) counts as much as the majority."""
        super().on_fit_start()
        if self.class_weight is None:
            return
        labels = torch.tensor(self.trainer.datamodule.corpus.splits["train"].labels, dtype=torch.long)
        counts = torch.bincount(labels, minlength=2).float()
        if (counts == 0).any():
            raise ValueError("class_weight: balanced needs valid and invalid training programs")
        self._class_weights = (len(labels) / (2 * counts)).to(self.device)

    def weighted(self, losses: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Mean of per-program losses, weighted by class when ``class_weight`` is set (normalised by the
        batch's total weight, as ``F.cross_entropy(weight=...)`` does)."""
        if self._class_weights is None or not self.training:
            return losses.mean()
        weights = self._class_weights.to(losses.device)[labels]
        return (losses * weights).sum() / weights.sum()

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.loss(self.logits(batch), batch["labels"])
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch["labels"]))
        return loss

    def _collect(self, split: str, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        logits = self.logits(batch)
        self._collected.setdefault(split, []).append((batch["index"].detach(), self.scores(logits).detach()))
        return self.loss(logits, batch["labels"])

    def _gathered(self, split: str) -> dict[int, float]:
        """Scores of one split by corpus row index, from every rank (duplicates from a distributed
        sampler's padding collapse onto their index)."""
        parts = self._collected.pop(split, [])
        if not parts:
            return {}
        index = torch.cat([p[0] for p in parts])
        scores = torch.cat([p[1] for p in parts]).float()
        if self.trainer is not None and self.trainer.world_size > 1:
            index, scores = self.all_gather(index).reshape(-1), self.all_gather(scores).reshape(-1)
        return dict(zip(index.tolist(), scores.tolist()))

    def _labels(self, split: str, rows: dict[int, float]) -> tuple[np.ndarray, np.ndarray]:
        labels = self.trainer.datamodule.corpus.splits[split].labels
        order = sorted(rows)
        return np.asarray([labels[i] for i in order], dtype=int), np.asarray([rows[i] for i in order])

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        loss = self._collect(VALID, batch)
        self.log("val/loss", loss, prog_bar=True, batch_size=len(batch["labels"]))

    def on_validation_epoch_end(self) -> None:
        from leanloop.metrics import auroc

        rows = self._gathered(VALID)
        if rows:
            labels, scores = self._labels(VALID, rows)
            self.log("val/auroc", auroc(labels, scores), prog_bar=True)

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        self._collect(EVAL_SPLITS[dataloader_idx], batch)

    def on_test_epoch_end(self) -> None:
        """Threshold on validation, metrics on test at that threshold (logged -> manifest)."""
        from leanloop.metrics import auroc, select_threshold, verdict_metrics

        self.scored = {split: self._gathered(split) for split in EVAL_SPLITS}
        if self.scored[VALID]:
            labels, scores = self._labels(VALID, self.scored[VALID])
            c = self.evaluation
            choice = select_threshold(labels, scores, c.threshold_criterion, c.threshold_target)
            self.threshold = choice.threshold
            target = "" if c.threshold_target is None else f" {c.threshold_target}"
            self.threshold_source = (
                f"validation split, criterion {c.threshold_criterion}{target}, {choice.candidates} "
                f"({len(labels)} programs; validation MCC {choice.mcc:.3f})"
            )
            self.log("val/auroc", auroc(labels, scores))
            self.log("threshold", self.threshold)
        if self.scored["test"]:
            labels, scores = self._labels("test", self.scored["test"])
            metrics = verdict_metrics(labels, scores, threshold=self.threshold)
            self.log_dict({f"test/{name}": float(metrics[name]) for name in LOGGED_TEST_METRICS})

    # -- artifacts ---------------------------------------------------------------------------
    def export(self, final_dir: Path) -> None:
        super().export(final_dir)
        if not self.writes_files:
            return
        spec = self.spec()
        spec.threshold, spec.threshold_source = self.threshold, self.threshold_source
        spec.write(final_dir)
        self.export_stacker(final_dir)

    def export_stacker(self, final_dir: Path) -> None:
        """``history_stacker.json`` beside the weights (classifiers.history): fitted on the validation
        scores, so the run's history-aware evaluator is reproducible. Skipped, with a line, when the
        validation split cannot fit one (no scores, one class only)."""
        from classifiers.evidence import History
        from classifiers.history import fit_split_stacker

        corpus = getattr(getattr(self._trainer, "datamodule", None), "corpus", None)
        scored = self.scored.get(VALID)
        if corpus is None or not scored:
            return
        train, valid = corpus.splits["train"], corpus.splits[VALID]
        order = sorted(scored)
        try:
            history = History.from_columns(train.names, train.labels, train.programs)
            stacker = fit_split_stacker(
                [valid.programs[i] for i in order],
                [valid.names[i] for i in order],
                [valid.labels[i] for i in order],
                [scored[i] for i in order],
                history,
            )
        except ValueError as error:
            print(f"[classifiers] no history stacker saved: {error}")
            return
        stacker.save(final_dir)

    def manifest_counts(self) -> dict[str, Any]:
        return {"scored": {split: len(rows) for split, rows in self.scored.items()}}


class EncoderClassifier(ClassifierModule):
    """Sequence classifier over ``[CLS] head+tail [SEP]``; class 1 = valid."""

    kind = "encoder"

    def __init__(
        self,
        base: ModelSpec | None = None,
        optim: OptimConfig | None = None,
        inputs: InputConfig | None = None,
        evaluation: EvaluationConfig | None = None,
        freeze_embeddings: bool = False,
        freeze_layers: int = 0,
        pooling: Literal["cls", "mean"] = "cls",
        gradient_checkpointing: bool = False,
        class_weight: Literal["balanced"] | None = None,
    ) -> None:
        """``freeze_embeddings``: keep the (pretrained) token embeddings fixed: with ~1.5k training
        programs, updating 30k x 384 embedding rows mostly overfits, and skipping them makes CPU
        steps cheaper. ``freeze_layers``: also keep the lowest N transformer layers fixed (no
        gradients through them) while the top layers and the head adapt. A shallower encoder is
        ``base.overrides: {num_hidden_layers: N}`` (the checkpoint's lowest N layers).
        ``pooling``: ``cls`` (the model's own head) or ``mean`` (masked mean of the last hidden
        states, how the shipped sentence-transformers MiniLM was trained; recorded in
        classifier.json so scoring pools the same way)."""
        from transformers import AutoModelForSequenceClassification

        self.auto_class = AutoModelForSequenceClassification
        base = base or ModelSpec("minilm")
        super().__init__(base, optim, inputs, evaluation, gradient_checkpointing, class_weight)
        if self.input_config.pack_tokens:
            raise ValueError(
                "inputs.pack_tokens packs one-token training rows; the encoder classifies one program "
                "per row (set it to null)"
            )
        config = self.model.config
        if config.num_labels != 2:
            raise ValueError(f"the encoder needs a 2-class head, the model config has num_labels={config.num_labels}")
        config.id2label, config.label2id = {0: "invalid", 1: "valid"}, {"invalid": 0, "valid": 1}
        positions = getattr(config, "max_position_embeddings", None)
        if positions is not None and self.input_config.max_length > positions:
            raise ValueError(
                f"inputs.max_length={self.input_config.max_length} exceeds the encoder's "
                f"{positions} positions ({base.name}); lower inputs.max_length"
            )
        self.format = EncoderInputs(
            self.tokenizer,
            self.input_config.max_length,
            self.input_config.head_fraction,
            pooling,
            self.input_config.program_tokens,
            self.input_config.preamble,
        )
        prepare_pooling(self.model, pooling)
        pooler = getattr(self.model.base_model, "pooler", None)
        if pooling == "mean" and pooler is not None:
            # BERT's [CLS] pooler is bypassed: no gradients, nothing for DDP to wait on
            pooler.requires_grad_(False)
        self.freeze_layers = freeze_layers
        if freeze_embeddings or freeze_layers:
            freeze_bottom(self.model, freeze_layers)

    def logits(self, batch):
        return encoder_logits(self.model, batch, self.format.pooling)

    def loss(self, logits, labels):
        return self.weighted(F.cross_entropy(logits.float(), labels, reduction="none"), labels)

    def scores(self, logits):
        return encoder_scores(logits)

    def spec(self) -> ClassifierSpec:
        return ClassifierSpec(
            kind="encoder",
            max_length=self.input_config.max_length,
            head_fraction=self.input_config.head_fraction,
            pooling=self.format.pooling,
            program_tokens=self.input_config.program_tokens,
            preamble=self.input_config.preamble,
        )


class OneTokenClassifier(ClassifierModule):
    """Causal LM that emits one verdict token after ``program + suffix``."""

    kind = "onetoken"

    def __init__(
        self,
        base: ModelSpec | None = None,
        optim: OptimConfig | None = None,
        inputs: InputConfig | None = None,
        evaluation: EvaluationConfig | None = None,
        prompt: OneTokenFormat | None = None,
        gradient_checkpointing: bool = False,
        class_weight: Literal["balanced"] | None = None,
    ) -> None:
        from transformers import AutoModelForCausalLM

        self.auto_class = AutoModelForCausalLM
        super().__init__(
            base or ModelSpec("qwen3-tiny"), optim, inputs, evaluation, gradient_checkpointing, class_weight
        )
        self.prompt = prompt or OneTokenFormat()
        self.format = OneTokenInputs(
            self.tokenizer,
            self.input_config.max_length,
            self.input_config.head_fraction,
            self.prompt.suffix,
            self.prompt.true_token,
            self.prompt.false_token,
            self.input_config.program_tokens,
            self.input_config.preamble,
        )
        self._targets = torch.tensor([self.format.false_id, self.format.true_id])

    def logits(self, batch):
        return onetoken_logits(self.model, batch)

    def loss(self, logits, labels):
        return self.weighted(onetoken_loss(logits, self._targets.to(labels.device)[labels], reduction="none"), labels)

    def scores(self, logits):
        return onetoken_scores(logits, self.format.true_id, self.format.false_id)

    def spec(self) -> ClassifierSpec:
        return ClassifierSpec(
            kind="onetoken",
            max_length=self.input_config.max_length,
            head_fraction=self.input_config.head_fraction,
            suffix=self.prompt.suffix,
            true_token=self.prompt.true_token,
            false_token=self.prompt.false_token,
            program_tokens=self.input_config.program_tokens,
            preamble=self.input_config.preamble,
        )


def freeze_bottom(model: Any, n_layers: int) -> None:
    """No gradients for the embeddings and the lowest ``n_layers`` layers (0: embeddings only) of a
    BERT-like encoder (BERT/MiniLM ``encoder.layer``, ModernBERT ``layers``)."""
    base = model.base_model
    layers = getattr(getattr(base, "encoder", None), "layer", None) or getattr(base, "layers", None)
    if layers is None:
        raise ValueError(f"freeze_layers: cannot find the layer list of {type(model).__name__}")
    if n_layers > len(layers):
        raise ValueError(f"freeze_layers={n_layers} but the encoder has only {len(layers)} layers")
    embeddings = getattr(base, "embeddings", None) or model.get_input_embeddings()
    for module in [embeddings, *layers[:n_layers]]:
        for parameter in module.parameters():
            parameter.requires_grad_(False)
