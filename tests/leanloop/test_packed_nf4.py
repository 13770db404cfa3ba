"""bitsandbytes' packed AVX512-BF16 NF4 CPU kernel is a decision of the caller, on every CPU.

The capability is forced on and off by patching the flag ``Linear4bit`` reads
(``bitsandbytes.nn.modules.has_avx512bf16``), so the decisions are tested on any machine; running
the kernel itself needs the instruction set (its library symbol is only registered there)."""

from __future__ import annotations

import bitsandbytes as bnb
import pytest
import torch
from torch import nn

from leanloop.training.packed_nf4 import allow_packed_cpu_kernel, cpu_has_packed_kernel, is_packed

HAS_KERNEL = cpu_has_packed_kernel()


@pytest.fixture
def capability(monkeypatch):
    """``capability(True/False)``: what every Linear4bit built afterwards, and our decision, read."""

    def force(value: bool) -> None:
        monkeypatch.setattr(bnb.nn.modules, "has_avx512bf16", lambda: value)

    return force


def _nf4(k: int, n: int, compute: torch.dtype = torch.bfloat16) -> nn.Module:
    torch.manual_seed(k * 1000 + n)
    layer = bnb.nn.Linear4bit(k, n, bias=False, compute_dtype=compute, quant_type="nf4", quant_storage=torch.uint8)
    layer.weight = bnb.nn.Params4bit(
        torch.randn(n, k) / k**0.5,
        requires_grad=False,
        quant_type="nf4",
        blocksize=64,
        compress_statistics=True,
        module=layer,
    )
    return layer.to("cpu")


def _layers() -> nn.ModuleDict:
    return nn.ModuleDict(
        {
            "fits": _nf4(64, 64),
            "narrow_input": _nf4(32, 64),
            "odd_output": _nf4(64, 48),
            "fp32_compute": _nf4(64, 64, torch.float32),
        }
    ).eval()


def _forward(layers: nn.ModuleDict, grad: bool) -> dict[str, torch.Tensor]:
    out = {}
    for name, layer in layers.items():
        x = torch.randn(3, layer.in_features, generator=torch.Generator().manual_seed(1))
        with torch.set_grad_enabled(grad):
            out[name] = layer(x.requires_grad_(grad)).detach()
    return out


def test_forced_on_the_kernel_is_refused_where_a_layer_does_not_fit_and_wherever_it_is_not_allowed(capability):
    capability(True)
    layers = _layers()
    refused = allow_packed_cpu_kernel(layers, True)
    assert set(refused) == {"narrow_input", "odd_output", "fp32_compute"}
    assert "input width 32" in refused["narrow_input"] and "output width 48" in refused["odd_output"]
    assert "bfloat16" in refused["fp32_compute"]
    assert [n for n, m in layers.items() if m.support_avx512bf16_for_cpu] == ["fits"]
    # not allowed: every layer keeps the grad-mode path in an eval-mode no-grad forward, bit for bit
    assert allow_packed_cpu_kernel(layers, False) == {}
    assert not any(m.support_avx512bf16_for_cpu for m in layers.values())
    inference, reference = _forward(layers, grad=False), _forward(layers, grad=True)
    assert not any(is_packed(m) for m in layers.values())
    assert all(torch.equal(inference[n], reference[n]) for n in layers)


def test_forced_off_nothing_takes_the_kernel_even_when_allowed(capability):
    capability(False)
    layers = _layers()
    refused = allow_packed_cpu_kernel(layers, True)
    assert refused == {n: "this CPU has no AVX512-BF16" for n in layers}
    inference, reference = _forward(layers, grad=False), _forward(layers, grad=True)
    assert not any(is_packed(m) for m in layers.values())
    assert all(torch.equal(inference[n], reference[n]) for n in layers)


def _flags(model) -> list[bool]:
    return [m.support_avx512bf16_for_cpu for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]


def test_stages_decide_per_call_site_training_policies_never_take_the_kernel(capability):
    from autoformalizer.config import PolicyConfig as AutoformalizerPolicy
    from autoformalizer.policy import build_base, build_policy
    from autoformalizer.quantize import QuantConfig

    capability(True)  # what a fresh Linear4bit on an AVX512-BF16 CPU starts with
    trained, _ = build_policy(AutoformalizerPolicy())
    assert _flags(trained) and not any(_flags(trained))
    # the evaluation's inference-only base takes it on every layer when it computes in bf16 (the
    # tiny MoE's shapes all fit), and on none when configured for fp32 compute (the CPU default)
    inference = build_base(AutoformalizerPolicy(quant=QuantConfig(compute_dtype="bfloat16")), packed_cpu_kernel=True)
    assert _flags(inference) and all(_flags(inference))
    assert allow_packed_cpu_kernel(inference, True) == {}
    fp32 = build_base(AutoformalizerPolicy(), packed_cpu_kernel=True)
    assert not any(_flags(fp32))
    assert set(allow_packed_cpu_kernel(fp32, True).values()) == {
        "the kernel computes in bfloat16, the layer is configured for torch.float32"
    }
    with pytest.raises(ValueError, match="trainable adapters"):
        build_policy(AutoformalizerPolicy(), packed_cpu_kernel=True)


def test_quantizing_in_memory_leaves_the_kernel_off_and_the_mode_as_it_was(capability):
    from leanloop.training.moe import tiny_qwen3_moe
    from autoformalizer.quantize import QuantConfig, quantize_nf4_

    capability(True)
    model = quantize_nf4_(tiny_qwen3_moe(), QuantConfig())  # tiny_qwen3_moe returns an eval-mode model
    layers = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert layers and not any(m.support_avx512bf16_for_cpu or m.training for m in layers)


def test_the_rl_qlora_policy_never_takes_the_kernel(capability):
    from leanloop.training.models import ModelSpec, load_tokenizer
    from rl.config import AdapterConfig, PolicyConfig
    from rl.policy import build_policy

    capability(True)
    spec = ModelSpec("qwen3-tiny")
    policy = build_policy(
        spec,
        load_tokenizer(spec),
        PolicyConfig(adapter=AdapterConfig(kind="qlora", r=2, alpha=4, compute_dtype="bfloat16")),
        beta=0.04,
    )
    assert _flags(policy.model) and not any(_flags(policy.model))


@pytest.mark.skipif(
    not HAS_KERNEL,
    reason="running the packed kernel needs a CPU with AVX512-BF16 "
    "(bitsandbytes registers it only there); its decisions are tested above",
)
def test_the_packed_kernel_stays_close_to_the_grad_mode_forward_and_cannot_be_undone():
    from leanloop.training.moe import tiny_qwen3_moe
    from autoformalizer.quantize import QuantConfig, quantize_nf4_

    model = quantize_nf4_(tiny_qwen3_moe(seed=1), QuantConfig()).eval()
    ids = torch.randint(100, 150_000, (2, 32), generator=torch.Generator().manual_seed(1))
    allow_packed_cpu_kernel(model, False)
    with torch.no_grad():
        exact = torch.log_softmax(model(ids).logits.float(), -1)
    assert allow_packed_cpu_kernel(model, True) == {}
    with torch.no_grad():
        packed = torch.log_softmax(model(ids).logits.float(), -1)
    layers = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert all(is_packed(m) for m in layers)
    # measured on this tiny MoE (seeds 0-5, NF4 bf16 compute): mean |d log p| 5.3e-4 .. 8.1e-4 over
    # the vocabulary (the max, up to 5e-2, is a token whose top-2 experts flip): allowed 2e-3
    assert 0 < (exact - packed).abs().mean() < 2e-3
    with pytest.raises(ValueError, match="rebuild the model"):
        allow_packed_cpu_kernel(model, False)
