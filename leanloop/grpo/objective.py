"""The GRPO objective, term for term as TRL 1.16's ``GRPOTrainer`` computes it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch

LossType = Literal["grpo", "bnpo", "dr_grpo", "dapo"]
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")
ISMode = Literal["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"]
IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


@dataclass
class GRPOConfig:
    """The GRPO update. Field names and defaults follow ``trl.GRPOConfig`` where both have them."""

    num_generations: int = 8
    """G: rollouts per prompt (the group whose rewards are normalised together)."""
    loss_type: LossType = "dapo"
    """How per-token losses are averaged: grpo / bnpo / dr_grpo / dapo (TRL's meanings; dapo is
    TRL's default: token-level mean over the whole generation batch, no length bias)."""
    beta: float = 0.0
    """KL coefficient to the reference policy. 0 (TRL's default): no reference model is loaded."""
    epsilon: float = 0.2
    """Lower clipping range of the ratio."""
    epsilon_high: float | None = None
    """Upper clipping range (None: same as epsilon; DAPO recommends 0.28)."""
    delta: float | None = None
    """Two-sided clipping: cap on the unclipped ratio (INTELLECT-2); None disables it."""
    importance_sampling_level: Literal["token", "sequence"] = "token"
    scale_rewards: Literal["group", "batch", "none"] = "group"
    num_iterations: int = 1
    """mu: optimizer steps on each generated batch (ratios differ from 1 only when mu > 1)."""
    use_bias_correction_kl: bool = True
    """Multiply the KL term by the ratio (unbiased reverse-KL gradient), TRL's default."""
    mask_truncated_completions: bool = False
    """Leave completions that hit max_new_tokens out of the loss (DAPO)."""
    micro_batch_size: int = 8
    """Rollouts per forward/backward; an optimizer step accumulates the micro-batches of the batch."""
    max_grad_norm: float | None = 1.0
    """Gradient clipping (manual optimization: set here, not trainer.gradient_clip_val)."""
    vllm_importance_sampling_correction: bool = True
    """With vLLM rollouts: weight each token's policy loss by the ratio of the trainer's probability
    to the sampler's (vLLM's kernels differ from the trainer's, so its samples are slightly off-policy).
    Applies only when the rollouts carry the sampler's log-probabilities (never with transformers)."""
    vllm_importance_sampling_mode: ISMode = "token_truncate"
    """TRL's four modes. token_truncate is truncated importance sampling (TIS: per-token ratio capped
    at clip_max), the correction the issue asks for; TRL 1.16 defaults to sequence_mask."""
    vllm_importance_sampling_clip_max: float | None = 3.0
    vllm_importance_sampling_clip_min: float | None = None

    def __post_init__(self) -> None:
        if self.num_generations < 2:
            raise ValueError(
                f"num_generations must be >= 2 (a group of one has no baseline), got {self.num_generations}"
            )
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type {self.loss_type!r} is not one of {LOSS_TYPES}")
        if self.beta < 0 or self.epsilon < 0:
            raise ValueError("beta and epsilon must be >= 0")
        if self.num_iterations < 1 or self.micro_batch_size < 1:
            raise ValueError("num_iterations and micro_batch_size must be >= 1")
        if self.vllm_importance_sampling_mode not in IS_MODES:
            raise ValueError(
                f"vllm_importance_sampling_mode {self.vllm_importance_sampling_mode!r} is not one of {IS_MODES}"
            )

    @property
    def epsilon_low(self) -> float:
        return self.epsilon

    @property
    def eps_high(self) -> float:
        return self.epsilon if self.epsilon_high is None else self.epsilon_high


def nanstd(tensor: torch.Tensor, dim: int | None = None, keepdim: bool = False) -> torch.Tensor:
    """Bessel-corrected std ignoring NaNs (TRL's ``trl.trainer.utils.nanstd``; used from there)."""
    from trl.trainer.utils import nanstd as trl_nanstd

    return trl_nanstd(tensor, dim=dim, keepdim=keepdim)


@dataclass
class Advantages:
    advantages: torch.Tensor  # [N]
    std: torch.Tensor  # [N] the std each advantage was divided by (before the 1e-4)
    zero_std_groups: float  # fraction of rollouts in groups whose rewards were all equal


def group_advantages(rewards: torch.Tensor, num_generations: int, scale_rewards: str = "group") -> Advantages:
    """Group-normalised advantages for rewards laid out group after group (NaN = unscored)."""
    rewards = rewards.float()
    if rewards.numel() % num_generations:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {num_generations}")
    grouped = rewards.view(-1, num_generations)
    mean = torch.nanmean(grouped, dim=1).repeat_interleave(num_generations)
    if scale_rewards in ("group", "none"):
        std = nanstd(grouped, dim=1).view(-1).repeat_interleave(num_generations)
    elif scale_rewards == "batch":
        std = nanstd(rewards).expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
    else:
        raise ValueError(f"scale_rewards must be group, batch or none, got {scale_rewards!r}")
    advantages = rewards - mean
    if scale_rewards != "none":
        advantages = advantages / (std + 1e-4)
    zero = torch.isclose(std, torch.zeros_like(std)).float().mean().item()
    return Advantages(torch.nan_to_num(advantages, nan=0.0), std, zero)


@dataclass
class TokenLoss:
    per_token_loss: torch.Tensor  # [B, T]
    ratio: torch.Tensor  # coef_1: [B, T] (token level) or [B, 1] (sequence level)
    per_token_kl: torch.Tensor | None


def per_token_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor | None,
    ref_logps: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: GRPOConfig,
    importance_weights: torch.Tensor | None = None,
) -> TokenLoss:
    """The clipped surrogate (+ beta * KL) per completion token (TRL ``_compute_loss``, loss types
    grpo / bnpo / dr_grpo / dapo). ``importance_weights`` ([B, T] or [B, 1], from
    :func:`sampling_correction`) multiply the surrogate, not the KL term, as TRL does."""
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    old_logps = logps.detach() if old_logps is None else old_logps
    log_ratio = logps - old_logps
    if config.importance_sampling_level == "token":
        log_weights = log_ratio
    else:
        log_weights = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)
    coef_1 = torch.exp(log_weights)
    per_token_kl = None
    if config.beta != 0.0:
        if ref_logps is None:
            raise ValueError("beta > 0 needs the reference policy's log-probabilities")
        per_token_kl = torch.exp(ref_logps - logps) - (ref_logps - logps) - 1
        if config.use_bias_correction_kl:
            per_token_kl = per_token_kl * coef_1
    coef_2 = torch.clamp(coef_1, 1 - config.epsilon_low, 1 + config.eps_high)
    capped = torch.clamp(coef_1, max=config.delta) if config.delta is not None else coef_1
    loss = -torch.min(capped * advantages, coef_2 * advantages)
    if importance_weights is not None:
        loss = loss * importance_weights
    if per_token_kl is not None:
        loss = loss + config.beta * per_token_kl
    return TokenLoss(loss, coef_1, per_token_kl)


@dataclass
class SamplingCorrection:
    weights: torch.Tensor  # [B, T] (token modes) or [B, 1] (sequence modes)
    stats: dict[str, float]


def sampling_correction(
    trainer_logps: torch.Tensor, sampler_logps: torch.Tensor, mask: torch.Tensor, config: GRPOConfig
) -> SamplingCorrection:
    """Importance weights ``p_trainer / p_sampler`` for rollouts another engine sampled, TRL 1.16's
    ``_generate_and_score_completions`` term for term: NaN sampler log-probabilities (tokens it did
    not score, replayed rows) count as ratio 1; ``*_truncate`` clamps to [clip_min, clip_max],
    ``*_mask`` zeroes ratios outside it. Stats: the ratio's min / mean / max over completion tokens
    and the absolute log-probability gap (TRL's ``sampling/sampling_logp_difference``), the number a
    trainer watches to see that the engine is on-policy."""
    m = mask.float()
    diff = torch.nan_to_num((trainer_logps - sampler_logps) * m, nan=0.0)
    sequence = config.vllm_importance_sampling_mode.startswith("sequence")
    ratio = torch.exp(diff.sum(-1, keepdim=True) if sequence else diff)
    low, high = config.vllm_importance_sampling_clip_min, config.vllm_importance_sampling_clip_max
    if config.vllm_importance_sampling_mode.endswith("truncate"):
        ratio = torch.clamp(ratio, min=low, max=high)
    else:
        outside = (ratio < (-math.inf if low is None else low)) | (ratio > (math.inf if high is None else high))
        ratio = ratio.masked_fill(outside, 0.0)
    flat = ratio.flatten() if sequence else ratio[mask.bool()]
    gap = (trainer_logps - sampler_logps).abs()[mask.bool() & ~torch.isnan(sampler_logps)]
    stats = {}
    if flat.numel():
        stats.update(
            {
                "sampling/importance_sampling_ratio/min": float(flat.min()),
                "sampling/importance_sampling_ratio/mean": float(flat.mean()),
                "sampling/importance_sampling_ratio/max": float(flat.max()),
            }
        )
    if gap.numel():
        stats.update(
            {
                "sampling/sampling_logp_difference/mean": float(gap.mean()),
                "sampling/sampling_logp_difference/max": float(gap.max()),
            }
        )
    return SamplingCorrection(ratio, stats)


def aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    config: GRPOConfig,
    *,
    micro_batches: int = 1,
    batch_tokens: torch.Tensor | float | None = None,
    max_completion_length: int | None = None,
) -> torch.Tensor:
    """This micro-batch's share of the step's loss (``micro_batches`` per optimizer step).

    ``batch_tokens``: completion tokens of the whole generation batch, over all ranks divided by
    the number of ranks (TRL's ``num_items_in_batch / num_processes``), for ``dapo``.
    ``max_completion_length``: the generation limit, for ``dr_grpo``."""
    masked = per_token * mask
    if config.loss_type == "grpo":
        return (masked.sum(-1) / mask.sum(-1).clamp(min=1.0)).mean() / micro_batches
    if config.loss_type == "bnpo":
        return masked.sum() / mask.sum().clamp(min=1.0) / micro_batches
    if config.loss_type == "dr_grpo":
        if max_completion_length is None:
            raise ValueError("dr_grpo normalises by max_completion_length; pass it")
        return masked.sum() / (per_token.size(0) * max_completion_length) / micro_batches
    if config.loss_type == "dapo":
        if batch_tokens is None:
            raise ValueError("dapo normalises by the generation batch's completion tokens; pass batch_tokens")
        total = torch.as_tensor(batch_tokens, dtype=per_token.dtype, device=per_token.device)
        # TRL: normalizer = num_items_in_batch / num_processes * grad_accum / steps_per_generation,
        # with grad_accum == steps_per_generation == the micro-batches of one step here
        return masked.sum() / total.clamp(min=1.0)
    raise ValueError(f"unknown loss_type {config.loss_type!r}")


def _head_scaling(config) -> tuple[float | None, float]:
    """(final_logit_softcapping, logit_scale) as TRL's fused head reads them; only unscaled heads are
    supported here (Qwen3, Llama, ...), anything else is refused rather than silently mis-scored."""
    text = config.get_text_config()
    for name in ("logit_scale", "output_multiplier", "lm_head_multiplier", "logits_scaling"):
        if getattr(text, name, None) not in (None, 1, 1.0):
            raise NotImplementedError(
                f"{text.model_type} scales its logits ({name}={getattr(text, name)}); "
                "leanloop.grpo.objective.completion_logps supports unscaled LM heads only"
            )
    return getattr(text, "final_logit_softcapping", None), 1.0


def completion_logps(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    temperature: float = 1.0,
    compute_entropy: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probabilities (and entropies) of the last ``logits_to_keep`` tokens at
    ``temperature``, zero where ``attention_mask`` is 0.

    TRL's GRPOTrainer computes these with its fused LM head (``add_fused_lm_head``): the backbone,
    then ``trl.kernels.ChunkedLogProbFunction`` (no [B, T, vocab] logits) on the positions whose
    next token is scored. This is the same computation, called directly on the completion
    positions only: TRL does that too on CUDA ("compact" mode), but on CPU it projects every
    position, prompt included, through the vocabulary, which is most of a CPU step here."""
    from trl.kernels import ChunkedLogProbFunction

    causal = model.get_base_model() if hasattr(model, "get_base_model") else model
    backbone = causal.base_model  # the transformer under the LM head (LoRA layers, if any, are inside)
    hidden = backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
    hidden = hidden[:, -logits_to_keep - 1 : -1]  # position t predicts token t + 1
    targets = input_ids[:, -logits_to_keep:]
    mask = attention_mask[:, -logits_to_keep:].bool()
    head = causal.get_output_embeddings()
    softcap, scale = _head_scaling(causal.config)
    outputs = ("log_probs", "entropy") if compute_entropy else ("log_probs",)
    logps, entropy, *_ = ChunkedLogProbFunction.apply(
        hidden[mask].to(head.weight.device),
        head.weight,
        head.bias,
        targets[mask].to(head.weight.device),
        temperature,
        CHUNK_SIZE,
        softcap,
        scale,
        outputs,
    )
    # masked_scatter keeps an all-masked micro-batch connected to the graph (a differentiable zero)
    logps = logps.new_zeros(mask.shape).masked_scatter(mask.to(logps.device), logps)
    if entropy is not None:
        entropy = entropy.new_zeros(mask.shape).masked_scatter(mask.to(entropy.device), entropy)
    return logps, entropy


CHUNK_SIZE = 32_768  # vocabulary columns per tile: TRL's _CHUNKED_LOGPROB_CHUNK_SIZE


def clip_stats(
    ratio: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, config: GRPOConfig
) -> dict[str, float]:
    """Fractions of tokens whose ratio was clipped (TRL's clip_ratio metrics)."""
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    low = ((ratio < 1 - config.epsilon_low) & (advantages < 0)).float()
    high = ((ratio > 1 + config.eps_high) & (advantages > 0)).float()

    def mean(x: torch.Tensor) -> float:
        if x.shape[1] == 1:
            return float(x.mean())
        return float((x * mask).sum() / mask.sum().clamp(min=1.0))

    return {
        "clip_ratio/low": mean(low),
        "clip_ratio/high": mean(high),
        "clip_ratio/region": mean(torch.maximum(low, high)),
    }
