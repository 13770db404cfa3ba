"""The policy being trained: which checkpoint, full fine-tuning or LoRA / QLoRA, the reference."""

from __future__ import annotations

import copy
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from leanloop.artifacts import ManifestError, resolve_artifact
from leanloop.training.models import ModelSpec, load_model
from leanloop.training.packed_nf4 import allow_packed_cpu_kernel
from rl.config import AdapterConfig, PolicyConfig


def spec_exists(spec: ModelSpec) -> bool:
    if spec.preset is not None:
        return True
    run = spec.run_dir()
    if run is not None:  # a run exists once it finished (its manifest is what says so)
        try:
            return resolve_artifact(run).outputs.is_dir()
        except (ManifestError, FileNotFoundError):
            return False
    from leanloop.paths import resolve_shared

    local = resolve_shared(spec.path)
    if spec.path.startswith(("/", ".", "shared://")) or local.exists():
        return local.is_dir()
    return True  # a hub id: resolved from the local HF cache when loaded (an error there names it)


def resolve_base(policy: PolicyConfig) -> tuple[ModelSpec, bool]:
    """The first existing checkpoint of ``base`` then ``fallbacks``, and whether it is a fallback."""
    for index, spec in enumerate([policy.base, *policy.fallbacks]):
        if spec_exists(spec):
            return spec, index > 0
    names = ", ".join(s.name for s in [policy.base, *policy.fallbacks])
    raise FileNotFoundError(
        f"none of the configured starting checkpoints exists ({names}). Run the stage that makes "
        "one (`make sft`, or `make pretrain` for the fallback) or name a checkpoint in policy.base"
    )


@dataclass
class Policy:
    model: Any  # the trainable model (a PeftModel with an adapter)
    reference: Any | None  # a frozen copy (full fine-tuning with beta > 0), else None
    adapter: AdapterConfig
    unquantized: str | None  # qlora: where the full-precision base weights are (for export)
    scratch: tempfile.TemporaryDirectory | None = None


def build_policy(spec: ModelSpec, tokenizer: Any, policy: PolicyConfig, beta: float) -> Policy:
    adapter = policy.adapter
    scratch = None
    unquantized = None
    if adapter.kind == "qlora":
        from peft import prepare_model_for_kbit_training
        from transformers import BitsAndBytesConfig

        if spec.preset is not None:
            # bitsandbytes quantizes while loading weights: write the preset's initial weights first
            scratch = tempfile.TemporaryDirectory(prefix="rl-qlora-base-")
            load_model(spec, tokenizer=tokenizer).save_pretrained(scratch.name)
            spec = ModelSpec(name=scratch.name, dtype=spec.dtype, attn_implementation=spec.attn_implementation)
        unquantized = spec.weights_location()
        quant = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=adapter.double_quant,
            bnb_4bit_compute_dtype=getattr(torch, adapter.compute_dtype),
        )
        model = load_model(spec, tokenizer=tokenizer, quantization_config=quant)
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=policy.gradient_checkpointing)
        # the policy trains and its reference (adapter off) log-probs are compared with its own:
        # never the packed CPU kernel, whose eval-mode forwards differ and rewrite the weights
        allow_packed_cpu_kernel(model, False)
    else:
        model = load_model(spec, tokenizer=tokenizer)
    # from_pretrained returns eval mode and transformers recomputes checkpointed layers only in train
    # mode: without this the update under vLLM rollouts (which never toggle the mode) kept every activation
    model.train()
    reference = None
    if beta > 0 and adapter.kind == "none":
        reference = copy.deepcopy(model).eval()
        reference.requires_grad_(False)
    if adapter.kind != "none":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(
            model,
            LoraConfig(
                r=adapter.r,
                lora_alpha=adapter.alpha,
                lora_dropout=adapter.dropout,
                target_modules=list(adapter.target_modules),
                task_type="CAUSAL_LM",
            ),
        )
    if policy.gradient_checkpointing and adapter.kind != "qlora":
        model.gradient_checkpointing_enable()
        if adapter.kind == "lora":
            model.enable_input_require_grads()
    return Policy(model, reference, adapter, unquantized, scratch)


def export_policy(policy: Policy, tokenizer: Any, final_dir: Path) -> dict[str, Any]:
    """Save a model ``from_pretrained`` loads as a whole (adapters merged), plus the adapter itself."""
    final_dir = Path(final_dir)
    model = policy.model
    info: dict[str, Any] = {"adapter": policy.adapter.kind}
    if policy.adapter.kind == "none":
        model.save_pretrained(final_dir)
    else:
        adapter_dir = final_dir / "adapter"
        model.save_pretrained(adapter_dir)
        info["adapter_dir"] = "adapter"
        if policy.adapter.kind == "lora":
            model.merge_and_unload().save_pretrained(final_dir)
        else:
            # NF4 weights cannot be merged exactly: merge the adapter into the full-precision base
            from peft import PeftModel
            from transformers import AutoModelForCausalLM

            base = AutoModelForCausalLM.from_pretrained(
                policy.unquantized, dtype=getattr(torch, policy.adapter.compute_dtype)
            )
            PeftModel.from_pretrained(base, adapter_dir).merge_and_unload().save_pretrained(final_dir)
            info["merged_into"] = str(policy.unquantized)
    tokenizer.save_pretrained(final_dir)
    return info


def unwrap(model: Any) -> Any:
    return model.get_base_model() if hasattr(model, "get_base_model") else model
