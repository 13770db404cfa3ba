"""Continued pretraining: next-token loss on packed rows (Qwen3) or masked-token loss (encoders)."""

from __future__ import annotations

import math
from typing import Literal

import torch

from leanloop.training.models import ModelSpec
from leanloop.training.module import HFModule
from leanloop.training.optim import OptimConfig


class PretrainModule(HFModule):
    def __init__(
        self,
        base: ModelSpec | None = None,
        objective: Literal["clm", "mlm"] = "clm",
        optim: OptimConfig | None = None,
        gradient_checkpointing: bool = False,
    ) -> None:
        """``objective``: ``clm`` (causal LM, e.g. Qwen3) or ``mlm`` (masked LM, e.g. ModernBERT,
        MiniLM); ``gradient_checkpointing`` trades compute for memory on long packs."""
        from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

        self.auto_class = AutoModelForCausalLM if objective == "clm" else AutoModelForMaskedLM
        super().__init__(base or ModelSpec("qwen3-tiny"), optim)
        self.objective = objective
        if gradient_checkpointing:
            self.model.gradient_checkpointing_enable()
        self.save_hyperparameters()

    def _step(self, batch: dict, split: str) -> torch.Tensor:
        out = self.model(**batch)
        trained = int((batch["labels"] != -100).sum())
        self.log(f"{split}/loss", out.loss, prog_bar=True, batch_size=max(trained, 1), sync_dist=split != "train")
        self.log(f"{split}/tokens", float(trained), reduce_fx="sum", batch_size=1, on_step=False, on_epoch=True)
        return out.loss

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._step(batch, "val")

    def write_run_report(self, run_dir, metrics: dict, counts: dict) -> None:
        """run_stage's hook: report.md with the loss curves (pretraining has no evaluation of its own)."""
        from leanloop.training.report import write_loss_report

        write_loss_report(run_dir, f"pretrain ({self.objective}): {run_dir.name}", metrics, counts)

    def on_validation_epoch_end(self) -> None:
        loss = self.trainer.callback_metrics.get("val/loss")
        if loss is not None:
            self.log("val/perplexity", math.exp(min(float(loss), 50.0)))
