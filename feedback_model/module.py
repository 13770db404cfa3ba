"""Feedback-trace SFT: next-token loss on the annotated-program tokens of packed (program, trace) rows.

The loss is the mean cross-entropy over the trace tokens, exactly what ``model(**batch).loss`` gives
for the packed batch, but the output projection runs only at the positions that carry a loss: with
Qwen's 151,936-token vocabulary the projection is most of a small model's cost, and about half the
positions of a feedback pair are the prompt (the program), so this saves about half of it.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from feedback_model.config import FeedbackModelCard, TraceFormat
from leanloop.training.models import ModelSpec
from leanloop.training.module import HFModule
from leanloop.training.optim import OptimConfig
from leanloop.training.packing import IGNORE


def completion_loss(model: Any, batch: dict[str, Any]) -> torch.Tensor:
    """Mean next-token cross-entropy over the positions whose label is not -100 (HF's causal-LM
    loss), projecting only those positions onto the vocabulary. Models whose head is more than a
    linear projection (logit soft-capping or scaling) take the plain path."""
    config = model.config
    if getattr(config, "final_logit_softcapping", None) or getattr(config, "logit_scale", None):
        return model(**batch).loss
    labels = batch["labels"]
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    hidden = model.base_model(**inputs).last_hidden_state
    targets = labels[:, 1:]
    trained = targets != IGNORE
    logits = model.get_output_embeddings()(hidden[:, :-1][trained])
    return F.cross_entropy(logits.float(), targets[trained])


class FeedbackSFTModule(HFModule):
    def __init__(
        self,
        base: ModelSpec | None = None,
        optim: OptimConfig | None = None,
        format: TraceFormat | None = None,
        gradient_checkpointing: bool = False,
    ) -> None:
        """``base``: the model to fine-tune (paper: Qwen3-4B after continued pretraining; embedded
        default: the pretrain stage's run, named explicitly). ``format`` (linked to ``data.format``)
        is saved in ``final/feedback.json`` so the evaluators prompt the model as it was trained."""
        super().__init__(base or ModelSpec("qwen3-tiny"), optim)
        self.format = format or TraceFormat()
        self.model.train()  # from_pretrained returns eval mode, and Lightning keeps modes as it finds them
        if gradient_checkpointing:
            self.model.gradient_checkpointing_enable()
        self.save_hyperparameters()

    def _step(self, batch: dict, split: str) -> torch.Tensor:
        loss = completion_loss(self.model, batch)
        trained = int((batch["labels"][:, 1:] != IGNORE).sum())
        self.log(f"{split}/loss", loss, prog_bar=True, batch_size=max(trained, 1), sync_dist=split != "train")
        self.log(f"{split}/trace_tokens", float(trained), reduce_fx="sum", batch_size=1, on_step=False, on_epoch=True)
        return loss

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._step(batch, "val")

    # -- hooks called by run_stage --------------------------------------------------------------
    def export(self, final_dir: Path) -> None:
        super().export(final_dir)
        if not self.writes_files:
            return
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        max_length = int(getattr(datamodule, "max_length", 0) or self.model.config.max_position_embeddings)
        FeedbackModelCard(self.format, max_length, self.base.base_name()).write(final_dir)

    def manifest_model(self) -> dict[str, Any]:
        return {**super().manifest_model(), "format": asdict(self.format)}
