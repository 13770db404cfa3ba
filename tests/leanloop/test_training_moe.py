"""Unfused experts: exact weight copies, identical routing, logits, generation, save/load."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from leanloop.training.moe import (
    UNFUSED_MODEL_TYPE,
    MoEArchConfig,
    UnfusedQwen3MoeExperts,
    UnfusedQwen3MoeForCausalLM,
    fuse_experts,
    tiny_qwen3_moe,
    unfuse_block_,
    unfuse_experts_,
)
from leanloop.tokenizer import QWEN3_VOCAB_SIZE


def _ids(seed: int = 0, shape=(2, 12)) -> torch.Tensor:
    return torch.randint(0, QWEN3_VOCAB_SIZE, shape, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def fused():
    return tiny_qwen3_moe(seed=0, unfused=False)


def test_unfuse_copies_every_expert_weight_exactly(fused):
    model = copy.deepcopy(fused)
    blocks = [layer.mlp for layer in model.model.layers]
    originals = [(b.experts.gate_up_proj.detach().clone(), b.experts.down_proj.detach().clone()) for b in blocks]
    unfuse_experts_(model)
    inter = model.config.moe_intermediate_size
    assert model.config.model_type == UNFUSED_MODEL_TYPE and isinstance(model, UnfusedQwen3MoeForCausalLM)
    for block, (gate_up, down) in zip(blocks, originals):
        assert isinstance(block.experts, UnfusedQwen3MoeExperts) and len(block.experts) == gate_up.shape[0]
        for e, expert in enumerate(block.experts):
            assert all(type(m) is nn.Linear for m in (expert.gate_proj, expert.up_proj, expert.down_proj))
            assert torch.equal(expert.gate_proj.weight, gate_up[e, :inter])
            assert torch.equal(expert.up_proj.weight, gate_up[e, inter:])
            assert torch.equal(expert.down_proj.weight, down[e])
        assert block.gate.weight.shape == (model.config.num_experts, model.config.hidden_size)  # router kept


def test_unfused_logits_router_logits_and_generation_equal_the_fused_model(fused):
    unfused = tiny_qwen3_moe(seed=0, unfused=True)  # same seed: same weights, copied into Linear modules
    converted = unfuse_experts_(copy.deepcopy(fused))
    ids = _ids()
    with torch.no_grad():
        ref = fused(ids, output_router_logits=True)
        for model in (unfused, converted):
            out = model(ids, output_router_logits=True)
            assert (out.logits - ref.logits).abs().max().item() <= 1e-5
            for mine, theirs in zip(out.router_logits, ref.router_logits):
                assert torch.equal(mine.topk(2).indices, theirs.topk(2).indices)  # same experts chosen
                assert (mine - theirs).abs().max().item() <= 1e-6
    # both experts implementations of the stock model (grouped_mm and the eager loop) agree
    eager = copy.deepcopy(fused)
    eager.set_experts_implementation("eager")
    with torch.no_grad():
        assert (eager(ids).logits - ref.logits).abs().max().item() <= 1e-5
    prompt = _ids(1, (1, 6))
    greedy = dict(max_new_tokens=8, do_sample=False)
    assert torch.equal(fused.generate(prompt, **greedy), unfused.generate(prompt, **greedy))


def test_unfused_model_saves_reloads_and_loads_the_published_layout(fused, saved_fused_checkpoint, tmp_path):
    from transformers import AutoConfig, AutoModelForCausalLM
    from safetensors import safe_open

    # a stock checkpoint stores one tensor per expert projection: exactly our module names
    with safe_open(saved_fused_checkpoint / "model.safetensors", "pt") as f:
        keys = set(f.keys())
    assert "model.layers.0.mlp.experts.0.gate_proj.weight" in keys and "model.layers.0.mlp.gate.weight" in keys
    direct = UnfusedQwen3MoeForCausalLM.from_pretrained(saved_fused_checkpoint)
    assert direct.config.model_type == UNFUSED_MODEL_TYPE  # not turned back into qwen3_moe by config.json
    stock = AutoModelForCausalLM.from_pretrained(saved_fused_checkpoint)  # the stock loader fuses
    ids = _ids(2)
    with torch.no_grad():
        assert (direct(ids).logits - stock(ids).logits).abs().max().item() <= 1e-5

    direct.save_pretrained(tmp_path / "unfused")
    assert AutoConfig.from_pretrained(tmp_path / "unfused").model_type == UNFUSED_MODEL_TYPE
    again = AutoModelForCausalLM.from_pretrained(tmp_path / "unfused")
    assert isinstance(again, UnfusedQwen3MoeForCausalLM)
    fused_back = fuse_experts(again)
    with torch.no_grad():
        assert torch.equal(again(ids).logits, direct(ids).logits)
        assert (fused_back(ids).logits - stock(ids).logits).abs().max().item() <= 1e-5


def test_unfuse_rejects_a_config_that_does_not_match_the_weights(fused):
    block = copy.deepcopy(fused.model.layers[0].mlp)
    wrong = MoEArchConfig(num_experts=4).to_config()
    with pytest.raises(ValueError, match="do not match the config"):
        unfuse_block_(block, wrong)
