"""NF4 (4-bit NormalFloat) with double quantization for the unfused Qwen3-MoE, and byte reports."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

import torch
from torch import nn
from tqdm.auto import tqdm

KEEP_FULL_PRECISION = ("lm_head", "mlp.gate")  # see the module docstring for why


@dataclass
class QuantConfig:
    """How the policy's linear layers are quantized (``enabled: false`` keeps bf16 LoRA/DoRA)."""

    enabled: bool = True
    quant_type: str = "nf4"
    double_quant: bool = True
    blocksize: int = 64
    compute_dtype: str = "bfloat16"  # matmul dtype after dequantization
    keep_full_precision: list[str] = field(default_factory=lambda: list(KEEP_FULL_PRECISION))

    def __post_init__(self) -> None:
        if self.quant_type not in ("nf4", "fp4"):
            raise ValueError(f"quant_type must be 'nf4' or 'fp4', got {self.quant_type!r}")
        if self.blocksize not in (64, 128, 256, 512, 1024, 2048, 4096):
            raise ValueError(f"bitsandbytes 4-bit blocksize must be a power of two in 64..4096, got {self.blocksize}")

    @property
    def torch_compute_dtype(self) -> torch.dtype:
        return getattr(torch, self.compute_dtype)

    def bnb_config(self):
        """The same settings as a transformers ``BitsAndBytesConfig`` (for ``from_pretrained``)."""
        from transformers import BitsAndBytesConfig

        return BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type=self.quant_type,
            bnb_4bit_use_double_quant=self.double_quant,
            bnb_4bit_compute_dtype=self.torch_compute_dtype,
            bnb_4bit_quant_storage=torch.uint8,
            llm_int8_skip_modules=list(self.keep_full_precision),
        )


def is_quantized_target(full_name: str, keep: Iterable[str]) -> bool:
    """transformers' own matching rule for ``llm_int8_skip_modules`` (so both paths agree:
    ``mlp.gate`` keeps the router but not ``mlp.experts.0.gate_proj``)."""
    from transformers.quantizers.quantizers_utils import should_convert_module

    return should_convert_module(full_name, list(keep))


def _nf4_linear(linear: nn.Linear, config: QuantConfig, device: torch.device | str) -> nn.Module:
    import bitsandbytes as bnb

    quantized = bnb.nn.Linear4bit(
        linear.in_features,
        linear.out_features,
        bias=linear.bias is not None,
        compute_dtype=config.torch_compute_dtype,
        compress_statistics=config.double_quant,
        quant_type=config.quant_type,
        quant_storage=torch.uint8,
        device="meta",
    )
    quantized.weight = bnb.nn.Params4bit(
        linear.weight.data.to("cpu"),
        requires_grad=False,
        blocksize=config.blocksize,
        compress_statistics=config.double_quant,
        quant_type=config.quant_type,
        quant_storage=torch.uint8,
        module=quantized,
    )
    if linear.bias is not None:
        quantized.bias = nn.Parameter(linear.bias.data.to(config.torch_compute_dtype), requires_grad=False)
    # bitsandbytes' packed AVX512-BF16 CPU kernel stays off until a caller allows it
    # (leanloop.training.packed_nf4), so a model behaves alike on every CPU; the layer keeps the
    # replaced one's train/eval mode
    quantized.support_avx512bf16_for_cpu = False
    quantized.train(linear.training)
    return quantized.to(device)  # Params4bit quantizes when it is moved to a device


@torch.no_grad()
def quantize_nf4_(model: nn.Module, config: QuantConfig | None = None, device: torch.device | str = "cpu") -> nn.Module:
    """Replace every ``nn.Linear`` not kept in full precision by a bitsandbytes ``Linear4bit``,
    one decoder layer at a time (host memory holds the bf16 layer, the device gets only NF4)."""
    config = config or QuantConfig()
    layers = getattr(getattr(model, "model", model), "layers", None)
    groups: list[tuple[str, nn.Module]] = []
    if layers is not None:
        prefix = "model.layers" if hasattr(model, "model") else "layers"
        groups += [(f"{prefix}.{i}", layer) for i, layer in enumerate(layers)]
    groups.append(("", model))  # whatever lies outside the decoder layers (lm_head is kept)
    replaced = 0
    for prefix, root in tqdm(groups, desc="quantize NF4", unit="layer", leave=False, disable=len(groups) < 8):
        targets = [(name, m) for name, m in root.named_modules() if type(m) is nn.Linear]
        for name, linear in targets:
            full = f"{prefix}.{name}" if prefix else name
            if not is_quantized_target(full, config.keep_full_precision):
                continue
            parent_name, _, leaf = name.rpartition(".")
            parent = root.get_submodule(parent_name) if parent_name else root
            setattr(parent, leaf, _nf4_linear(linear, config, device))
            replaced += 1
    if replaced == 0:
        raise ValueError(
            "no nn.Linear left to quantize: is the model already quantized, or are all "
            f"modules in keep_full_precision={config.keep_full_precision}?"
        )
    model.to(device)  # norms, router, embeddings, lm_head (already-quantized Params4bit just move)
    model.is_loaded_in_4bit = True  # what PEFT's prepare_model_for_kbit_training looks for
    model.is_quantized = True
    return model


def load_unfused_nf4(
    checkpoint: str | Path, config: QuantConfig | None = None, device_map: str | dict[str, Any] = "auto", **kwargs: Any
) -> nn.Module:
    """Load a Qwen3-MoE checkpoint (a local folder or a hub id when the hub is reachable) as the
    unfused model with NF4 experts and attention. transformers streams the shards through host
    memory and quantizes module by module; ``device_map="auto"`` fills the GPU with NF4 weights.
    """
    from leanloop.training.moe import UnfusedQwen3MoeForCausalLM

    config = config or QuantConfig()
    return UnfusedQwen3MoeForCausalLM.from_pretrained(
        str(checkpoint),
        quantization_config=config.bnb_config(),
        device_map=device_map,
        dtype=config.torch_compute_dtype,
        **kwargs,
    )


# ---------------------------------------------------------------------------- byte accounting


def _quant_state_tensors(state: Any) -> list[torch.Tensor]:
    tensors = [t for t in (state.absmax, state.code, state.offset) if isinstance(t, torch.Tensor)]
    if getattr(state, "state2", None) is not None:
        tensors += _quant_state_tensors(state.state2)
    return tensors


def _group(name: str) -> str:
    if ".experts." in name:
        return "experts"
    if ".self_attn." in name and name.rsplit(".", 2)[-2].endswith("_proj"):
        return "attention"
    if ".mlp.gate." in name or name.endswith(".mlp.gate.weight"):
        return "router"
    if "embed_tokens" in name:
        return "embeddings"
    if name.startswith("lm_head"):
        return "lm_head"
    if "norm" in name:
        return "norms"
    return "other"


def parameter_bytes(model: nn.Module) -> dict[str, int]:
    """Bytes the weights really occupy, by group (4-bit payload plus its quantization statistics;
    tensors shared between modules are counted once)."""
    seen: set[int] = set()
    totals: dict[str, int] = {}

    def add(group: str, tensor: torch.Tensor) -> None:
        if tensor.device.type != "meta":
            key = tensor.untyped_storage().data_ptr()
            if key in seen:
                return
            seen.add(key)
        totals[group] = totals.get(group, 0) + tensor.numel() * tensor.element_size()

    for name, param in model.named_parameters():
        group = _group(name)
        add(group, param)
        state = getattr(param, "quant_state", None)
        if state is not None:
            for tensor in _quant_state_tensors(state):
                add(group, tensor)
    totals["total"] = sum(totals.values())
    return totals


def estimate_bytes(
    model: nn.Module, config: QuantConfig | None = None, full_precision_bytes: int = 2
) -> dict[str, int]:
    """What :func:`parameter_bytes` would report after :func:`quantize_nf4_`, computed from the
    module tree alone (works on a meta-device 30B model). ``config=None`` gives the bf16 size."""
    totals: dict[str, int] = {}
    quantized_weights = set()
    if config is not None and config.enabled:
        for name, module in model.named_modules():
            if type(module) is nn.Linear and is_quantized_target(name, config.keep_full_precision):
                quantized_weights.add(f"{name}.weight")
    for name, param in model.named_parameters():
        n = param.numel()
        if name in quantized_weights:
            blocks = math.ceil(n / config.blocksize)
            size = math.ceil(n / 2)  # two 4-bit codes per byte
            size += 16 * 4  # the 16-entry NF4/FP4 code book (fp32), one per quantized weight
            if config.double_quant:
                size += blocks  # uint8 absmax per block
                size += 4 * math.ceil(blocks / 256) + 4  # fp32 second-level absmax + offset
                size += 256 * 4  # each weight's second-level state carries its 8-bit code book
            else:
                size += 4 * blocks  # fp32 absmax per block
        else:
            size = n * full_precision_bytes
        group = _group(name)
        totals[group] = totals.get(group, 0) + size
    totals["total"] = sum(totals.values())
    return totals


@dataclass
class MemoryReport:
    """bf16 vs NF4 parameter bytes of one architecture."""

    name: str
    parameters: int
    bf16_bytes: dict[str, int]
    nf4_bytes: dict[str, int]
    measured: bool  # True: bytes of real tensors; False: from the module tree (meta device)

    @property
    def ratio(self) -> float:
        return self.bf16_bytes["total"] / self.nf4_bytes["total"]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio}

    def table(self) -> str:
        gb = 1e9
        lines = [
            f"{self.name}: {self.parameters / 1e9:.3f} B parameters "
            f"({'measured' if self.measured else 'estimated from the module tree'})",
            f"  {'group':<11} {'bf16 GB':>9} {'NF4 GB':>9}",
        ]
        for group in sorted(k for k in self.bf16_bytes if k != "total"):
            lines.append(f"  {group:<11} {self.bf16_bytes[group] / gb:>9.3f} {self.nf4_bytes.get(group, 0) / gb:>9.3f}")
        lines.append(
            f"  {'total':<11} {self.bf16_bytes['total'] / gb:>9.3f} "
            f"{self.nf4_bytes['total'] / gb:>9.3f}   ratio {self.ratio:.2f}x"
        )
        return "\n".join(lines)


def _layer_scaled(arch, fn) -> dict[str, int]:
    """``fn(meta model)`` for ``arch``, computed on 1- and 2-layer copies and extrapolated: every
    decoder layer of a Qwen3-MoE is identical, and 48 layers of 128 experts are 18k modules to build."""
    from dataclasses import replace

    from leanloop.training.moe import meta_model

    one = fn(meta_model(replace(arch, num_hidden_layers=1)))
    two = fn(meta_model(replace(arch, num_hidden_layers=2)))
    extra = arch.num_hidden_layers - 1
    return {k: one.get(k, 0) + extra * (two.get(k, 0) - one.get(k, 0)) for k in set(one) | set(two)}


def memory_report(arch, name: str, config: QuantConfig | None = None) -> MemoryReport:
    """bf16 vs NF4 parameter bytes of an architecture, from its module tree (meta device)."""
    config = config or QuantConfig()
    count = _layer_scaled(arch, lambda m: {"total": sum(p.numel() for p in m.parameters())})["total"]
    return MemoryReport(
        name=name,
        parameters=count,
        bf16_bytes=_layer_scaled(arch, lambda m: estimate_bytes(m, None)),
        nf4_bytes=_layer_scaled(arch, lambda m: estimate_bytes(m, config)),
        measured=False,
    )


def paper_memory_report(config: QuantConfig | None = None) -> MemoryReport:
    """bf16 vs NF4 bytes of Qwen3-Coder-30B-A3B (the seed reports ~60 GB -> ~16.7 GB)."""
    from leanloop.training.moe import PAPER_ARCH, PAPER_MODEL_ID

    return memory_report(PAPER_ARCH, PAPER_MODEL_ID, config)
