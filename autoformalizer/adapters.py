"""LoRA / DoRA adapters on the unfused Qwen3-MoE (QLoRA / QDoRA when the base is NF4), via PEFT."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from torch import nn

ATTENTION_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")
EXPERT_PROJECTIONS = ("gate_proj", "up_proj", "down_proj")


@dataclass
class AdapterConfig:
    """PEFT adapter settings; ``use_dora`` picks DoRA (QDoRA on an NF4 base) over LoRA (QLoRA)."""

    use_dora: bool = False
    attention_rank: int = 64
    attention_alpha: int = 128
    expert_rank: int = 8
    expert_alpha: int = 16
    attention_targets: list[str] = field(default_factory=lambda: list(ATTENTION_PROJECTIONS))
    expert_targets: list[str] = field(default_factory=lambda: list(EXPERT_PROJECTIONS))
    dropout: float = 0.05
    gradient_checkpointing: bool = False

    def __post_init__(self) -> None:
        unknown = set(self.attention_targets) - set(ATTENTION_PROJECTIONS)
        unknown |= set(self.expert_targets) - set(EXPERT_PROJECTIONS)
        if unknown:
            raise ValueError(
                f"unknown adapter targets {sorted(unknown)}; attention targets are "
                f"{ATTENTION_PROJECTIONS}, expert targets {EXPERT_PROJECTIONS}"
            )
        if not (self.attention_targets or self.expert_targets):
            raise ValueError("no adapter targets: set attention_targets and/or expert_targets")

    @property
    def attention_regex(self) -> str:
        return rf"model\.layers\.\d+\.self_attn\.(?:{'|'.join(self.attention_targets)})"

    @property
    def expert_regex(self) -> str:
        return rf"model\.layers\.\d+\.mlp\.experts\.\d+\.(?:{'|'.join(self.expert_targets)})"

    def lora_config(self):
        from peft import LoraConfig

        parts = [
            p
            for p, names in ((self.attention_regex, self.attention_targets), (self.expert_regex, self.expert_targets))
            if names
        ]
        expert_key = rf"mlp\.experts\.\d+\.(?:{'|'.join(self.expert_targets) or 'none'})"
        return LoraConfig(
            # a regex string is matched with re.fullmatch against full module names, so it names
            # exactly the unfused expert Linear modules and the attention projections
            target_modules="|".join(f"(?:{p})" for p in parts),
            r=self.attention_rank,
            lora_alpha=self.attention_alpha,
            rank_pattern={expert_key: self.expert_rank},
            alpha_pattern={expert_key: self.expert_alpha},
            lora_dropout=self.dropout,
            use_dora=self.use_dora,
            bias="none",
            task_type="CAUSAL_LM",
        )


def _is_quantized(model: nn.Module) -> bool:
    return bool(getattr(model, "is_loaded_in_4bit", False)) or any(
        type(m).__name__ == "Linear4bit" for m in model.modules()
    )


def expected_targets(model: nn.Module, config: AdapterConfig) -> list[str]:
    pattern = re.compile(f"(?:{config.attention_regex})|(?:{config.expert_regex})")
    return [name for name, _ in model.named_modules() if pattern.fullmatch(name)]


def prepare_for_adapters(model: nn.Module, config: AdapterConfig) -> nn.Module:
    """An NF4 base: frozen, its non-4-bit weights (norms, embeddings, lm_head) upcast to fp32 for stable
    adapter gradients, input grads wired for gradient checkpointing; else checkpointing as configured."""
    from peft import prepare_model_for_kbit_training

    if _is_quantized(model):
        return prepare_model_for_kbit_training(
            model,
            use_gradient_checkpointing=config.gradient_checkpointing,
            gradient_checkpointing_kwargs={"use_reentrant": False},
        )
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    return model


REFERENCE_ADAPTER = "reference"


def continue_adapters(model: nn.Module, adapter_dir: str, config: AdapterConfig):
    """Trained adapters (``adapter_dir``) on ``model``, trainable as ``default``, plus a frozen copy
    named ``reference`` (a KL reference that is the starting policy exactly, at no second base)."""
    from peft import PeftModel

    peft_model = PeftModel.from_pretrained(prepare_for_adapters(model, config), adapter_dir, is_trainable=True)
    peft_model.load_adapter(adapter_dir, adapter_name=REFERENCE_ADAPTER, is_trainable=False)
    peft_model.set_adapter("default")  # trains default; every other adapter (the reference) is frozen
    return peft_model


def apply_adapters(model: nn.Module, config: AdapterConfig | None = None):
    """Wrap the unfused (optionally NF4) model in a PEFT LoRA/DoRA model; returns the PeftModel."""
    from peft import get_peft_model

    from leanloop.training.moe import UNFUSED_MODEL_TYPE

    config = config or AdapterConfig()
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type != UNFUSED_MODEL_TYPE:
        raise ValueError(
            f"adapters need the unfused Qwen3-MoE (model_type {UNFUSED_MODEL_TYPE!r}), got {model_type!r}: "
            "run leanloop.training.moe.unfuse_experts_(model) first (PEFT would otherwise remap the expert "
            "targets onto fused parameters)"
        )
    expected = expected_targets(model, config)
    if not any(".experts." in n for n in expected) and config.expert_targets:
        raise ValueError("no per-expert Linear modules found; is the model unfused?")
    peft_model = get_peft_model(prepare_for_adapters(model, config), config.lora_config())
    wrapped = {
        name.removeprefix("base_model.model.")
        for name, m in peft_model.named_modules()
        if hasattr(m, "lora_A") and hasattr(m, "base_layer")
    }
    missing = sorted(set(expected) - wrapped)
    if missing:
        raise RuntimeError(
            f"PEFT left {len(missing)} target modules without an adapter (first: {missing[0]}); "
            "it may have remapped expert targets to fused parameters"
        )
    return peft_model


@dataclass
class TrainableReport:
    method: str
    trainable: int
    total: int
    by_group: dict[str, int]
    wrapped_modules: dict[str, int]

    @property
    def percent(self) -> float:
        return 100.0 * self.trainable / max(self.total, 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "trainable": self.trainable,
            "total": self.total,
            "percent": self.percent,
            "by_group": self.by_group,
            "wrapped_modules": self.wrapped_modules,
        }

    def __str__(self) -> str:
        groups = ", ".join(f"{k} {v:,}" for k, v in sorted(self.by_group.items()))
        return (
            f"{self.method}: trainable {self.trainable:,} of {self.total:,} parameters ({self.percent:.3f}%): {groups}"
        )


def _stored_numel(param: nn.Parameter) -> int:
    # a Params4bit packs two weights per uint8; count the weights it stands for
    shape = getattr(getattr(param, "quant_state", None), "shape", None)
    return int(shape.numel()) if shape is not None else param.numel()


def trainable_report(peft_model: nn.Module) -> TrainableReport:
    by_group: dict[str, int] = {}
    trainable = total = 0
    for name, param in peft_model.named_parameters():
        n = _stored_numel(param)
        total += n
        if not param.requires_grad:
            continue
        trainable += n
        where = "expert" if ".experts." in name else "attention" if ".self_attn." in name else "other"
        kind = "dora_magnitude" if "lora_magnitude_vector" in name else "lora"
        by_group[f"{where}_{kind}"] = by_group.get(f"{where}_{kind}", 0) + n
    wrapped = {"attention": 0, "expert": 0}
    for name, module in peft_model.named_modules():
        if hasattr(module, "lora_A") and hasattr(module, "base_layer"):
            wrapped["expert" if ".experts." in name else "attention"] += 1
    config = next(iter(peft_model.peft_config.values()))
    quantized = _is_quantized(peft_model)
    method = ("Q" if quantized else "") + ("DoRA" if config.use_dora else "LoRA")
    return TrainableReport(method, trainable, total, by_group, wrapped)
