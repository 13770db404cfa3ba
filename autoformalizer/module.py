"""Stage 1, syntax-alignment SFT: the NF4 unfused-MoE policy with QLoRA/QDoRA adapters learns to
answer the fixed system prompt + informal statement with a Lean theorem statement ending in
``:= by sorry``. Loss on the completion only (prompt labels -100, :mod:`autoformalizer.data`).

The loss is the Hugging Face causal-LM loss (mean over the trained tokens), computed with the
vocabulary projected only at the positions that carry a label: the 151,936-row output layer would
otherwise spend most of a tiny model's step on the prompt positions' logits, which carry no loss.
``tests/autoformalizer/test_autoformalizer_sft.py`` checks it equals ``model(**batch).loss``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import torch

from autoformalizer.config import PolicyConfig
from leanloop.training.module import set_torch_threads
from leanloop.training.optim import OptimConfig, configure_optimizers


def completion_loss(model: Any, batch: dict) -> torch.Tensor:
    """Mean next-token loss over the labelled positions of a packed batch (``input_ids``, ``labels``,
    ``position_ids``; no attention mask: the packed rows' segments come from the position ids)."""
    causal = model.get_base_model() if hasattr(model, "get_base_model") else model
    hidden = causal.base_model(
        input_ids=batch["input_ids"],
        position_ids=batch.get("position_ids"),
        attention_mask=batch.get("attention_mask"),
        use_cache=False,
    ).last_hidden_state
    targets = batch["labels"][:, 1:]  # position t predicts token t + 1 (HF's shift)
    mask = targets != -100
    if not bool(mask.any()):
        raise ValueError("a batch without any trained token (every label is -100)")
    logits = causal.get_output_embeddings()(hidden[:, :-1][mask])
    return torch.nn.functional.cross_entropy(logits.float(), targets[mask])


class PolicyRunHooks:
    """run_stage hooks of both autoformalizer stages (SFT and GRPO): the policy (``self.model``,
    ``self.tokenizer``, ``self.policy_config``) is exported, identified and traced to its base run
    the same way."""

    export_info: dict[str, Any]

    def export(self, final_dir: Path) -> None:
        from autoformalizer.policy import export_policy

        self.export_info = export_policy(self.model, self.tokenizer, self.policy_config, final_dir)

    def manifest_model(self) -> dict[str, Any]:
        from autoformalizer.policy import policy_identity

        return {**policy_identity(self.model, self.tokenizer, self.policy_config), "export": self.export_info}

    def manifest_inputs(self) -> dict[str, Path]:
        from autoformalizer.policy import policy_spec

        run = policy_spec(self.policy_config).run_dir()
        return {"base_model": run} if run is not None else {}

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """A step checkpoint holds what training changes (adapters, unfrozen weights): the frozen base,
        NF4 included, is rebuilt from the config on resume (bitsandbytes' quantization state does not
        load back into a built model, and a 30B base would be copied into every checkpoint)."""
        trainable = {name for name, p in self.named_parameters() if p.requires_grad}  # type: ignore[attr-defined]
        checkpoint["state_dict"] = {k: v for k, v in checkpoint["state_dict"].items() if k in trainable}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        trainable = {name for name, p in self.named_parameters() if p.requires_grad}  # type: ignore[attr-defined]
        missing = sorted(trainable - set(checkpoint["state_dict"]))
        if missing:
            raise ValueError(
                f"the checkpoint lacks {len(missing)} trained weights of this policy (e.g. {missing[0]}): "
                "it is from another config; pass --restart true to start over"
            )
        self.strict_loading = False  # the frozen base is not in it


class AutoformalizerSFTModule(PolicyRunHooks, L.LightningModule):
    def __init__(
        self, policy: PolicyConfig | None = None, optim: OptimConfig | None = None, threads: int | None = None
    ) -> None:
        """``policy``: the base (``qwen3-moe-tiny``, a checkpoint such as Qwen/Qwen3-Coder-30B-A3B-Instruct,
        or a run), its quantization (NF4 + double quantization) and adapters (QLoRA, or QDoRA with
        ``adapters.use_dora``); only the adapters train. ``threads``: torch intra-op threads (1 suits
        the tiny model on a busy CPU); None keeps torch's default."""
        super().__init__()
        set_torch_threads(threads)
        from autoformalizer.policy import build_policy

        self.policy_config = policy or PolicyConfig()
        self.optim = optim or OptimConfig()
        self.save_hyperparameters()
        self.model, self.tokenizer = build_policy(self.policy_config)
        self.model.train()
        self.export_info: dict[str, Any] = {}

    def _step(self, batch: dict, split: str) -> torch.Tensor:
        loss = completion_loss(self.model, batch)
        trained = int((batch["labels"][:, 1:] != -100).sum())
        self.log(f"{split}/loss", loss, prog_bar=True, batch_size=trained, sync_dist=split != "train")
        return loss

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._step(batch, "val")

    def configure_optimizers(self):
        return configure_optimizers(self, self.optim)  # the adapters: the NF4 base is frozen
