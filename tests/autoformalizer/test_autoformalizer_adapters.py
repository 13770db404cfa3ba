"""LoRA/DoRA on the unfused (NF4) experts: targets, ranks, gradient flow, PEFT's fused remap."""

from __future__ import annotations

import copy

import pytest
import torch

from autoformalizer.adapters import AdapterConfig, apply_adapters, trainable_report
from autoformalizer.config import load_config
from leanloop.training.moe import tiny_qwen3_moe
from autoformalizer.quantize import QuantConfig, quantize_nf4_
from leanloop.paths import REPO_ROOT
from leanloop.tokenizer import QWEN3_VOCAB_SIZE


def _adapter_params(
    config: AdapterConfig, layers: int, experts: int, hidden: int, inter: int, heads_dim: int, kv_dim: int
) -> int:
    """LoRA A+B parameter count from the architecture (r * (in + out) per wrapped Linear)."""
    ra, re_ = config.attention_rank, config.expert_rank
    attention = ra * (hidden + heads_dim) * 2 + ra * (hidden + kv_dim) * 2  # q, o and k, v
    expert = re_ * (hidden + inter) * 3
    return layers * (attention + experts * expert)


def test_qdora_wraps_every_unfused_nf4_expert_and_only_adapters_get_gradients():
    import bitsandbytes as bnb

    model = quantize_nf4_(tiny_qwen3_moe(seed=2, dtype=torch.bfloat16), QuantConfig(compute_dtype="float32"))
    peft_model = apply_adapters(model, AdapterConfig(use_dora=True, dropout=0.0))
    cfg = peft_model.base_model.model.config
    report = trainable_report(peft_model)
    assert report.method == "QDoRA"
    assert report.wrapped_modules == {
        "attention": 4 * cfg.num_hidden_layers,
        "expert": 3 * cfg.num_experts * cfg.num_hidden_layers,
    }
    expert = peft_model.base_model.model.model.layers[1].mlp.experts[7].up_proj
    assert isinstance(expert.base_layer, bnb.nn.Linear4bit)
    assert expert.r["default"] == 8 and expert.scaling["default"] == 16 / 8
    assert "default" in expert.lora_magnitude_vector  # DoRA on a 4-bit expert
    q_proj = peft_model.base_model.model.model.layers[0].self_attn.q_proj
    assert q_proj.r["default"] == 64 and q_proj.scaling["default"] == 128 / 64
    lora = _adapter_params(
        AdapterConfig(),
        cfg.num_hidden_layers,
        cfg.num_experts,
        cfg.hidden_size,
        cfg.moe_intermediate_size,
        cfg.num_attention_heads * cfg.head_dim,
        cfg.num_key_value_heads * cfg.head_dim,
    )
    assert report.by_group["attention_lora"] + report.by_group["expert_lora"] == lora

    peft_model.train()
    ids = torch.randint(0, QWEN3_VOCAB_SIZE, (2, 12), generator=torch.Generator().manual_seed(0))
    peft_model(input_ids=ids, labels=ids).loss.backward()
    expert_b = []
    for name, param in peft_model.named_parameters():
        if not param.requires_grad:
            assert param.grad is None, name  # frozen base: NF4 weights, router, norms, embeddings, head
            continue
        assert "lora_" in name, name
        if ".experts." in name:
            # an expert no token was routed to gets no gradient at all
            if "lora_B" in name:
                expert_b.append(param.grad is not None and bool(param.grad.abs().sum() > 0))
        else:
            assert param.grad is not None, name
            if "lora_B" in name or "lora_magnitude_vector" in name:  # lora_A's grad is 0 while B is 0
                assert param.grad.abs().sum() > 0, name
    assert sum(expert_b) > len(expert_b) / 2


def test_lora_on_a_bf16_base_and_the_fused_model_is_refused():
    model = tiny_qwen3_moe(seed=2)
    report = trainable_report(apply_adapters(model, AdapterConfig(use_dora=False)))
    assert report.method == "LoRA" and "expert_dora_magnitude" not in report.by_group
    assert report.by_group["expert_lora"] == 2 * 8 * 3 * 8 * (64 + 64)  # layers, experts, projections, r, H + I
    with pytest.raises(ValueError, match="unfuse_experts_"):
        apply_adapters(tiny_qwen3_moe(unfused=False), AdapterConfig())


def test_peft_maps_stock_qwen3_moe_expert_targets_onto_fused_parameters():
    """Why the unfused model has its own model type: for `qwen3_moe` PEFT 0.21.2 rewrites the
    expert targets into the fused 3-D parameters (which DoRA cannot wrap)."""
    from peft.utils.transformers_weight_conversion import convert_peft_config_for_transformers

    unfused = tiny_qwen3_moe()
    stock = tiny_qwen3_moe(unfused=False)
    for model, expect_fused in ((stock, True), (unfused, False)):
        lora = AdapterConfig().lora_config()
        lora.target_modules = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
        convert_peft_config_for_transformers(lora, model, None)
        fused_targets = set(lora.target_parameters or [])
        assert (fused_targets == {"gate_up_proj", "down_proj"}) is expect_fused
        assert ("gate_proj" in set(lora.target_modules)) is not expect_fused


def test_configs_parse_and_build_the_embedded_policy():
    from autoformalizer.policy import build_policy

    default = load_config(str(REPO_ROOT / "configs/autoformalizer/eval/default.yaml"))
    paper = load_config(
        str(REPO_ROOT / "configs/autoformalizer/eval/default.yaml"),
        str(REPO_ROOT / "configs/autoformalizer/eval/paper.yaml"),
        overrides=["--policy.adapters.use_dora=true"],
    )
    assert paper.policy.name == "artifacts://autoformalizer_grpo/paper" and paper.policy.adapters.use_dora
    assert paper.retrieval.index.max_declarations is None and paper.retrieval.index.modules == []
    assert paper.evaluation.limit is None and paper.lean.backend.kind == "local"
    assert default.retrieval.index.max_declarations == 3000
    assert default.policy.name == "artifacts://autoformalizer_grpo/default"  # what make autoformalizer-grpo makes
    policy = copy.deepcopy(default.policy)
    policy.name = "qwen3-moe-tiny"  # the same recipe on the untrained tiny preset
    policy.arch.num_hidden_layers = 1  # keep the test small
    model, tokenizer = build_policy(policy)
    assert trainable_report(model).method == "QLoRA"
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") == 151_645


def test_stage_two_continues_the_stage_one_adapters_with_a_frozen_reference_copy(artifacts):
    """The design's Stage 2 trains Stage 1's adapters further (it used to merge them, re-quantize and
    start fresh adapters); the KL reference is a frozen copy of them, i.e. the Stage-1 policy exactly,
    not the raw base the switched-off adapters would give. ``stage1: merge`` keeps the old start."""
    from dataclasses import replace

    from autoformalizer.adapters import REFERENCE_ADAPTER
    from autoformalizer.config import PolicyConfig
    from autoformalizer.policy import build_policy, export_policy, policy_identity
    from leanloop.artifacts import Manifest

    stage1 = PolicyConfig(quant=QuantConfig(enabled=False, compute_dtype="float32"))
    stage1.arch.num_hidden_layers = 1
    model, tokenizer = build_policy(stage1)
    with torch.no_grad():  # a trained Stage-1 adapter: lora_B away from its zero init
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05, generator=torch.Generator().manual_seed(len(name)))
    ids = torch.tensor([[151643, 785, 3838, 220, 17]])
    model.eval()  # no adapter dropout in the comparisons
    with torch.no_grad():
        stage1_logits = model(input_ids=ids).logits
    run = artifacts / "autoformalizer" / "s1"
    export_policy(model, tokenizer, stage1, run / "final")
    Manifest(stage="autoformalizer", run="s1", extra={"model": policy_identity(model, tokenizer, stage1)}).write(run)

    stage2 = replace(stage1, name="artifacts://autoformalizer/s1")
    continued, _ = build_policy(stage2)
    continued.eval()
    assert set(continued.peft_config) == {"default", REFERENCE_ADAPTER}
    with torch.no_grad():
        assert torch.allclose(continued(input_ids=ids).logits, stage1_logits, atol=1e-5)  # starts AS Stage 1
    trainable = {n for n, p in continued.named_parameters() if p.requires_grad}
    assert trainable and all(".default." in n for n in trainable)  # the reference copy is frozen
    # one optimizer step moves the policy; the reference adapter stays the Stage-1 policy
    opt = torch.optim.SGD([p for p in continued.parameters() if p.requires_grad], lr=1.0)
    continued(input_ids=ids).logits.logsumexp(-1).sum().backward()
    opt.step()
    continued.set_adapter(REFERENCE_ADAPTER)
    with torch.no_grad():
        assert torch.allclose(continued(input_ids=ids).logits, stage1_logits, atol=1e-5)
    continued.set_adapter("default")
    with torch.no_grad():
        assert not torch.allclose(continued(input_ids=ids).logits, stage1_logits, atol=1e-3)
    assert {n for n, p in continued.named_parameters() if p.requires_grad} == trainable

    merged, _ = build_policy(replace(stage2, stage1="merge"))  # the old start: fresh adapters on the merge
    merged.eval()
    assert set(merged.peft_config) == {"default"}
    with torch.no_grad():
        assert torch.allclose(merged(input_ids=ids).logits, stage1_logits, atol=1e-4)
