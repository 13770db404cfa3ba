"""Memory plan of a training run: peak GB per GPU, term by term, before any GPU is asked for.

``python -m leanloop.plan --config configs/sft/paper.yaml [--config B.yaml] [dotted overrides] [--json PATH]``
(``make plan CONFIG="..."``; every stage's ``--dry_run true`` prints the same table). The stage's own
parser resolves the config; the named architecture is built on the meta device (its config.json when
the checkpoint is here, else :data:`ARCHITECTURES`, the published configs) for the parameter counts,
and one forward of its body on meta tensors under ``saved_tensors_hooks`` measures the activation
bytes per layer at the configured micro-batch and length (attention counted as flash attention saves
it: q, k, v, output, log-sum-exp). Sharding, optimizer states, the loss head, KV caches, vLLM shares
and resident models are arithmetic, named in the table's notes. Exit status 1 when the plan does not fit.
How to read a plan: docs/results/plan.md.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import re
import sys
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from leanloop.paths import REPO_ROOT

GB = 1e9
DEFAULT_GPU_GB = 80.0
HEADROOM = 0.10
"""The share of the GPU a paper config leaves free (fragmentation, CUDA context, NCCL buffers)."""
CUDA_CONTEXT_GB = 1.0  # CUDA context and cuBLAS/NCCL workspaces, outside the allocator
NF4_BYTES = 0.5 + 1 / 64 + 4 / (64 * 256)  # 4 bits + 8-bit absmax per 64 + fp32 per 256 absmax (double quant)


def _dense(hidden: int, intermediate: int, layers: int, heads: int, tie: bool, kv: int = 8, **more: Any) -> dict:
    return dict(
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        head_dim=128,
        tie_word_embeddings=tie,
        **more,
    )


def _encoder(hidden: int, intermediate: int, layers: int, heads: int) -> dict:
    return dict(
        vocab_size=50368,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        max_position_embeddings=8192,
    )


# Published configs of the checkpoints the paper configs name (each checkpoint's config.json on the
# Hugging Face hub, https://huggingface.co/<id>/blob/main/config.json), used when no local copy is here.
ARCHITECTURES: dict[str, tuple[str, dict[str, Any], str]] = {
    "qwen3-0.6b": ("qwen3", _dense(1024, 3072, 28, 16, tie=True), "Qwen/Qwen3-0.6B"),
    "qwen3-1.7b": ("qwen3", _dense(2048, 6144, 28, 16, tie=True), "Qwen/Qwen3-1.7B"),
    "qwen3-4b": ("qwen3", _dense(2560, 9728, 36, 32, tie=True), "Qwen/Qwen3-4B"),
    "qwen3-8b": ("qwen3", _dense(4096, 12288, 36, 32, tie=False), "Qwen/Qwen3-8B"),
    "qwen3-14b": ("qwen3", _dense(5120, 17408, 40, 40, tie=False), "Qwen/Qwen3-14B"),
    "qwen3-32b": ("qwen3", _dense(5120, 25600, 64, 64, tie=False), "Qwen/Qwen3-32B"),
    "qwen3-30b-a3b": (
        "qwen3_moe",
        _dense(2048, 6144, 48, 32, tie=False, kv=4, moe_intermediate_size=768, num_experts=128, num_experts_per_tok=8),
        "Qwen/Qwen3-30B-A3B (Qwen3-Coder-30B-A3B-Instruct: the same shape)",
    ),
    "modernbert-base": ("modernbert", _encoder(768, 1152, 22, 12), "answerdotai/ModernBERT-base"),
    "modernbert-large": ("modernbert", _encoder(1024, 2624, 28, 16), "answerdotai/ModernBERT-large"),
}
QWEN3_VOCAB = 151_936

# where each stage's config names its model (first match wins)
MODEL_KEYS = ("model.init_args.base", "model.policy.base", "model.base", "model.policy")


class PlanError(ValueError):
    """A config the planner cannot size (an unknown architecture, a missing key)."""


# -- the workload a resolved config describes -------------------------------------------------------
@dataclass
class ModelRef:
    name: str
    dtype: str = "bfloat16"
    expect_base: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)


@dataclass
class Workload:
    stage: str
    model: ModelRef
    micro_batch: int
    seq_len: int
    head: str = "full"
    """full: logits over every position (transformers' loss); few: a few scored positions per row;
    chunked: trl's ChunkedLogProbFunction over the completion (GRPO)."""
    head_tokens: int | None = None
    checkpointing: bool = False
    precision: str = "32-true"
    strategy: str = "ddp"
    """ddp, zero2, zero3, zero3_offload (optimizer and parameters on the host), zero2_offload."""
    world: int = 1
    adapter: str = "none"  # none, lora, qlora
    lora: tuple | None = None
    """(r, target module names), or ("autoformalizer", attention r, expert r) for its unfused MoE."""
    quantized: bool = False
    encoder: bool = False
    generation: dict[str, Any] | None = None
    """rollouts: sequences, tokens per sequence, backend."""
    resident: list[tuple[str, ModelRef, str]] = field(default_factory=list)
    """(role, model, why) of every other model kept on the GPU."""
    vllm_shares: list[tuple[str, float, str]] = field(default_factory=list)
    """(role, gpu_memory_utilization, phase) of colocated vLLM engines."""
    notes: list[str] = field(default_factory=list)


def _get(tree: Any, dotted: str, default: Any = None) -> Any:
    for part in dotted.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return default
        tree = tree[part]
    return tree


def _model_ref(tree: dict) -> ModelRef | None:
    for key in MODEL_KEYS:
        spec = _get(tree, key)
        if isinstance(spec, dict) and isinstance(spec.get("name"), str):
            return ModelRef(
                spec["name"], spec.get("dtype") or "float32", spec.get("expect_base"), dict(spec.get("overrides") or {})
            )
    return None


def _world(trainer: dict) -> int:
    devices = trainer.get("devices", 1)
    if isinstance(devices, list):
        devices = len(devices)
    elif not isinstance(devices, int) or isinstance(devices, bool):
        devices = int(devices) if str(devices).isdigit() else 1
    nodes = trainer.get("num_nodes") or 1
    return max(1, devices) * int(nodes)


def _strategy(trainer: dict) -> str:
    strategy = trainer.get("strategy") or "auto"
    if isinstance(strategy, dict):
        args = strategy.get("init_args") or {}
        if "DeepSpeed" in str(strategy.get("class_path", "")):
            stage = int(args.get("stage", 2))
            offload = bool(args.get("offload_optimizer")) or bool(args.get("offload_parameters"))
            return f"zero{stage}" + ("_offload" if offload else "")
        return "ddp"
    text = str(strategy)
    match = re.match(r"deepspeed_stage_(\d)(_offload)?", text)
    if match:
        return f"zero{match.group(1)}{match.group(2) or ''}"
    return "ddp"


def workload(stage: str, config: dict) -> Workload:
    """What the resolved config of ``stage`` trains, at what size, beside what."""
    model = _model_ref(config)
    if model is None:
        raise PlanError(f"no model named under {' / '.join(MODEL_KEYS)} in the {stage} config")
    trainer = config.get("trainer") or {}
    m, d = config.get("model") or {}, config.get("data") or {}
    work = Workload(
        stage=stage,
        model=model,
        micro_batch=int(d.get("batch_size") or 1),
        seq_len=int(d.get("max_length") or 512),
        precision=str(trainer.get("precision") or "32-true"),
        strategy=_strategy(trainer),
        world=_world(trainer),
        checkpointing=bool(m.get("gradient_checkpointing")),
    )
    if work.world == 1 and work.strategy == "ddp":
        work.strategy = "single GPU"
    if stage == "classifiers":
        init = m.get("init_args") or {}
        inputs = init.get("inputs") or {}
        work.checkpointing = bool(init.get("gradient_checkpointing"))
        work.encoder = "Encoder" in str(m.get("class_path", ""))
        work.seq_len = int(inputs.get("pack_tokens") or inputs.get("max_length") or work.seq_len)
        work.head, work.head_tokens = (
            "few",
            work.micro_batch
            * max(1, work.seq_len // int(inputs.get("program_tokens") or inputs.get("max_length") or work.seq_len)),
        )
    elif stage == "feedback_model":
        # feedback_model.module.completion_loss projects only the trace tokens: at most about 60% of a
        # packed row (the program is the other part)
        work.head, work.head_tokens = "few", int(work.micro_batch * work.seq_len * 0.6)
    elif stage == "pretrain" and m.get("objective") == "mlm":
        work.encoder = True
    elif stage == "prm" and m.get("mode") == "grpo":
        _grpo(work, m, problems=work.micro_batch, prompt=work.seq_len)
    elif stage == "prm":
        work.head, work.head_tokens = "few", work.micro_batch * (int(d.get("max_proof_steps") or 64) + 1)
    elif stage == "rl":
        policy = m.get("policy") or {}
        work.checkpointing = bool(policy.get("gradient_checkpointing"))
        adapter = policy.get("adapter") or {}
        if adapter.get("kind", "none") != "none":
            work.adapter = adapter["kind"]
            work.quantized = adapter["kind"] == "qlora"
            work.lora = (int(adapter.get("r", 16)), tuple(adapter.get("target_modules") or ()))
            work.notes.append(f"lora r={work.lora[0]} on {','.join(work.lora[1])}")
        generation = m.get("generation") or {}
        _grpo(
            work,
            m,
            problems=int(d.get("problems_per_step") or 1),
            prompt=int(generation.get("max_prompt_length") or 1024),
        )
        _evaluator(work, m.get("evaluator") or {})
    elif stage == "autoformalizer":
        _autoformalizer_policy(work, m)
    elif stage == "autoformalizer_grpo":
        _autoformalizer_policy(work, m)
        _grpo(work, m, problems=int(d.get("problems_per_step") or 1), prompt=int(d.get("max_length") or 512))
    return work


def _grpo(work: Workload, m: dict, problems: int, prompt: int) -> None:
    grpo, generation = m.get("grpo") or {}, m.get("generation") or {}
    group = int(grpo.get("num_generations") or 8)
    new = int(generation.get("max_new_tokens") or 256)
    work.head = "chunked"
    work.micro_batch = int(grpo.get("micro_batch_size") or group)
    work.seq_len = prompt + new
    work.head_tokens = work.micro_batch * new
    vllm = generation.get("vllm") or {}
    engine = vllm.get("engine") or {}
    backend = generation.get("backend", "transformers")
    work.generation = {"sequences": problems * group, "tokens": prompt + new, "backend": backend}
    if backend == "vllm" and vllm.get("mode", "colocate") == "colocate":
        sleep = bool(engine.get("enable_sleep_mode"))
        work.vllm_shares.append(
            ("policy vLLM (colocated)", float(engine.get("gpu_memory_utilization", 0.3)), "rollout" if sleep else "all")
        )
    if float(grpo.get("beta") or 0.0) > 0 and work.adapter == "none":
        work.resident.append(
            (
                "reference (KL, frozen copy)",
                ModelRef(work.model.name, work.model.dtype, work.model.expect_base),
                "grpo.beta > 0",
            )
        )


def _evaluator(work: Workload, evaluator: dict) -> None:
    """rl's reward models on the policy's GPU: the feedback model (through vLLM when its generation
    says so) and the cascade's gate (resident beside it when residency resolves to together)."""
    options = evaluator.get("options") or {}
    path = evaluator.get("path")
    if evaluator.get("kind") in ("none", None) or not path:
        return
    generation = options.get("generation") or {}
    on_gpu = str(generation.get("device", evaluator.get("device", "auto"))) in ("cuda", "auto", "gpu")
    cascade = options.get("cascade") or {}
    gate = cascade.get("gate") if options.get("mode") == "cascade" else None
    residency = cascade.get("residency", "sequential") if gate else "together"
    if generation.get("backend") == "vllm":
        # a sequential cascade loads each model for the reward call and releases it (LLF Section 5)
        work.vllm_shares.append(
            (
                "evaluator vLLM (feedback model)",
                float(generation.get("gpu_memory_utilization", 0.9)),
                "reward" if residency == "sequential" else "all",
            )
        )
    elif on_gpu:
        work.resident.append(("evaluator", ModelRef(path, generation.get("dtype", "bfloat16")), "evaluator.path"))
    if gate:
        work.resident.append(("cascade gate", ModelRef(gate, "bfloat16"), f"residency {residency}"))


def _autoformalizer_policy(work: Workload, m: dict) -> None:
    policy = m.get("policy") or {}
    quant = policy.get("quant") or {}
    adapters = policy.get("adapters") or {}
    work.model = ModelRef(policy.get("name"), policy.get("dtype") or "bfloat16")
    work.checkpointing = bool(adapters.get("gradient_checkpointing"))
    work.adapter = "qlora" if quant.get("enabled") else "lora"
    work.quantized = bool(quant.get("enabled"))
    work.lora = ("autoformalizer", int(adapters.get("attention_rank", 64)), int(adapters.get("expert_rank", 8)))


# -- architectures ----------------------------------------------------------------------------------
def _normalise(name: str) -> str:
    base = name.rstrip("/").split("/")[-1].lower()
    base = re.sub(r"(-(base|instruct|fp8))+$", "", base)
    return base.replace("qwen3-coder-", "qwen3-")


def _run_config_name(reference: str, seen: set[str]) -> ModelRef | None:
    """``artifacts://<stage>/<run>`` that is not here: the model of ``configs/<stage>/<run>.yaml``,
    the config a run of that name is made from."""
    import yaml

    match = re.match(r"artifacts://([^/]+)/([^/+]+)", reference)
    if not match or reference in seen:
        return None
    seen.add(reference)
    path = REPO_ROOT / "configs" / match.group(1) / f"{match.group(2)}.yaml"
    if not path.is_file():
        return None
    return _model_ref(yaml.safe_load(path.read_text()) or {})


def architecture(ref: ModelRef, _seen: set[str] | None = None) -> tuple[Any, str]:
    """(transformers config, where its numbers come from) for the model ``ref`` names."""
    from transformers import AutoConfig

    from leanloop.training.models import PRESETS, ModelSpec, build_config

    seen = _seen if _seen is not None else set()
    overrides = ref.overrides
    if ref.name in PRESETS:
        return build_config(ModelSpec(ref.name, overrides=overrides)), f"preset {ref.name}"
    folder = _local_folder(ref.name)
    if folder is not None:
        return AutoConfig.from_pretrained(str(folder), **overrides), f"{folder}/config.json"
    if ref.name.startswith("artifacts://"):
        upstream = _run_config_name(ref.name, seen)
        if upstream is not None:
            config, source = architecture(upstream, seen)
            return config, f"{ref.name} <- {source}"
    key = _normalise(ref.expect_base or ref.name)
    if key not in ARCHITECTURES:
        raise PlanError(
            f"cannot size {ref.name!r}: no config.json here and not one of the published "
            f"architectures ({', '.join(sorted(ARCHITECTURES))}); point model.base.name at a local copy"
        )
    model_type, numbers, source = ARCHITECTURES[key]
    vocab = {} if "vocab_size" in numbers else {"vocab_size": QWEN3_VOCAB}
    return AutoConfig.for_model(model_type, **vocab, **numbers, **overrides), f"published config of {source}"


def _local_folder(name: str) -> Path | None:
    """The folder holding the model's config.json when it is on this machine (a finished run, minilm,
    a folder, shared://); hub ids are not looked up in the cache: their published config is used."""
    from leanloop.training.models import ModelSpec

    if not name.startswith(("artifacts://", "/", ".", "shared://")) and name != "minilm":
        return None
    try:
        folder = Path(ModelSpec(name).weights_location())
    except (OSError, ValueError, RuntimeError):  # a run or folder that is not here: sized from its config
        return None
    return folder if (folder / "config.json").is_file() else None


@dataclass
class Sizes:
    """One architecture's numbers on the meta device."""

    params: int
    linear_params: int
    """weights of the Linear layers inside the decoder/encoder blocks (what NF4 quantizes)."""
    kv_bytes_per_token: int
    """bf16 K and V of every layer for one token."""
    lora_params: int = 0


def _meta_model(config: Any, encoder: bool):
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    # an encoder (ModernBERT, BERT) named as a resident model has no causal-LM head: its MLM form
    auto = (
        AutoModelForMaskedLM
        if encoder or config.model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        else AutoModelForCausalLM
    )
    with torch.device("meta"):
        return auto.from_config(config, dtype=torch.bfloat16)


def _blocks(model: Any):
    from torch import nn

    lists = [m for m in model.modules() if isinstance(m, nn.ModuleList)]
    return max(lists, key=len)


@lru_cache(maxsize=16)
def _sizes(config_json: str, encoder: bool, lora: tuple | None) -> Sizes:
    from transformers import AutoConfig
    from torch import nn

    config = AutoConfig.for_model(**json.loads(config_json))
    model = _meta_model(config, encoder)
    blocks = _blocks(model)
    params = sum(p.numel() for p in model.parameters())
    linear = sum(m.weight.numel() for m in blocks.modules() if isinstance(m, nn.Linear))
    linear += sum(p.numel() for n, p in blocks.named_parameters() if p.dim() == 3)  # fused MoE experts
    text = config.get_text_config()
    heads = getattr(text, "num_key_value_heads", None) or text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    sizes = Sizes(params, linear, 2 * len(blocks) * heads * head_dim * 2)
    if lora and lora[0] == "autoformalizer":
        _, attention_rank, expert_rank = lora
        attention = sum(
            m.in_features + m.out_features
            for n, m in blocks.named_modules()
            if isinstance(m, nn.Linear) and n.split(".")[-1] in ("q_proj", "k_proj", "v_proj", "o_proj")
        )
        experts = (
            getattr(text, "num_experts", 0)
            * len(blocks)
            * 3
            * (text.hidden_size + getattr(text, "moe_intermediate_size", 0))
        )
        sizes.lora_params = attention_rank * attention + expert_rank * experts
    elif lora:
        r, targets = lora
        sizes.lora_params = r * sum(
            m.in_features + m.out_features
            for n, m in blocks.named_modules()
            if isinstance(m, nn.Linear) and n.split(".")[-1] in targets
        )
    return sizes


def _flash_like_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """What flash attention keeps for backward (q, k, v, output, fp32 log-sum-exp), on meta tensors:
    the planner sizes every config as its GPU run would (flash_attention_2 or sdpa's flash kernel)."""
    return _FlashSaved.apply(query, key, value), None


def _flash_saved_class():
    import torch

    class FlashSaved(torch.autograd.Function):
        @staticmethod
        def forward(ctx, query, key, value):
            out = torch.empty(
                query.shape[0], query.shape[2], query.shape[1], query.shape[3], dtype=query.dtype, device=query.device
            )
            lse = query.new_empty(query.shape[:-1], dtype=torch.float32)
            ctx.save_for_backward(query, key, value, out, lse)
            return out

        @staticmethod
        def backward(ctx, grad):  # never run: meta tensors are only measured
            query, key, value, *_ = ctx.saved_tensors
            return torch.zeros_like(query), torch.zeros_like(key), torch.zeros_like(value)

    return FlashSaved


_FlashSaved = _flash_saved_class()


class SavedBytes:
    """Bytes autograd saves for backward while the context is open, per ``tag`` (set it to attribute
    what follows); parameters, and a tensor saved again (or a view of one saved), are not counted.
    The planner measures meta tensors with it; tests and benchmarks measure real steps the same way."""

    def __init__(self, model: Any = None) -> None:
        self.params = {id(p) for p in model.parameters()} if model is not None else set()
        self.by_tag: dict[str, int] = {}
        self.tag = "other"
        self._kept: list = []
        self._seen: set[int] = set()

    @property
    def total(self) -> int:
        return sum(self.by_tag.values())

    def _pack(self, tensor: Any) -> Any:
        base = tensor._base if tensor._base is not None else tensor
        if id(base) not in self.params and id(base) not in self._seen:
            self._seen.add(id(base))
            self._kept.append(base)  # ids stay unique while the measurement lasts
            self.by_tag[self.tag] = self.by_tag.get(self.tag, 0) + base.numel() * base.element_size()
        return tensor

    def __enter__(self) -> "SavedBytes":
        import torch

        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._hooks.__exit__(*exc)
        self._kept.clear()


@lru_cache(maxsize=32)
def _measured_body(config_json: str, encoder: bool, batch: int, seq: int) -> tuple[int, int]:
    """(bytes one block saves for backward, bytes the rest of the body saves) for one forward of the
    model's body at ``batch`` x ``seq`` in bf16 on the meta device."""
    import torch
    from transformers import AttentionInterface, AutoConfig

    AttentionInterface.register("leanloop_plan", _flash_like_attention)
    config = AutoConfig.for_model(**json.loads(config_json))
    config._attn_implementation = "leanloop_plan"
    model = _meta_model(config, encoder)
    model.train()
    blocks = _blocks(model)
    saved = SavedBytes(model)
    first = blocks[0]
    handles = [
        first.register_forward_pre_hook(lambda *a: setattr(saved, "tag", "block")),
        first.register_forward_hook(lambda *a: setattr(saved, "tag", "other")),
    ]
    try:
        ids = torch.zeros(batch, seq, dtype=torch.long, device="meta")
        with saved:
            model.base_model(input_ids=ids, **({} if encoder else {"use_cache": False}))
    finally:
        for handle in handles:
            handle.remove()
    block = saved.by_tag.get("block", 0)
    # the other blocks were counted under "other": take them out again
    return block, max(saved.by_tag.get("other", 0) - block * (len(blocks) - 1), 0)


def _dense_equivalent(config: Any) -> Any:
    """A MoE block's activations as those of a dense block with the active experts' width (the
    routing itself is data-dependent and does not run on meta tensors)."""
    from transformers import AutoConfig

    numbers = {
        k: getattr(config, k)
        for k in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
        )
    }
    width = config.moe_intermediate_size * config.num_experts_per_tok
    return AutoConfig.for_model("qwen3", intermediate_size=width, **numbers)


# -- the plan ---------------------------------------------------------------------------------------
@dataclass
class Term:
    name: str
    gb: float
    phases: tuple[str, ...] = ("update", "rollout", "reward", "gate")
    note: str = ""


@dataclass
class Plan:
    stage: str
    model: str
    source: str
    world: int
    strategy: str
    gpu_gb: float
    terms: list[Term]
    checkpointing: bool
    activations_unchecked_gb: float
    activations_checked_gb: float
    notes: list[str] = field(default_factory=list)

    @property
    def phase_totals(self) -> dict[str, float]:
        phases = sorted({p for t in self.terms for p in t.phases})
        return {p: sum(t.gb for t in self.terms if p in t.phases) for p in phases}

    @property
    def peak_phase(self) -> str:
        totals = self.phase_totals
        return max(totals, key=totals.get)

    @property
    def peak_gb(self) -> float:
        return max(self.phase_totals.values())

    @property
    def fits(self) -> bool:
        return self.peak_gb <= self.gpu_gb

    @property
    def headroom(self) -> float:
        return 1.0 - self.peak_gb / self.gpu_gb

    def verdict(self) -> str:
        word = "fits" if self.fits else "DOES NOT FIT"
        where = self.strategy if self.world == 1 else f"{self.strategy} on {self.world} GPUs"
        return (
            f"{self.stage}: peak {self.peak_gb:.1f} GB per GPU ({self.peak_phase}) of {self.gpu_gb:g} GB: {word} "
            f"({self.headroom:+.0%} headroom; {where})"
        )

    def table(self) -> str:
        lines = [
            f"memory plan: {self.stage}, {self.model} ({self.source})",
            f"  {'term':<34} {'GB/GPU':>8}  {'phase':<15} note",
        ]
        for term in self.terms:
            phase = "all" if set(term.phases) == set(self.phase_totals) else "+".join(term.phases)
            lines.append(f"  {term.name:<34} {term.gb:>8.2f}  {phase:<15} {term.note}")
        lines.append(
            f"  {'activations without / with checkpointing':<34} {self.activations_unchecked_gb:>8.2f}"
            f"  {self.activations_checked_gb:.2f} (checkpointing {'on' if self.checkpointing else 'off'})"
        )
        lines += [f"  note: {n}" for n in self.notes]
        lines.append(self.verdict())
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "model": self.model,
            "peak_gb": round(self.peak_gb, 3),
            "gpu_gb": self.gpu_gb,
            "fits": self.fits,
            "headroom": round(self.headroom, 4),
            "peak_phase": self.peak_phase,
            "world": self.world,
            "strategy": self.strategy,
            "terms": {t.name: round(t.gb, 3) for t in self.terms},
            "activations_gb": {
                "unchecked": round(self.activations_unchecked_gb, 3),
                "checkpointed": round(self.activations_checked_gb, 3),
            },
            "notes": list(self.notes),
        }


def _bytes(dtype: str) -> int:
    return 4 if dtype in ("float32", "32") else 2


def activations(config: Any, work: Workload) -> tuple[float, float, str]:
    """(bytes without checkpointing, bytes with, how they were had) for one micro-batch."""
    text = config.get_text_config()
    measured = config
    how = "measured on meta"
    if getattr(text, "num_experts", 0):
        measured, how = _dense_equivalent(text), "measured on meta (MoE as its dense equivalent)"
    block, rest = _measured_body(measured.to_json_string(use_diff=False), work.encoder, work.micro_batch, work.seq_len)
    layers = text.num_hidden_layers
    block_input = work.micro_batch * work.seq_len * text.hidden_size * 2
    unchecked = rest + layers * block
    checked = rest + layers * block_input + block  # boundaries kept, one block recomputed at a time
    return unchecked, checked, how


def head_bytes(config: Any, work: Workload) -> tuple[float, float, str]:
    """The loss head over the vocabulary: (bytes it saves for backward, bytes it holds at its peak,
    what was counted). transformers' loss upcasts the logits: the bf16 logits, their fp32 log-softmax
    (saved), and in backward its fp32 gradient in and out, 12 bytes per position and vocabulary entry."""
    text = config.get_text_config()
    vocab, hidden = text.vocab_size, text.hidden_size
    if work.head == "chunked":
        tokens = work.head_tokens or work.micro_batch * work.seq_len
        tile = 4096 * 32_768 * 4 * 2  # trl's token x vocabulary tile, fp32, forward and backward
        return (
            tokens * (hidden * 2 + 8),
            tokens * (hidden * 2 + 16) + tile,
            f"{tokens:,} completion tokens, chunked (trl tiles)",
        )
    tokens = work.micro_batch * work.seq_len if work.head == "full" else (work.head_tokens or work.micro_batch)
    saved = tokens * (vocab * 4 + hidden * 2)
    what = "positions" if work.head == "full" else "scored positions"
    return saved, tokens * (vocab * 12 + hidden * 2), f"{tokens:,} {what} x {vocab:,} (bf16 + 2 fp32 in backward)"


def plan(work: Workload, gpu_gb: float = DEFAULT_GPU_GB) -> Plan:
    import torch  # noqa: F401 - transformers' meta builds need it loaded

    config, source = architecture(work.model)
    sizes = _sizes(config.to_json_string(use_diff=False), work.encoder, work.lora)
    world, strategy = work.world, work.strategy
    deepspeed = strategy.startswith("zero")
    bf16 = work.precision.startswith("bf16")
    terms: list[Term] = []
    # weights
    if work.quantized:
        weight = sizes.linear_params * NF4_BYTES + (sizes.params - sizes.linear_params) * 2
        note = f"{sizes.params / 1e9:.2f}B params, block Linears in NF4 (double quant), the rest bf16"
    else:
        per = 2 if (deepspeed and bf16) or work.precision == "bf16-true" else _bytes(work.model.dtype)
        weight = sizes.params * per
        note = f"{sizes.params / 1e9:.2f}B params x {per} bytes"
    if strategy.startswith("zero3"):
        weight /= world
        note += f" / {world} (ZeRO-3)" if "offload" not in strategy else " (ZeRO-3 offload: on the host)"
        if "offload" in strategy:
            weight = 0.0
    terms.append(Term("weights", weight / GB, note=note))
    trainable = sizes.lora_params if work.adapter != "none" else sizes.params
    if work.adapter != "none":
        grad_b, state_b, master_b = 4, 8, 0  # PEFT keeps adapter weights in fp32 (autocast_adapter_dtype)
        terms.append(
            Term("adapter weights", trainable * 4 / GB, note=f"{trainable / 1e6:.1f}M {work.adapter} params, fp32")
        )
        shard_grads = shard_states = 1
    elif deepspeed:
        grad_b, state_b, master_b = 2 if bf16 else 4, 8, 4 if bf16 else 0
        shard_grads = world
        shard_states = world
    else:
        per = 2 if work.precision == "bf16-true" else _bytes(work.model.dtype)
        grad_b, state_b, master_b = per, 2 * per, 0
        shard_grads = shard_states = 1
        if world > 1:
            grad_b *= 2  # DDP's reduction buckets beside the .grad tensors (gradient_as_bucket_view off)
    grads_note = (
        f"{grad_b} bytes/param"
        + (f" / {shard_grads}" if shard_grads > 1 else "")
        + (" incl. DDP buckets" if not deepspeed and world > 1 and work.adapter == "none" else "")
    )
    terms.append(Term("gradients", trainable * grad_b / shard_grads / GB, ("update",), grads_note))
    offload = "offload" in strategy
    states = 0.0 if offload else trainable * state_b / shard_states / GB
    terms.append(
        Term(
            "optimizer states (AdamW)",
            states,
            note=("on the host (offload)" if offload else f"{state_b} bytes/param")
            + (f" / {shard_states}" if shard_states > 1 and not offload else ""),
        )
    )
    if master_b:
        terms.append(
            Term(
                "fp32 master weights",
                0.0 if offload else trainable * master_b / shard_states / GB,
                note="DeepSpeed bf16: fp32 copy" + (f" / {shard_states}" if shard_states > 1 else ""),
            )
        )
    notes = list(work.notes)
    if work.precision == "bf16-true" and not deepspeed and work.adapter == "none":
        notes.append(
            "bf16-true without DeepSpeed: torch AdamW keeps no fp32 master weights or states "
            "(updates below bf16's resolution are lost); none are counted"
        )
    unchecked, checked, how = activations(config, work)
    used = checked if work.checkpointing else unchecked
    terms.append(
        Term(
            "activations",
            used / GB,
            ("update",),
            f"{work.micro_batch} x {work.seq_len:,} tokens, checkpointing "
            f"{'on' if work.checkpointing else 'off'}; {how}",
        )
    )
    _, head, head_note = head_bytes(config, work)
    terms.append(Term("loss head", head / GB, ("update",), head_note))
    if work.generation:
        gen = work.generation
        if gen["backend"] == "transformers":
            kv = gen["sequences"] * gen["tokens"] * sizes.kv_bytes_per_token
            terms.append(
                Term(
                    "generation KV cache",
                    kv / GB,
                    ("rollout",),
                    f"{gen['sequences']} sequences x {gen['tokens']:,} tokens (transformers generate)",
                )
            )
    for role, share, phase in work.vllm_shares:
        phases = (phase,) if phase != "all" else ("update", "rollout", "reward", "gate")
        terms.append(
            Term(
                role,
                share * gpu_gb,
                phases,
                f"gpu_memory_utilization {share:g} x {gpu_gb:g} GB"
                + (" (sleeps during the update)" if phase == "rollout" else ""),
            )
        )
    for role, ref, why in work.resident:
        try:
            other, _ = architecture(ref)
        except PlanError as error:
            raise PlanError(f"{role}: {error}") from None
        other_sizes = _sizes(other.to_json_string(use_diff=False), False, None)
        terms.append(_resident(role, why, work, other_sizes.params * _bytes(ref.dtype) / GB, gpu_gb))
    terms.append(Term("CUDA context and workspaces", CUDA_CONTEXT_GB, note="outside the allocator"))
    return Plan(
        work.stage,
        work.model.name,
        source,
        world,
        strategy,
        gpu_gb,
        terms,
        work.checkpointing,
        unchecked / GB,
        checked / GB,
        notes,
    )


def _resident(role: str, why: str, work: Workload, weights_gb: float, gpu_gb: float) -> Term:
    """A model kept beside the one trained; the cascade gate as feedback_model.cascade.resolve_residency
    decides ``auto`` (beside vLLM when 1.5x its weights fit in what vLLM leaves)."""
    if "residency" in why:
        residency = why.split()[-1]
        if residency == "auto":
            share = sum(s for _, s, _ in work.vllm_shares if "evaluator" in _)
            residency = "together" if 1.5 * weights_gb <= gpu_gb * (1 - share) else "sequential"
        # sequential: the gate alone on the GPU while it scores, then the feedback model
        phases = ("update", "rollout", "reward", "gate") if residency == "together" else ("gate",)
        chosen = f"residency auto -> {residency}" if why.endswith("auto") else why
        return Term(role, weights_gb, phases, f"bf16 weights, {chosen}")
    return Term(role, weights_gb, note=f"bf16 weights ({why})")


# -- entry points -----------------------------------------------------------------------------------
STAGE_MODULES = {"autoformalizer_grpo": "autoformalizer.train_grpo"}
TRAINING_STAGES = (
    "pretrain",
    "classifiers",
    "feedback_model",
    "sft",
    "prm",
    "rl",
    "search",
    "autoformalizer",
    "autoformalizer_grpo",
)


def stage_of(config_files: list[str]) -> str:
    """The stage a config belongs to: ``configs/<stage>/...`` (``configs/autoformalizer/grpo/``: its GRPO stage)."""
    for name in config_files:
        parts = (
            Path(name).resolve().relative_to(REPO_ROOT).parts
            if Path(name).resolve().is_relative_to(REPO_ROOT)
            else Path(name).parts
        )
        if len(parts) >= 3 and parts[0] == "configs" and parts[1] in TRAINING_STAGES:
            if parts[1] == "autoformalizer" and parts[2] == "grpo":
                return "autoformalizer_grpo"
            return parts[1]
    raise PlanError(
        f"cannot tell the stage of {' '.join(config_files)}: pass --stage (one of {', '.join(TRAINING_STAGES)})"
    )


def paper_configs() -> list[str]:
    """Every training stage's paper config (configs/<stage>/[grpo/]paper*.yaml; eval/ and sample/ hold
    configs of tools, not of training)."""
    found = []
    for stage in TRAINING_STAGES:
        if stage in STAGE_MODULES:
            continue
        folder = REPO_ROOT / "configs" / stage
        found += [
            str(p.relative_to(REPO_ROOT))
            for p in sorted(folder.glob("**/paper*.yaml"))
            if not {"eval", "sample"} & set(p.relative_to(folder).parts[:-1]) and not _is_layer(p)
        ]
    return found


def _is_layer(path: Path) -> bool:
    """A paper config that only layers settings on another (no ``trainer`` of its own, e.g.
    rl/paper_hardened.yaml on rl/paper.yaml): planned with the config it layers on, not alone."""
    import yaml

    return "trainer" not in (yaml.safe_load(path.read_text()) or {})


def paper_table(plans: list[tuple[str, Plan]]) -> str:
    """The Markdown table of docs/results/plan.md: one row per paper config, the terms of its peak phase."""
    static_terms = ("weights", "adapter weights", "gradients", "optimizer states (AdamW)", "fp32 master weights")
    lines = [
        "| config | model (sized as) | strategy x GPUs | weights + grads + optimizer | activations (ckpt) "
        "| loss head | rest | peak GB (phase) | headroom |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for config, plan in plans:
        at_peak = {t.name: t.gb for t in plan.terms if plan.peak_phase in t.phases}
        static = sum(at_peak.get(k, 0.0) for k in static_terms)
        act, head = at_peak.get("activations"), at_peak.get("loss head")
        rest = plan.peak_gb - static - (act or 0.0) - (head or 0.0)
        sized = plan.source.split(" <- ")[-1].removeprefix("published config of ").split(" (")[0]
        model = f"{plan.model} ({sized})" if plan.model.startswith("artifacts://") else plan.model
        cells = [
            config,
            model,
            f"{plan.strategy} x {plan.world}",
            f"{static:.1f}",
            f"{act:.1f} ({'on' if plan.checkpointing else 'off'})" if act is not None else "-",
            f"{head:.1f}" if head is not None else "-",
            f"{rest:.1f}",
            f"{plan.peak_gb:.1f} ({plan.peak_phase})",
            f"{plan.headroom:.0%}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def resolve(stage: str, args: list[str]) -> dict:
    """The stage's resolved config, parsed by the stage itself (``python -m <stage>.train --dry_run``)."""
    import yaml

    import logging

    module = importlib.import_module(STAGE_MODULES.get(stage, f"{stage}.train"))
    seed_log = logging.getLogger("lightning.fabric.utilities.seed")
    level = seed_log.level
    seed_log.setLevel(logging.WARNING)  # "Seed set to 42": the plan seeds nothing
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            result = module.run([*args, "--dry_run", "true", "--plan", "false"])
    finally:
        seed_log.setLevel(level)
    return yaml.safe_load(result.config)


def plan_config(stage: str, config: dict, gpu_gb: float = DEFAULT_GPU_GB) -> Plan:
    return plan(workload(stage, config), gpu_gb)


def plan_args(args: list[str], stage: str | None = None, gpu_gb: float = DEFAULT_GPU_GB) -> Plan:
    """The plan of ``--config A.yaml [--config B.yaml] [overrides]`` of ``stage`` (default: from the paths)."""
    configs = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--config"]
    stage = stage or stage_of(configs)
    return plan_config(stage, resolve(stage, args), gpu_gb)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m leanloop.plan", description=__doc__.splitlines()[0])
    parser.add_argument("--stage", default=None, help="the training stage (default: from configs/<stage>/)")
    parser.add_argument("--gpu_gb", type=float, default=DEFAULT_GPU_GB, help="GPU memory to plan against")
    parser.add_argument("--json", default=None, help="also write the plan as JSON here")
    parser.add_argument(
        "--paper",
        action="store_true",
        help="plan every paper config and print the Markdown table of docs/results/plan.md",
    )
    known, rest = parser.parse_known_args(argv)
    if known.paper:
        plans = [(config, plan_args(["--config", config], gpu_gb=known.gpu_gb)) for config in paper_configs()]
        for _, plan in plans:
            print(plan.table() + "\n", file=sys.stderr)
        print(paper_table(plans))
        return 0 if all(plan.fits for _, plan in plans) else 1
    if "--config" not in rest:
        parser.error("give at least one --config")
    from leanloop.tool import check_config_files, check_output_file

    check_config_files(rest)  # a missing or broken file is named before its stage is guessed from its path
    check_output_file(known.json)
    result = plan_args(rest, known.stage, known.gpu_gb)
    print(result.table())
    if known.json:
        Path(known.json).write_text(json.dumps(result.to_json(), indent=2) + "\n")
    return 0 if result.fits else 1


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    sys.exit(cli_entry(main, prog="python -m leanloop.plan"))
