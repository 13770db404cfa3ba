"""Build the autoformalizer's policy: unfused Qwen3-MoE -> NF4 (optional) -> LoRA/DoRA adapters.

    model, tokenizer = build_policy(config.policy)

``name: tiny`` builds the random tiny model in memory and quantizes it in place; a checkpoint
(``Qwen/Qwen3-Coder-30B-A3B-Instruct`` or a folder) is loaded unfused, straight into NF4 when
``quant.enabled`` (see :mod:`autoformalizer.quantize` for the layer-by-layer host-memory path).
"""

from __future__ import annotations

from typing import Callable

import torch

from autoformalizer.adapters import apply_adapters
from autoformalizer.config import PolicyConfig
from autoformalizer.moe import UnfusedQwen3MoeForCausalLM, tiny_qwen3_moe
from autoformalizer.quantize import load_unfused_nf4, quantize_nf4_


def load_policy_tokenizer(config: PolicyConfig):
    if config.name == "tiny":
        from leanloop.tokenizer import qwen3_tokenizer

        return qwen3_tokenizer()
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(config.name)


def build_base(config: PolicyConfig):
    """The unfused (and, with ``quant.enabled``, NF4) base model, without adapters."""
    dtype = getattr(torch, config.dtype)
    if config.name == "tiny":
        model = tiny_qwen3_moe(config.arch, seed=config.seed, dtype=dtype)
        if config.quant.enabled:
            device = "cuda" if torch.cuda.is_available() else "cpu"
            quantize_nf4_(model, config.quant, device=device)
        return model
    if config.quant.enabled:
        return load_unfused_nf4(config.name, config.quant, device_map=config.device_map)
    return UnfusedQwen3MoeForCausalLM.from_pretrained(config.name, dtype=dtype, device_map=config.device_map)


def build_policy(config: PolicyConfig, adapters: bool = True):
    """(model, tokenizer): the base with PEFT adapters attached (trainable) unless ``adapters=False``."""
    model = build_base(config)
    if adapters:
        model = apply_adapters(model, config.adapters)
    return model, load_policy_tokenizer(config)


def make_generate(model, tokenizer, max_new_tokens: int = 256, do_sample: bool = False,
                  temperature: float = 1.0, seed: int | None = None) -> Callable[[str], str]:
    """``generate(prompt) -> completion`` for the repair loop (the completion only, special tokens kept
    out)."""
    device = next(model.parameters()).device
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")

    @torch.no_grad()
    def generate(prompt: str) -> str:
        if seed is not None:
            torch.manual_seed(seed)
        encoded = tokenizer(prompt, return_tensors="pt").to(device)
        was_training = model.training
        model.eval()
        output = model.generate(**encoded, max_new_tokens=max_new_tokens, do_sample=do_sample,
                                temperature=temperature if do_sample else None, eos_token_id=eos,
                                pad_token_id=tokenizer.pad_token_id)
        model.train(was_training)
        return tokenizer.decode(output[0, encoded["input_ids"].shape[1]:], skip_special_tokens=True)

    return generate
