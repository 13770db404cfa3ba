"""bitsandbytes' packed NF4 CPU kernel: which 4-bit layers may take it, decided by the caller."""

from __future__ import annotations

from typing import Any

import torch

BLOCK_N = 32  # output rows per tile of bitsandbytes' packed layout (_convert_weight_packed_for_cpu)


def cpu_has_packed_kernel() -> bool:
    """The capability flag ``Linear4bit`` itself reads (patch ``bitsandbytes.nn.modules.has_avx512bf16``
    to force it either way in tests)."""
    from bitsandbytes.nn import modules

    return bool(modules.has_avx512bf16())


def _blocksize(layer: Any) -> int:
    state = getattr(layer.weight, "quant_state", None)
    return int(state.blocksize if state is not None else getattr(layer.weight, "blocksize", 64))


def packed_kernel_fits(layer: Any) -> tuple[bool, str]:
    """Whether the packed kernel accepts this ``Linear4bit`` and computes it as configured, with why not."""
    k, n, block = layer.in_features, layer.out_features, _blocksize(layer)
    if k % block:
        return False, f"input width {k} is not a multiple of the 4-bit block size {block}"
    if n % BLOCK_N:
        return False, f"output width {n} is not a multiple of {BLOCK_N}"
    if layer.compute_dtype not in (None, torch.bfloat16):
        return False, f"the kernel computes in bfloat16, the layer is configured for {layer.compute_dtype}"
    return True, ""


def is_packed(layer: Any) -> bool:
    return bool(getattr(getattr(layer.weight, "quant_state", None), "packing_format_for_cpu", False))


def allow_packed_cpu_kernel(model: torch.nn.Module, allowed: bool) -> dict[str, str]:
    """Set every ``Linear4bit``'s packed-kernel flag: on only where ``allowed``, the CPU has the kernel
    and the layer fits it; call it before the model's first forward. Returns, per layer kept off the
    kernel while ``allowed``, the reason.

    A layer already packed cannot be switched off: bitsandbytes' inverse (what its ``.cuda()`` and
    ``state_dict`` use) keeps the bf16-rounded absmax, so the weights stay changed (tiny MoE: up to
    5e-3 on the log-probs after packing and unpacking, measured); rebuild the model instead."""
    import bitsandbytes as bnb

    capable = cpu_has_packed_kernel()
    refused: dict[str, str] = {}
    for name, layer in model.named_modules():
        if not isinstance(layer, bnb.nn.Linear4bit):
            continue
        fits, why = packed_kernel_fits(layer)
        if allowed and not capable:
            why = "this CPU has no AVX512-BF16"
        on = allowed and capable and fits
        if allowed and not on:
            refused[name] = why
        if not on and is_packed(layer):
            raise ValueError(
                f"{name} already took the packed CPU kernel (its weights were rewritten in "
                "bf16-rounded form); rebuild the model and decide before its first forward"
            )
        layer.support_avx512bf16_for_cpu = on
    return refused
