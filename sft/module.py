"""Prover SFT: next-token loss on the proof tokens of packed (statement, proof) rows."""

from __future__ import annotations

from typing import Any

import torch

from leanloop.training.models import ModelSpec
from leanloop.training.module import HFModule
from leanloop.training.optim import OptimConfig
from leanloop.prover.prompt import PromptConfig


class ProverSFTModule(HFModule):
    def __init__(
        self,
        base: ModelSpec | None = None,
        optim: OptimConfig | None = None,
        prompt: PromptConfig | None = None,
        gradient_checkpointing: bool = False,
    ) -> None:
        """``base``: the model to fine-tune (paper: Qwen3-8B-Base by path or hub id; embedded
        default: the pretrain run). ``prompt`` is linked to ``data.prompt`` and recorded in the
        manifest, so sampling renders statements the way the prover was trained."""
        super().__init__(base or ModelSpec(name="qwen3-tiny"), optim)
        self.prompt = prompt or PromptConfig()
        # from_pretrained returns the model in eval mode and Lightning keeps each module's mode, so
        # dropout (where a checkpoint configures it) would silently stay off during training
        self.model.train()
        if gradient_checkpointing:
            self.model.gradient_checkpointing_enable()
        self.save_hyperparameters()

    def _step(self, batch: dict, split: str) -> torch.Tensor:
        out = self.model(**batch)
        trained = int((batch["labels"] != -100).sum())
        self.log(f"{split}/loss", out.loss, prog_bar=True, batch_size=max(trained, 1), sync_dist=split != "train")
        return out.loss

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._step(batch, "val")

    def manifest_model(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {**super().manifest_model(), "prompt": asdict(self.prompt)}
