"""The GRPO objective equals TRL 1.16's on identical batches (no hand-written drift).

TRL's own ``GRPOTrainer._compute_loss`` is called on a constructed batch (prompt/completion ids and
masks, advantages, old and reference log-probabilities chosen so that the ratio is clipped on some
tokens and the KL term is non-zero) and compared with ``leanloop.grpo.objective``:
- per token: the gradient of the loss with respect to each completion token's log-probability
  (TRL's log-prob function is swapped for a leaf tensor, so both sides see the same values);
- end to end: the loss and every parameter gradient through the tiny model's real forward pass
  (TRL's fused LM head on TRL's side; ``leanloop.grpo.objective.completion_logps`` on ours).
"""

from __future__ import annotations

import copy

import pytest
import torch

from leanloop.grpo.objective import GRPOConfig, aggregate, completion_logps, per_token_loss

CASES = [
    dict(loss_type="grpo", beta=0.0),
    dict(loss_type="grpo", beta=0.04, importance_sampling_level="sequence"),
    dict(loss_type="bnpo", beta=0.04, epsilon_high=0.28),
    dict(loss_type="dr_grpo", beta=0.0, delta=1.3),
    dict(loss_type="dapo", beta=0.04),
    dict(loss_type="dapo", beta=0.1, use_bias_correction_kl=False, epsilon=0.1),
]
B, P, C, MAX_COMPLETION = 4, 5, 6, 8


@pytest.fixture(scope="module")
def trl_trainer(tiny_onetoken, tmp_path_factory):
    import os

    os.environ.setdefault("WANDB_MODE", "disabled")
    from datasets import Dataset
    from trl import GRPOConfig as TRLConfig
    from trl import GRPOTrainer

    model, tokenizer = tiny_onetoken
    policy = copy.deepcopy(model).train()
    pristine = copy.deepcopy(model).train()  # same weights, never patched by TRL
    args = TRLConfig(
        output_dir=str(tmp_path_factory.mktemp("trl")),
        per_device_train_batch_size=B,
        num_generations=2,
        max_completion_length=MAX_COMPLETION,
        report_to=[],
        use_cpu=True,
        bf16=False,
        logging_steps=1,
        save_strategy="no",
        beta=0.0,
        temperature=0.9,
    )  # beta per case below; ref log-probs come in the batch
    dataset = Dataset.from_list([{"prompt": "theorem t : 1 = 1 := by"}] * B)
    trainer = GRPOTrainer(
        model=policy,
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    trainer.current_gradient_accumulation_steps = 1  # set by the HF training loop; one micro-batch here
    return trainer, pristine


def batch(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    prompt_mask = torch.ones(B, P, dtype=torch.long)
    prompt_mask[1, :2] = 0  # left padding
    completion_mask = torch.ones(B, C, dtype=torch.long)
    completion_mask[0, 4:] = 0  # stopped early
    completion_mask[2, 2:] = 0
    return {
        "prompt_ids": torch.randint(100, 5000, (B, P), generator=g),
        "prompt_mask": prompt_mask,
        "completion_ids": torch.randint(100, 5000, (B, C), generator=g),
        "completion_mask": completion_mask,
        "advantages": torch.tensor([1.2, -0.7, 0.0, 0.5]),
        "num_items_in_batch": completion_mask.sum(),
    }


def configure(trainer, case: dict) -> GRPOConfig:
    ours = GRPOConfig(num_generations=2, micro_batch_size=B, **case)
    trainer.loss_type = ours.loss_type
    trainer.beta = ours.beta
    trainer.epsilon_low = ours.epsilon
    trainer.epsilon_high = ours.eps_high
    trainer.importance_sampling_level = ours.importance_sampling_level
    trainer.args.delta = ours.delta
    trainer.args.use_bias_correction_kl = ours.use_bias_correction_kl
    return ours


def with_logps(inputs: dict, logps: torch.Tensor, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed + 1)
    out = dict(inputs)
    # old / reference log-probs off the current ones by up to ~0.6 nats: many tokens leave the clip range
    out["old_per_token_logps"] = logps.detach() + 0.6 * torch.randn(logps.shape, generator=g)
    out["ref_per_token_logps"] = logps.detach() + 0.3 * torch.randn(logps.shape, generator=g)
    return out


def ours_loss(config: GRPOConfig, logps, inputs) -> torch.Tensor:
    mask = inputs["completion_mask"]
    token = per_token_loss(
        logps,
        inputs["old_per_token_logps"],
        inputs["ref_per_token_logps"] if config.beta else None,
        inputs["advantages"],
        mask,
        config,
    )
    return aggregate(
        token.per_token_loss,
        mask,
        config,
        micro_batches=1,
        batch_tokens=inputs["num_items_in_batch"],
        max_completion_length=MAX_COMPLETION,
    )


@pytest.mark.parametrize("case", CASES, ids=[f"{c['loss_type']}-beta{c['beta']}-{i}" for i, c in enumerate(CASES)])
def test_per_token_gradient_matches_trl(trl_trainer, case):
    trainer, _ = trl_trainer
    config = configure(trainer, case)
    inputs = batch(len(case))
    values = -torch.rand(B, C, generator=torch.Generator().manual_seed(7)) * 3
    inputs = with_logps(inputs, values, len(case))
    theirs_leaf = values.clone().requires_grad_(True)
    original = trainer._get_per_token_logps_and_entropies
    trainer._get_per_token_logps_and_entropies = lambda *a, **k: (theirs_leaf, torch.ones(B, C), None)
    try:
        trainer.model.train()
        theirs = trainer._compute_loss(trainer.model, inputs)
    finally:
        trainer._get_per_token_logps_and_entropies = original
    theirs.backward()
    ours_leaf = values.clone().requires_grad_(True)
    mine = ours_loss(config, ours_leaf, inputs)
    mine.backward()
    assert torch.allclose(mine, theirs, atol=1e-6, rtol=1e-5), (float(mine), float(theirs))
    assert torch.allclose(ours_leaf.grad, theirs_leaf.grad, atol=1e-7, rtol=1e-5)
    # the batch really exercises the objective: clipped tokens (zero gradient) and live ones
    live = inputs["completion_mask"].bool() & (inputs["advantages"].unsqueeze(1) != 0)
    assert (theirs_leaf.grad[live] != 0).any()
    if case["beta"] == 0.0 and case.get("importance_sampling_level", "token") == "token":
        assert (theirs_leaf.grad[live] == 0).any()


@pytest.mark.parametrize("case", [CASES[0], CASES[4]], ids=["grpo", "dapo-kl"])
def test_loss_and_parameter_gradients_match_trl_through_the_model(trl_trainer, case):
    trainer, pristine = trl_trainer
    config = configure(trainer, case)
    inputs = batch(3)
    input_ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)
    attention = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1)
    model = trainer.model.train()
    with torch.no_grad():
        current, *_ = trainer._get_per_token_logps_and_entropies(model, input_ids, attention, C)
    inputs = with_logps(inputs, current, 3)
    model.zero_grad()
    theirs = trainer._compute_loss(model, inputs)
    theirs.backward()
    theirs_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    mine_model = copy.deepcopy(pristine).train()
    logps, entropy = completion_logps(mine_model, input_ids, attention, C, temperature=trainer.temperature)
    assert torch.allclose(logps, current, atol=1e-5)
    assert entropy is not None and entropy.shape == logps.shape
    mine = ours_loss(config, logps, inputs)
    mine.backward()
    assert torch.allclose(mine, theirs, atol=1e-6, rtol=1e-5), (float(mine), float(theirs))
    mine_grads = {n: p.grad for n, p in mine_model.named_parameters() if p.grad is not None}
    assert set(mine_grads) == set(theirs_grads) and len(mine_grads) > 10
    for name, grad in mine_grads.items():
        assert torch.allclose(grad, theirs_grads[name], atol=1e-7, rtol=1e-4), name
