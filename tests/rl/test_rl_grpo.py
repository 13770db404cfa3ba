"""Group-normalised advantages and the micro-batch split of the GRPO loss."""

from __future__ import annotations

import math

import pytest
import torch

from leanloop.grpo.objective import GRPOConfig, aggregate, group_advantages, per_token_loss


def test_group_advantages_normalise_within_each_group():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.2, 0.9, 0.5, 0.0, 0.0, 0.0])
    adv = group_advantages(rewards, 3).advantages.view(4, 3)
    groups = rewards.view(4, 3)
    for g in range(4):
        std = groups[g].std(unbiased=True)
        expected = (groups[g] - groups[g].mean()) / (std + 1e-4)
        assert torch.allclose(adv[g], expected, atol=1e-6)
    assert torch.allclose(adv.sum(dim=1), torch.zeros(4), atol=1e-5)
    # all-equal groups (all solved / none solved) carry no signal
    assert torch.equal(adv[3], torch.zeros(3))
    assert group_advantages(rewards, 3).zero_std_groups == pytest.approx(2 / 4)


def test_unscored_rollouts_are_left_out_of_the_baseline_with_zero_advantage():
    rewards = torch.tensor([1.0, math.nan, 0.0, 0.0])
    adv = group_advantages(rewards, 4).advantages
    kept = torch.tensor([1.0, 0.0, 0.0])
    expected = (kept - kept.mean()) / (kept.std(unbiased=True) + 1e-4)
    assert adv[1] == 0.0
    assert torch.allclose(adv[[0, 2, 3]], expected, atol=1e-6)


def test_batch_and_no_scaling():
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.5])
    batch = group_advantages(rewards, 2, "batch").advantages
    means = torch.tensor([0.5, 0.5, 0.5, 0.5])
    assert torch.allclose(batch, (rewards - means) / (rewards.std(unbiased=True) + 1e-4), atol=1e-6)
    assert torch.allclose(group_advantages(rewards, 2, "none").advantages, rewards - means)
    with pytest.raises(ValueError, match="groups of 3"):
        group_advantages(rewards, 3)


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo"])
def test_micro_batches_sum_to_the_full_batch_loss(loss_type):
    """Gradient accumulation: summing the micro-batch losses of a step gives the full-batch loss
    (grpo / dr_grpo / dapo exactly; bnpo by definition normalises per micro-batch, as TRL's does)."""
    g = torch.Generator().manual_seed(0)
    n, width = 8, 5
    config = GRPOConfig(num_generations=2, loss_type=loss_type, beta=0.04)
    logps = -torch.rand(n, width, generator=g)
    old = logps + 0.3 * torch.randn(n, width, generator=g)
    ref = logps + 0.2 * torch.randn(n, width, generator=g)
    adv = torch.randn(n, generator=g)
    mask = (torch.rand(n, width, generator=g) > 0.2).long()
    total_tokens = mask.sum()
    full = aggregate(
        per_token_loss(logps, old, ref, adv, mask, config).per_token_loss,
        mask,
        config,
        batch_tokens=total_tokens,
        max_completion_length=width,
    )
    parts = sum(
        aggregate(
            per_token_loss(logps[s], old[s], ref[s], adv[s], mask[s], config).per_token_loss,
            mask[s],
            config,
            micro_batches=2,
            batch_tokens=total_tokens,
            max_completion_length=width,
        )
        for s in (slice(0, 4), slice(4, 8))
    )
    if loss_type == "bnpo":
        per_half = [mask[s].sum() for s in (slice(0, 4), slice(4, 8))]
        assert per_half[0] != per_half[1]  # so the two normalisations really differ
        assert not torch.allclose(parts, full)
    else:
        assert torch.allclose(parts, full, atol=1e-6)


def test_config_rejects_groups_of_one_and_unknown_loss():
    with pytest.raises(ValueError, match="num_generations"):
        GRPOConfig(num_generations=1)
    with pytest.raises(ValueError, match="loss_type"):
        GRPOConfig(loss_type="ppo")  # type: ignore[arg-type]
