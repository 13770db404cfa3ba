"""Build the autoformalizer's policy: unfused Qwen3-MoE -> NF4 (optional) -> LoRA/DoRA adapters.

model, tokenizer = build_policy(config.policy)
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Callable

import torch

from autoformalizer.adapters import AdapterConfig, apply_adapters, continue_adapters, trainable_report
from autoformalizer.config import PolicyConfig
from leanloop.training.moe import UnfusedQwen3MoeForCausalLM, tiny_qwen3_moe
from autoformalizer.quantize import QuantConfig, load_unfused_nf4, quantize_nf4_
from leanloop.training.packed_nf4 import allow_packed_cpu_kernel

TINY_PRESET = "qwen3-moe-tiny"


def policy_spec(config: PolicyConfig):
    """The :class:`~leanloop.training.models.ModelSpec` naming the same source (run checks, base names)."""
    from leanloop.training.models import ModelSpec

    return ModelSpec(name=config.name)


def _location(config: PolicyConfig) -> str:
    """The folder or hub id ``from_pretrained`` reads; a run is checked against its manifest first."""
    from leanloop.training.inputs import check_model_run

    spec = policy_spec(config)
    run = spec.run_dir()
    if run is not None:
        check_model_run(run)
    elif config.name.startswith("artifacts://"):
        raise FileNotFoundError(
            f"policy.name {config.name}: no finished run at {spec.run_dir() or config.name}; "
            "run the stage that produces it first (make autoformalizer-train)"
        )
    return spec.weights_location()


def load_policy_tokenizer(config: PolicyConfig):
    """The tiny preset's real Qwen vocabulary, or the checkpoint's / run's own tokenizer (cached per
    process by :func:`leanloop.training.models.load_tokenizer`: do not mutate it)."""
    from leanloop.training.models import load_tokenizer

    return load_tokenizer("qwen3" if config.name == TINY_PRESET else _location(config))


def build_base(config: PolicyConfig, device_map: str | None = None, packed_cpu_kernel: bool = False):
    """The unfused (and, with ``quant.enabled``, NF4) base model, without adapters.

    ``packed_cpu_kernel``: whether NF4 layers may take bitsandbytes' packed AVX512-BF16 CPU kernel
    (see :mod:`leanloop.training.packed_nf4`): only for a model that is never trained afterwards."""
    dtype = getattr(torch, config.dtype)
    if config.name == TINY_PRESET:
        model = tiny_qwen3_moe(config.arch, seed=config.seed, dtype=dtype)
        if config.quant.enabled:
            device = "cuda" if torch.cuda.is_available() else "cpu"
            quantize_nf4_(model, config.quant, device=device)
    else:
        location = _location(config)
        device_map = device_map or config.device_map
        if not config.quant.enabled:
            return UnfusedQwen3MoeForCausalLM.from_pretrained(location, dtype=dtype, device_map=device_map)
        model = load_unfused_nf4(location, config.quant, device_map=device_map)
    if config.quant.enabled:
        allow_packed_cpu_kernel(model, packed_cpu_kernel)
    return model


BASE_POLICY_FILE = "base_policy.json"  # beside final/adapter: the policy config its base was built from


def stage1_start(config: PolicyConfig) -> tuple[Path, PolicyConfig] | None:
    """(Stage 1's adapter folder, the config of the base it was trained on) when ``config`` continues
    a Stage-1 run's adapters (``stage1: continue``), else None."""
    if config.stage1 != "continue" or not config.name.startswith("artifacts://autoformalizer/"):
        return None
    adapter_dir = Path(_location(config)) / "adapter"
    saved = adapter_dir / BASE_POLICY_FILE
    if not saved.is_file():
        raise FileNotFoundError(
            f"{saved} not found: {config.name} predates continued adapters (its export "
            "did not record its base); retrain Stage 1 or set policy.stage1: merge"
        )
    from leanloop.training.moe import MoEArchConfig

    values = json.loads(saved.read_text())
    base = PolicyConfig(
        **{
            **values,
            "arch": MoEArchConfig(**values["arch"]),
            "quant": QuantConfig(**values["quant"]),
            "adapters": AdapterConfig(**values["adapters"]),
        }
    )
    return adapter_dir, replace(base, device_map=config.device_map)


def build_policy(config: PolicyConfig, adapters: bool = True, packed_cpu_kernel: bool = False):
    """(model, tokenizer): the base with PEFT adapters attached (trainable) unless ``adapters=False``.
    From a Stage-1 run with ``stage1: continue``: Stage 1's base and its trained adapters (trainable),
    with a frozen ``reference`` copy (:func:`autoformalizer.adapters.continue_adapters`).
    ``packed_cpu_kernel=True`` only for inference (see :func:`build_base`)."""
    if adapters and packed_cpu_kernel:
        raise ValueError(
            "a policy with trainable adapters cannot take the packed CPU kernel: "
            "its eval-mode forwards would change the weights the training forwards use"
        )
    start = stage1_start(config) if adapters else None
    if start is not None:
        adapter_dir, base = start
        return continue_adapters(build_base(base), str(adapter_dir), config.adapters), load_policy_tokenizer(config)
    model = build_base(config, packed_cpu_kernel=packed_cpu_kernel)
    if adapters:
        model = apply_adapters(model, config.adapters)
    return model, load_policy_tokenizer(config)


def full_precision(config: PolicyConfig) -> PolicyConfig:
    """The same source without quantization (the weights NF4 was made from)."""
    return replace(config, quant=QuantConfig(**{**config.quant.__dict__, "enabled": False}))


def export_policy(model: Any, tokenizer: Any, config: PolicyConfig, final_dir: str | Path) -> dict[str, Any]:
    """``final/adapter/`` (the trained adapter) and ``final/`` (adapter merged into the full-precision
    base, Hugging Face format, with the tokenizer). The base is rebuilt from ``config`` on the host
    (the tiny preset is deterministic in its seed; a checkpoint is read again), never dequantized."""
    from peft import PeftModel

    final_dir = Path(final_dir)
    adapter_dir = final_dir / "adapter"
    model.save_pretrained(adapter_dir, selected_adapters=["default"])
    start = stage1_start(config)
    base_config = start[1] if start is not None else config  # a continued run's base is Stage 1's
    (adapter_dir / BASE_POLICY_FILE).write_text(json.dumps(asdict(base_config), indent=1) + "\n")
    base = build_base(full_precision(base_config), device_map="cpu")
    merged = PeftModel.from_pretrained(base, adapter_dir).merge_and_unload()
    merged.save_pretrained(final_dir)
    tokenizer.save_pretrained(final_dir)
    report = trainable_report(model)
    return {
        "adapter_dir": "adapter",
        "merged_into": config.name,
        "method": report.method,
        "trainable_parameters": report.trainable,
    }


def policy_identity(model: Any, tokenizer: Any, config: PolicyConfig) -> dict[str, Any]:
    """The manifest's ``model`` section: base, architecture, vocabulary, tokenizer fingerprint (checked
    by later stages), plus the quantization and adapter recipe."""
    from leanloop.training.inputs import model_identity

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    report = trainable_report(model) if hasattr(model, "peft_config") else None
    return {
        **model_identity(base, tokenizer, policy_spec(config).base_name()),
        "start": config.name,
        "quant": dict(config.quant.__dict__),
        "adapters": dict(config.adapters.__dict__),
        "trainable": report.to_dict() if report else None,
    }


def make_generate(
    model,
    tokenizer,
    max_new_tokens: int = 256,
    do_sample: bool = False,
    temperature: float = 1.0,
    seed: int | None = None,
) -> Callable[[str], str]:
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
        output = model.generate(
            **encoded,
            max_new_tokens=max_new_tokens,
            do_sample=do_sample,
            temperature=temperature if do_sample else None,
            eos_token_id=eos,
            pad_token_id=tokenizer.pad_token_id,
        )
        model.train(was_training)
        generate.tokens += int(output.shape[1] - encoded["input_ids"].shape[1])
        return tokenizer.decode(output[0, encoded["input_ids"].shape[1] :], skip_special_tokens=True)

    generate.tokens = 0  # generated tokens so far (tokens/s in the evaluation)
    return generate
