"""Qwen3-MoE with one ``nn.Linear`` per expert projection ("unfused"), and the tiny/paper configs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM
from transformers.initialization import no_init_weights
from transformers.models.qwen3_moe.modeling_qwen3_moe import (
    Qwen3MoeExperts,
    Qwen3MoeMLP,
    Qwen3MoeSparseMoeBlock,
)

from leanloop.tokenizer import QWEN3_VOCAB_SIZE

UNFUSED_MODEL_TYPE = "qwen3_moe_unfused"
PAPER_MODEL_ID = "Qwen/Qwen3-Coder-30B-A3B-Instruct"


class UnfusedQwen3MoeExperts(nn.ModuleList):
    """The experts of one sparse block as ``nn.Linear`` modules, same call and same arithmetic
    as transformers' eager ``Qwen3MoeExperts.forward``. Built uninitialised: fill it with
    :func:`unfuse_block_` or a checkpoint."""

    def __init__(
        self, config: Qwen3MoeConfig, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ):
        # no random init: the weights are copied from the fused tensors (or loaded) right after,
        # and initialising 18k Linear modules would dominate building the 30B module tree
        with no_init_weights(), torch.device(device or "cpu"):
            experts = [
                Qwen3MoeMLP(config, intermediate_size=config.moe_intermediate_size) for _ in range(config.num_experts)
            ]
        super().__init__(experts)
        if dtype is not None:
            self.to(dtype)
        self.num_experts = config.num_experts

    def forward(
        self, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor
    ) -> torch.Tensor:
        final_hidden_states = torch.zeros_like(hidden_states)
        with torch.no_grad():
            # [E, top_k, tokens]: which (slot, token) pairs each expert serves
            expert_mask = nn.functional.one_hot(top_k_index, num_classes=self.num_experts)
            expert_mask = expert_mask.permute(2, 1, 0)
            expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit.flatten().tolist():
            top_k_pos, token_idx = torch.where(expert_mask[expert_idx])
            current = self[expert_idx](hidden_states[token_idx])
            current = current * top_k_weights[token_idx, top_k_pos, None]
            final_hidden_states.index_add_(0, token_idx, current.to(final_hidden_states.dtype))
        return final_hidden_states


def _sparse_blocks(model: nn.Module) -> list[tuple[str, Qwen3MoeSparseMoeBlock]]:
    return [(name, m) for name, m in model.named_modules() if isinstance(m, Qwen3MoeSparseMoeBlock)]


@torch.no_grad()
def unfuse_block_(block: Qwen3MoeSparseMoeBlock, config: Qwen3MoeConfig) -> UnfusedQwen3MoeExperts:
    """Replace ``block.experts`` (fused) by per-expert ``nn.Linear`` holding exact copies."""
    fused = block.experts
    if isinstance(fused, UnfusedQwen3MoeExperts):
        return fused
    if not isinstance(fused, Qwen3MoeExperts):
        raise TypeError(f"expected transformers' Qwen3MoeExperts, found {type(fused).__name__}")
    gate_up, down = fused.gate_up_proj, fused.down_proj
    n_exp, two_i, hidden = gate_up.shape
    inter = two_i // 2
    if (n_exp, hidden, inter) != (config.num_experts, config.hidden_size, config.moe_intermediate_size) or tuple(
        down.shape
    ) != (n_exp, hidden, inter):
        raise ValueError(
            f"fused expert shapes gate_up_proj {tuple(gate_up.shape)} / down_proj {tuple(down.shape)} do not "
            f"match the config (E={config.num_experts}, H={config.hidden_size}, "
            f"I={config.moe_intermediate_size}); pass the model's own config"
        )
    unfused = UnfusedQwen3MoeExperts(config, device=gate_up.device, dtype=gate_up.dtype)
    if gate_up.device.type != "meta":
        for e, expert in enumerate(unfused):
            # gate_up_proj[e] is [2I, H] = [gate; up] (the stock forward chunks its output in two)
            expert.gate_proj.weight.copy_(gate_up[e, :inter])
            expert.up_proj.weight.copy_(gate_up[e, inter:])
            expert.down_proj.weight.copy_(down[e])
    block.experts = unfused  # the fused tensors are freed with the old module
    return unfused


def unfuse_experts_(model: Qwen3MoeForCausalLM) -> Qwen3MoeForCausalLM:
    """Unfuse every sparse block in place, one layer at a time (peak extra memory: one layer's
    experts), and mark the model as ``qwen3_moe_unfused`` so it saves and reloads unfused."""
    blocks = _sparse_blocks(model)
    if not blocks:
        raise ValueError("no Qwen3MoeSparseMoeBlock found: is this a Qwen3-MoE model?")
    for _, block in blocks:
        unfuse_block_(block, model.config)
    model.config = to_unfused_config(model.config)
    for module in model.modules():
        if hasattr(module, "config") and isinstance(module.config, Qwen3MoeConfig):
            module.config = model.config
    model.__class__ = UnfusedQwen3MoeForCausalLM
    return model


@torch.no_grad()
def fuse_experts(model: nn.Module) -> Qwen3MoeForCausalLM:
    """The inverse: a stock ``Qwen3MoeForCausalLM`` (e.g. to export merged adapters for serving).
    Needs plain ``nn.Linear`` experts (merge and dequantize adapters first)."""
    config = Qwen3MoeConfig(
        **{
            k: v
            for k, v in model.config.to_dict().items()
            if k not in ("model_type", "architectures", "transformers_version")
        }
    )
    device = next(model.parameters()).device
    with no_init_weights(), torch.device(device):  # every tensor is overwritten below
        fused_model = Qwen3MoeForCausalLM(config).to(next(model.parameters()).dtype)
    state = dict(model.state_dict())
    for name, block in _sparse_blocks(model):
        experts = block.experts
        if not all(type(lin) is nn.Linear for ex in experts for lin in (ex.gate_proj, ex.up_proj, ex.down_proj)):
            raise TypeError(
                f"{name}: experts are not plain nn.Linear (quantized or adapted); "
                "merge_and_unload() and dequantize before fusing"
            )
        for key in [k for k in state if k.startswith(f"{name}.experts.")]:
            del state[key]
        state[f"{name}.experts.gate_up_proj"] = torch.stack(
            [torch.cat([ex.gate_proj.weight, ex.up_proj.weight], dim=0) for ex in experts]
        )
        state[f"{name}.experts.down_proj"] = torch.stack([ex.down_proj.weight for ex in experts])
    fused_model.load_state_dict(state, strict=True)
    return fused_model.eval()


class UnfusedQwen3MoeConfig(Qwen3MoeConfig):
    """A Qwen3-MoE config whose checkpoints keep one tensor per expert projection."""

    model_type = UNFUSED_MODEL_TYPE

    @classmethod
    def from_dict(cls, config_dict: dict[str, Any], **kwargs: Any) -> "UnfusedQwen3MoeConfig":
        # A published checkpoint's config.json says "qwen3_moe"; kept, it would become an instance
        # attribute and bring back transformers' and PEFT's fused-expert conversions.
        config_dict = {k: v for k, v in config_dict.items() if k != "model_type"}
        return super().from_dict(config_dict, **kwargs)


def to_unfused_config(config: Qwen3MoeConfig) -> UnfusedQwen3MoeConfig:
    if isinstance(config, UnfusedQwen3MoeConfig):
        return config
    values = {
        k: v for k, v in config.to_dict().items() if k not in ("model_type", "architectures", "transformers_version")
    }
    unfused = UnfusedQwen3MoeConfig(**values)
    unfused._attn_implementation = config._attn_implementation
    return unfused


class UnfusedQwen3MoeForCausalLM(Qwen3MoeForCausalLM):
    """``Qwen3MoeForCausalLM`` whose sparse blocks hold :class:`UnfusedQwen3MoeExperts`.

    Built from a config, it first builds (and initialises) the stock fused experts, then copies them
    into per-expert modules, so the same seed gives the same weights as the stock model."""

    config_class = UnfusedQwen3MoeConfig

    def __init__(self, config: Qwen3MoeConfig):
        config = to_unfused_config(config)
        super().__init__(config)
        for _, block in _sparse_blocks(self):
            unfuse_block_(block, config)


AutoConfig.register(UNFUSED_MODEL_TYPE, UnfusedQwen3MoeConfig, exist_ok=True)
AutoModelForCausalLM.register(UnfusedQwen3MoeConfig, UnfusedQwen3MoeForCausalLM, exist_ok=True)


@dataclass
class MoEArchConfig:
    """The architecture knobs of a Qwen3-MoE build (everything else keeps Qwen3's defaults).

    The defaults are the project's one tiny Qwen3-MoE (tests, the embedded default, and the
    ``qwen3-moe-tiny`` preset of :mod:`leanloop.training.models`, which builds its fused form):
    real Qwen vocabulary, 2 layers, 8 experts, top-2."""

    vocab_size: int = QWEN3_VOCAB_SIZE
    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 16
    intermediate_size: int = 128
    # 64, not smaller: every 4-bit layer's input width must be a multiple of the NF4 block size (64)
    # for bitsandbytes' packed CPU kernel (down_proj's input is this width)
    moe_intermediate_size: int = 64
    num_experts: int = 8
    num_experts_per_tok: int = 2
    norm_topk_prob: bool = True
    max_position_embeddings: int = 32_768
    rope_theta: float = 10_000.0
    tie_word_embeddings: bool = False
    # the leanloop Qwen tokenizer's <|endoftext|> (bos, eos and padding of the Qwen3 base models)
    bos_token_id: int | None = 151_643
    eos_token_id: int | None = 151_643
    pad_token_id: int | None = 151_643

    def to_config(self, unfused: bool = True, **overrides: Any) -> Qwen3MoeConfig:
        values = dict(self.__dict__)
        rope_theta = values.pop("rope_theta")
        values.update(overrides)
        values.setdefault("rope_parameters", {"rope_type": "default", "rope_theta": rope_theta})
        cls = UnfusedQwen3MoeConfig if unfused else Qwen3MoeConfig
        return cls(**values)


# Qwen/Qwen3-Coder-30B-A3B-Instruct's config.json (48 layers, 128 experts, 8 active, 3.3B active
# parameters). Used for meta-device size reports; a real load reads config.json from the checkpoint.
PAPER_ARCH = MoEArchConfig(
    vocab_size=151_936,
    hidden_size=2048,
    num_hidden_layers=48,
    num_attention_heads=32,
    num_key_value_heads=4,
    head_dim=128,
    intermediate_size=6144,
    moe_intermediate_size=768,
    num_experts=128,
    num_experts_per_tok=8,
    norm_topk_prob=True,
    max_position_embeddings=262_144,
    rope_theta=10_000_000.0,
    tie_word_embeddings=False,
    bos_token_id=151_643,
    eos_token_id=151_645,
    pad_token_id=None,
)


def tiny_qwen3_moe(
    arch: MoEArchConfig | None = None, seed: int = 0, unfused: bool = True, dtype: torch.dtype = torch.float32
) -> Qwen3MoeForCausalLM:
    """A randomly initialised Qwen3-MoE with the real Qwen3 vocabulary (tests, embedded default,
    benchmarks). ``unfused=False`` gives the stock fused transformers model for comparisons."""
    arch = arch or MoEArchConfig()
    config = arch.to_config(unfused=unfused)
    torch.manual_seed(seed)
    model = (UnfusedQwen3MoeForCausalLM if unfused else Qwen3MoeForCausalLM)(config)
    return model.to(dtype).eval()


def meta_model(arch: MoEArchConfig, unfused: bool = True) -> Qwen3MoeForCausalLM:
    """The model's module tree with no storage (parameter counts and byte reports for 30B)."""
    config = arch.to_config(unfused=unfused, torch_dtype="bfloat16")
    with torch.device("meta"):
        model = (UnfusedQwen3MoeForCausalLM if unfused else Qwen3MoeForCausalLM)(config)
    return model
