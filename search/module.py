"""The actor-critic LightningModule: next-token loss on the value token and the tactic of each tree
edge (the prompt is masked), and the critic's bucket accuracy on validation."""

from __future__ import annotations

import torch

from leanloop.training.models import ModelSpec
from leanloop.training.module import HFModule, set_torch_threads
from leanloop.training.optim import OptimConfig
from search.model import value_token_ids


class SearchModule(HFModule):
    def __init__(
        self,
        base: ModelSpec | None = None,
        optim: OptimConfig | None = None,
        threads: int | None = None,
        gradient_checkpointing: bool = False,
    ) -> None:
        """``base``: the model to start from (the pretrain stage's run, ``artifacts://pretrain/default``,
        or a preset); ``threads``: torch intra-op threads (None: torch's default);
        ``gradient_checkpointing``: recompute each layer in backward (long rows, large batches)."""
        set_torch_threads(threads)
        super().__init__(base or ModelSpec("qwen3-tiny"), optim)
        if gradient_checkpointing:
            self.model.gradient_checkpointing_enable()
        self.value_ids = torch.tensor(value_token_ids(self.tokenizer))
        self.save_hyperparameters()

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        out = self.model(**batch)
        self.log("train/loss", out.loss, prog_bar=True, batch_size=batch["input_ids"].shape[0])
        return out.loss

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        out = self.model(**batch)
        labels = batch["labels"]
        self.log("val/loss", out.loss, prog_bar=True, sync_dist=True, batch_size=labels.shape[0])
        # value positions: a value token right after the masked prompt
        values = self.value_ids.to(labels.device)
        is_value = torch.isin(labels[:, 1:], values) & (labels[:, :-1] == -100)
        if is_value.any():
            logits = out.logits[:, :-1][is_value][:, values]
            target = (labels[:, 1:][is_value].unsqueeze(-1) == values).float().argmax(-1)
            accuracy = (logits.argmax(-1) == target).float().mean()
            self.log("val/value_accuracy", accuracy, sync_dist=True, batch_size=int(is_value.sum()))
