"""Optimizer and learning-rate schedule shared by every training stage (AdamW + warmup + decay).

torch's AdamW updates weights in their own dtype: on bf16 weights an update smaller than bf16's
resolution (1/256 of the weight) is rounded away, so at lr 1e-5 most weights never move. Trained
weights must therefore have an fp32 copy: fp32 weights under ``precision: bf16-mixed`` (autocast
computes in bf16), or a DeepSpeed strategy, whose ZeRO optimizer keeps fp32 master weights of a bf16
model. Anything else is refused (:func:`check_master_weights`), at config time and again on the
built model.
"""

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


LOW_PRECISION = ("bf16-true", "16-true")  # the precisions that cast the weights themselves ("bf16" is bf16-mixed)
NO_MASTER_WEIGHTS = (
    "trains {what} with torch AdamW, which keeps no fp32 copy: updates below bf16's "
    "resolution are lost (at lr 1e-5 most weights never move). Use precision bf16-mixed with "
    "the model in float32 (dtype: float32), or a DeepSpeed strategy "
    "(configs/strategy/zero2.yaml: fp32 master weights in its optimizer)"
)


def keeps_master_weights(strategy: Any) -> bool:
    """Whether ``strategy`` (a Lightning strategy, its name, or its ``class_path`` config) is
    DeepSpeed, whose optimizer keeps fp32 master copies of low-precision weights."""
    if strategy is None:
        return False
    name = (
        strategy
        if isinstance(strategy, str)
        else (
            getattr(strategy, "class_path", None)
            or (strategy.get("class_path") if isinstance(strategy, dict) else None)
            or type(strategy).__name__
        )
    )
    return "deepspeed" in str(name).lower()


def check_master_weights(precision: Any, strategy: Any) -> None:
    """Config time: a precision that casts the weights to 16 bits, without DeepSpeed, is refused."""
    if str(precision) in LOW_PRECISION and not keeps_master_weights(strategy):
        raise ValueError(f"precision {precision} " + NO_MASTER_WEIGHTS.format(what="16-bit weights"))


def configure_optimizers(module: Any, config: OptimConfig) -> dict[str, Any]:
    """AdamW over ``module``'s trainable parameters, no decay on biases and norms (1-D tensors),
    with a per-step schedule from transformers (``get_scheduler``)."""
    from transformers import get_scheduler

    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        raise ValueError(f"{type(module).__name__} has no trainable parameters")
    low = sum(p.numel() for p in params if p.dtype in (torch.bfloat16, torch.float16))
    if low and not keeps_master_weights(module.trainer.strategy):
        raise ValueError(
            f"{type(module).__name__} "
            + NO_MASTER_WEIGHTS.format(
                what=f"{low:,} of its {sum(p.numel() for p in params):,} trainable weights in 16 bits"
            )
        )
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
