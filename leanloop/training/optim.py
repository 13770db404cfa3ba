"""Optimizer and learning-rate schedule shared by every training stage (AdamW + warmup + decay)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch


@dataclass
class OptimConfig:
    lr: float = 5e-6
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    schedule: Literal["cosine", "linear", "constant"] = "cosine"
    """Decay after warmup; the length is the trainer's estimated optimizer steps."""
    warmup_ratio: float = 0.03
    """Fraction of optimizer steps spent warming up linearly from 0."""
    warmup_steps: int | None = None
    """Absolute warmup steps; overrides ``warmup_ratio`` when set."""


def configure_optimizers(module: Any, config: OptimConfig) -> dict[str, Any]:
    """AdamW over ``module``'s trainable parameters, no decay on biases and norms (1-D tensors),
    with a per-step schedule from transformers (``get_scheduler``)."""
    from transformers import get_scheduler

    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        raise ValueError(f"{type(module).__name__} has no trainable parameters")
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(
        [g for g in groups if g["params"]], lr=config.lr, betas=tuple(config.betas), eps=config.eps
    )
    total = max(1, int(module.trainer.estimated_stepping_batches))
    warmup = config.warmup_steps if config.warmup_steps is not None else round(config.warmup_ratio * total)
    name = {"cosine": "cosine", "linear": "linear", "constant": "constant_with_warmup"}[config.schedule]
    scheduler = get_scheduler(name, optimizer, num_warmup_steps=warmup, num_training_steps=total)
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
