"""The GRPO update of one step, shared by the RL stage, the autoformalizer's Stage 2 and the prm stage.

A manual-optimization LightningModule holds a :class:`GRPOUpdate` (the objective's
:class:`leanloop.grpo.objective.GRPOConfig`: G, beta, loss type, clipping, iterations, micro-batches;
the rollouts' temperature and ``max_new_tokens``; how the KL reference is reached) and calls
:meth:`GRPOUpdate.step` with itself (its optimizer, scheduler and backward), the policy, the reference
model (or None: the policy with its adapters switched off) and the step's scored rollouts.
Advantages, the per-token loss and its aggregation are :mod:`leanloop.grpo.objective` (TRL's
definitions, tested equal to TRL's loss); this class runs them over micro-batches.
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from typing import Any, Callable, Protocol

import torch

from leanloop.grpo.objective import (
    GRPOConfig,
    aggregate,
    clip_stats,
    completion_logps,
    group_advantages,
    per_token_loss,
    sampling_correction,
)
from leanloop.grpo.rollout import RolloutGenerationConfig, Rollouts


class ScoredRollout(Protocol):
    """What the update reads of a rollout's reward (the RL stage's ``RolloutReward``, the
    autoformalizer's gated reward): None = no reward, the rollout leaves its group's statistics."""

    reward: float | None


def finite_stats(stats: dict[str, Any]) -> dict[str, float]:
    """The numeric, finite entries of a step's statistics (what is logged and kept in the history)."""
    return {k: float(v) for k, v in stats.items() if isinstance(v, (int, float)) and math.isfinite(float(v))}


class GRPOUpdate:
    """``step(module, policy, reference, rollouts, rewards)``: one GRPO update of a manual-optimization
    LightningModule's policy (see the module docstring)."""

    def __init__(
        self,
        config: GRPOConfig,
        generation: RolloutGenerationConfig,
        reference_adapter: Callable[[], AbstractContextManager] | None = None,
    ) -> None:
        """``reference_adapter``: with no reference model, the context in which the policy is its own KL
        reference; default: its adapters switched off (a policy that continues trained adapters passes
        one that switches to a frozen copy of them instead)."""
        self.config = config
        self.generation = generation
        self.reference_adapter = reference_adapter

    def _completion_logps(self, model, input_ids, attention_mask, width, rows, *, entropy=False):
        return completion_logps(
            model, input_ids[rows], attention_mask[rows], width, self.generation.temperature, compute_entropy=entropy
        )

    def _policy_as_reference(self, policy) -> AbstractContextManager:
        return self.reference_adapter() if self.reference_adapter is not None else policy.disable_adapter()

    def step(
        self,
        module,
        policy: torch.nn.Module,
        reference: torch.nn.Module | None,
        rollouts: Rollouts,
        rewards: list[ScoredRollout],
    ) -> dict[str, float]:
        """One GRPO update of ``policy`` on a step's scored rollouts (``rewards[i].reward``: None = no
        reward, the rollout leaves its group's statistics) with ``module``'s optimizer, scheduler and
        backward; ``reference``: the KL reference model, None for the policy under ``reference_adapter``.
        Returns the step's training statistics."""
        g = self.config
        device = rollouts.completion_ids.device
        values = torch.tensor([math.nan if r.reward is None else r.reward for r in rewards], device=device)
        adv = group_advantages(values, g.num_generations, g.scale_rewards)
        advantages = adv.advantages
        mask = (rollouts.completion_mask if rollouts.loss_mask is None else rollouts.loss_mask).clone()
        if g.mask_truncated_completions:
            mask = mask * (~torch.tensor(rollouts.truncated, device=device)).long().unsqueeze(1)
        input_ids = torch.cat([rollouts.prompt_ids, rollouts.completion_ids], dim=1)
        attention = torch.cat([rollouts.prompt_mask, rollouts.completion_mask], dim=1)
        width = rollouts.completion_ids.size(1)
        n = len(rollouts)
        chunks = [slice(s, min(s + g.micro_batch_size, n)) for s in range(0, n, g.micro_batch_size)]
        batch_tokens = mask.sum().float()
        trainer = module.trainer
        if trainer.world_size > 1:
            batch_tokens = trainer.strategy.reduce(batch_tokens, reduce_op="sum") / trainer.world_size
        stats = {"train/advantage_abs": float(advantages.abs().mean()), "train/zero_std_groups": adv.zero_std_groups}
        # a micro-batch whose advantages are all 0 contributes exactly 0 loss and gradient when there is
        # no KL term: skip its forward and backward (the all-fail groups of a weak prover)
        live = [c for c in chunks if g.beta != 0.0 or bool(advantages[c].abs().sum() > 0)]
        stats["train/micro_batches_skipped"] = float(len(chunks) - len(live))
        old = ref = weights = None
        sampler = getattr(rollouts, "sampling_logps", None)
        correct = sampler is not None and g.vllm_importance_sampling_correction
        with torch.no_grad():
            if (g.num_iterations > 1 or sampler is not None) and live:
                old = torch.zeros_like(mask, dtype=torch.float)
                for c in live:
                    old[c] = self._completion_logps(policy, input_ids, attention, width, c)[0].float()
            if sampler is not None and live:
                rows = torch.cat([torch.arange(n, device=device)[c] for c in live])
                correction = sampling_correction(old[rows], sampler[rows].float(), mask[rows], g)
                stats.update(correction.stats)
                if correct:
                    weights = torch.ones((n, correction.weights.size(1)), device=device)
                    weights[rows] = correction.weights
            if sampler is not None and g.num_iterations == 1:
                old = None  # one iteration: the ratio to the (detached) policy itself, as before
            if g.beta != 0.0 and live:
                ref = torch.zeros_like(mask, dtype=torch.float)
                for c in live:
                    if reference is not None:
                        ref[c] = self._completion_logps(reference, input_ids, attention, width, c)[0].float()
                    else:
                        with self._policy_as_reference(policy):
                            ref[c] = self._completion_logps(policy, input_ids, attention, width, c)[0].float()
        opt = module.optimizers()
        scheduler = module.lr_schedulers()
        losses, kls, entropies, clips = [], [], [], []
        for _ in range(g.num_iterations):
            for c in live:
                logps, entropy = self._completion_logps(policy, input_ids, attention, width, c, entropy=True)
                token = per_token_loss(
                    logps,
                    None if old is None else old[c],
                    None if ref is None else ref[c],
                    advantages[c],
                    mask[c],
                    g,
                    None if weights is None else weights[c],
                )
                loss = aggregate(
                    token.per_token_loss,
                    mask[c],
                    g,
                    micro_batches=len(chunks),
                    batch_tokens=batch_tokens,
                    max_completion_length=self.generation.max_new_tokens,
                )
                module.manual_backward(loss)
                losses.append(float(loss.detach()))
                m = mask[c].float()
                if entropy is not None:
                    entropies.append(float((entropy.detach() * m).sum() / m.sum().clamp(min=1)))
                if token.per_token_kl is not None:
                    kls.append(float((token.per_token_kl.detach() * m).sum() / m.sum().clamp(min=1)))
                clips.append(clip_stats(token.ratio.detach(), advantages[c], mask[c], g))
            if g.max_grad_norm:
                module.clip_gradients(opt, gradient_clip_val=g.max_grad_norm, gradient_clip_algorithm="norm")
            opt.step()
            opt.zero_grad(set_to_none=True)
            if scheduler is not None:
                scheduler.step()
        stats["train/loss"] = sum(losses) if losses else 0.0
        if entropies:
            stats["train/entropy"] = sum(entropies) / len(entropies)
        if kls:
            stats["train/kl"] = sum(kls) / len(kls)
        for key in ("clip_ratio/low", "clip_ratio/high", "clip_ratio/region"):
            if clips:
                stats[f"train/{key}"] = sum(c[key] for c in clips) / len(clips)
        stats["train/lr"] = float(opt.param_groups[0]["lr"]) if hasattr(opt, "param_groups") else float("nan")
        return stats
