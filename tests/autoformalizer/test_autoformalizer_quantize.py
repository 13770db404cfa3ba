"""NF4 with double quantization on CPU: what is quantized, forward accuracy, byte accounting."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from leanloop.training.moe import tiny_qwen3_moe
from autoformalizer.quantize import (
    QuantConfig,
    estimate_bytes,
    load_unfused_nf4,
    paper_memory_report,
    parameter_bytes,
    quantize_nf4_,
)
from leanloop.tokenizer import QWEN3_VOCAB_SIZE

CPU_NF4 = QuantConfig(compute_dtype="float32")


@pytest.fixture(scope="module")
def models():
    reference = tiny_qwen3_moe(seed=1)  # fp32
    quantized = quantize_nf4_(copy.deepcopy(reference).to(torch.bfloat16), CPU_NF4)
    return reference, quantized


def test_experts_and_attention_are_nf4_router_head_embeddings_norms_are_not(models):
    import bitsandbytes as bnb

    _, q = models
    for layer in q.model.layers:
        for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj, layer.self_attn.o_proj):
            assert isinstance(proj, bnb.nn.Linear4bit)
        for expert in layer.mlp.experts:
            for proj in (expert.gate_proj, expert.up_proj, expert.down_proj):
                assert isinstance(proj, bnb.nn.Linear4bit)
                state = proj.weight.quant_state
                assert state.quant_type == "nf4" and state.nested  # double quantization
        assert type(layer.mlp.gate).__name__ == "Qwen3MoeTopKRouter" and layer.mlp.gate.weight.dtype == torch.bfloat16
    assert type(q.lm_head) is nn.Linear and type(q.model.embed_tokens) is nn.Embedding


def test_nf4_forward_on_cpu_stays_close_to_full_precision(models):
    reference, q = models
    ids = torch.randint(0, QWEN3_VOCAB_SIZE, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        full = reference(ids).logits
        nf4 = q(ids).logits.float()
        bf16 = copy.deepcopy(reference).to(torch.bfloat16)(ids).logits.float()
    cosine = torch.nn.functional.cosine_similarity(full.flatten(), nf4.flatten(), dim=0).item()
    assert cosine > 0.98
    # 4-bit weights cost accuracy beyond bf16 rounding, but stay within a small fraction of the logits' scale
    nf4_err = (nf4 - full).abs().max().item()
    assert (bf16 - full).abs().max().item() < nf4_err < 0.25 * full.abs().max().item()


def test_measured_bytes_match_the_module_tree_estimate_and_the_paper_report(models):
    reference, q = models
    bf16_model = copy.deepcopy(reference).to(torch.bfloat16)
    assert parameter_bytes(bf16_model) == estimate_bytes(bf16_model, None)
    measured = parameter_bytes(q)
    assert measured == estimate_bytes(bf16_model, CPU_NF4)
    assert measured["experts"] < parameter_bytes(bf16_model)["experts"] / 1.8  # tiny blocks carry overhead
    report = paper_memory_report()
    assert 30.4e9 < report.parameters < 30.7e9  # Qwen3-Coder-30B-A3B
    assert (
        60e9 < report.bf16_bytes["total"] < 62e9 and 16.4e9 < report.nf4_bytes["total"] < 17.0e9
    )  # seed: ~60 -> ~16.7 GB
    assert report.bf16_bytes["experts"] / report.bf16_bytes["total"] > 0.9


def test_checkpoint_loads_unfused_straight_into_nf4_like_the_in_memory_path(saved_fused_checkpoint):
    import bitsandbytes as bnb

    loaded = load_unfused_nf4(saved_fused_checkpoint, CPU_NF4, device_map="cpu")
    expert = loaded.model.layers[1].mlp.experts[5]
    assert isinstance(expert.down_proj, bnb.nn.Linear4bit) and type(loaded.lm_head) is nn.Linear
    in_memory = quantize_nf4_(tiny_qwen3_moe(seed=3), CPU_NF4)  # the checkpoint holds fp32 weights
    assert parameter_bytes(loaded)["experts"] == parameter_bytes(in_memory)["experts"]
    packed = [(a, b) for a, b in zip(loaded.parameters(), in_memory.parameters()) if a.dtype == torch.uint8]
    assert len(packed) == 2 * (4 + 3 * 8)  # every attention and expert projection, quantized identically
    assert all(torch.equal(a, b) for a, b in packed)
