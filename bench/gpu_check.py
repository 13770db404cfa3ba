"""``python -m bench.gpu_check`` (``make gpu-check``): every GPU-only path once, at tiny scale, with a
JSON report of what ran, passed, failed or was skipped and why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from leanloop.artifacts import TOOL_ENTRIES, upstream_configs
from leanloop.plan import CUDA_CONTEXT_GB
from leanloop.paths import REPO_ROOT
from leanloop.tool import cli_entry, parse_config

STEP_TIMEOUT_S = 240  # one debug step; the whole GPU run is meant to stay under 8 minutes
# |log p_vLLM - log p_trainer| per sampled token, per device. cpu: set from the gaps measured on vLLM's
# CPU build (0.30 and 0.32, docs/results/vllm.md), ~6x above the worst of them: bf16 on-policy checks
# mean 1.1e-3 / max 4.9e-3, fp32 rl steps 6.6e-7 / 1.9e-6, tied and untied; a stale tied head measured
# 0.18 / 0.63.
# cuda: provisional, from bf16's 8-bit mantissa (relative error ~4e-3 on logits of magnitude < 10),
# NOT yet measured on a GPU; when gpu-check first runs there, its report's mean/max go to
# docs/results/gpu_check.md and this bound is set from them.
VLLM_LOGP_TOLERANCE = {"cpu": {"mean": 0.006, "max": 0.03}, "cuda": {"mean": 0.05, "max": 0.5}}
VLLM_PRESET = "qwen3-tiny-vllm"


@dataclass
class GpuCheckConfig:
    out: str | None = None
    """Report path (default: <artifacts>/gpu_check/report.json)."""
    only: list[str] | None = None
    """Check names to run, as a list (``--only '[step:pretrain,nf4_moe_policy]'``); default: all."""


class Skipped(Exception):
    """A check that cannot run here; the message says why."""


@dataclass
class CheckResult:
    name: str
    status: str  # passed | failed | skipped
    reason: str = ""
    seconds: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)


def cuda() -> bool:
    return torch.cuda.is_available()


def installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def debug_steps() -> list[tuple[str, str, Path]]:
    """(name, training module, debug config) of every Lightning stage: configs/<stage>/debug.yaml with
    <stage>/train.py, and the autoformalizer's GRPO stage (configs/autoformalizer/grpo/debug.yaml)."""
    steps = [
        (p.parent.name, f"{p.parent.name}.train", p)
        for p in sorted((REPO_ROOT / "configs").glob("*/debug.yaml"))
        if (REPO_ROOT / p.parent.name / "train.py").is_file()
    ]
    grpo = REPO_ROOT / "configs/autoformalizer/grpo/debug.yaml"
    if grpo.is_file() and (REPO_ROOT / "autoformalizer/train_grpo.py").is_file():
        steps.append(("autoformalizer_grpo", "autoformalizer.train_grpo", grpo))
    return steps


def _python(args: list[str], env: dict[str, str], timeout: int = STEP_TIMEOUT_S) -> str:
    done = subprocess.run(
        [sys.executable, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise RuntimeError(f"`python {' '.join(args)}` exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done.stdout


def _device_args() -> list[str]:
    if cuda():
        return ["--trainer.accelerator", "gpu", "--trainer.devices", "1", "--trainer.precision", "bf16-mixed"]
    return ["--trainer.accelerator", "cpu", "--trainer.precision", "32-true"]


class Steps:
    """Debug-config training steps in one scratch artifacts root, upstream runs built once each."""

    def __init__(self, root: Path):
        self.env = {**os.environ, "LEANLOOP_ARTIFACTS": str(root), "PYTHONPATH": str(REPO_ROOT)}
        self.built: set[tuple[str, str]] = set()

    def upstream(self, config: Path) -> None:
        for stage, run, source in upstream_configs(config):
            if (stage, run) in self.built:
                continue
            self.built.add((stage, run))
            if stage in TOOL_ENTRIES:
                _python(["-m", TOOL_ENTRIES[stage], "--config", str(source)], self.env)
            else:
                _python(
                    [
                        "-m",
                        f"{stage}.train",
                        "--config",
                        str(source),
                        "--trainer.fast_dev_run",
                        "true",
                        *_device_args(),
                    ],
                    self.env,
                )

    def step(self, module: str, config: Path, *extra: str) -> dict[str, Any]:
        self.upstream(config)
        args = ["--config", str(config), "--trainer.fast_dev_run", "true", *_device_args(), *extra]
        out = _python(["-c", PEAK_WRAPPER, module, *args], self.env)
        return {
            "config": str(config.relative_to(REPO_ROOT)),
            "args": _device_args() + list(extra),
            "memory": step_memory(module, args, out),
        }


# runs `python -m <module> ARGS` and prints the CUDA allocator's peak when it ends, however it ends
PEAK_WRAPPER = """import runpy, sys, torch
sys.argv = sys.argv[1:]
try:
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
finally:
    print(f"gpu-check peak bytes: {torch.cuda.max_memory_allocated() if torch.cuda.is_available() else -1}")
"""


def step_memory(module: str, args: list[str], out: str) -> dict[str, Any]:
    """The memory planner's peak for the step beside the allocator's measured one (``planned/measured``
    is how far the plan is off; the plan adds the CUDA context, which the allocator does not see)."""
    from leanloop.plan import STAGE_MODULES, plan_args

    stage = next((s for s, m in STAGE_MODULES.items() if m == module), module.split(".")[0])
    record: dict[str, Any] = {}
    try:
        plan = plan_args(args, stage)
        record["planned_gb"] = round(plan.peak_gb, 3)
        record["planned_allocator_gb"] = round(plan.peak_gb - CUDA_CONTEXT_GB, 3)
    except Exception as error:  # noqa: BLE001 - the step passed; the plan's failure is recorded beside it
        record["planned_error"] = f"{type(error).__name__}: {error}"
    peak = next(
        (int(line.rsplit(":", 1)[1]) for line in out.splitlines() if line.startswith("gpu-check peak bytes:")), -1
    )
    if peak < 0:
        record["measured_skipped"] = "no CUDA: the allocator's peak is a GPU figure"
    else:
        record["measured_gb"] = round(peak / 1e9, 3)
        if "planned_allocator_gb" in record and peak:
            record["planned_over_measured"] = round(record["planned_allocator_gb"] / record["measured_gb"], 3)
    return record


def check_flash_attn() -> dict[str, Any]:
    if not cuda():
        raise Skipped("flash-attn runs only on CUDA")
    if not installed("flash_attn"):
        raise Skipped("flash-attn is not installed (pip install flash-attn)")
    from leanloop.training.models import ModelSpec, load_model, load_tokenizer

    tokenizer = load_tokenizer("qwen3")
    ids = torch.randint(100, 5000, (2, 64), generator=torch.Generator().manual_seed(0)).cuda()
    logits = {}
    for impl in ("sdpa", "flash_attention_2"):
        torch.manual_seed(0)
        model = (
            load_model(ModelSpec("qwen3-tiny", dtype="bfloat16", attn_implementation=impl), tokenizer=tokenizer)
            .cuda()
            .eval()
        )
        with torch.no_grad():
            logits[impl] = model(ids).logits.float()
    diff = float((logits["sdpa"] - logits["flash_attention_2"]).abs().max())
    if diff > 0.1:  # bf16 attention kernels differ in summation order, not by whole logits
        raise AssertionError(f"flash_attention_2 logits differ from sdpa by {diff:.3g}")
    return {"max_abs_logit_diff": diff}


def check_zero(steps: Steps, stage: int) -> dict[str, Any]:
    if not cuda():
        raise Skipped(
            "Lightning's DeepSpeedStrategy runs only on CUDA (DeepSpeed's own ZeRO on CPU is checked "
            "by tests/cluster/test_cluster_strategy.py)"
        )
    if not installed("deepspeed"):
        raise Skipped("deepspeed is not installed")
    return steps.step(
        "pretrain.train",
        REPO_ROOT / "configs/pretrain/debug.yaml",
        "--config",
        str(REPO_ROOT / f"configs/strategy/zero{stage}.yaml"),
        "--trainer.devices",
        "1",
    )


def _train_step(model: torch.nn.Module, ids: torch.Tensor) -> dict[str, Any]:
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-3)
    before = [p.detach().clone() for p in params]
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    moved = sum(not torch.equal(b, p.detach()) for b, p in zip(before, params))
    if not torch.isfinite(loss) or moved == 0:
        raise AssertionError(f"loss {float(loss)}, {moved} of {len(params)} trainable tensors changed")
    return {"loss": float(loss), "trainable_tensors": len(params), "updated_tensors": moved}


def check_nf4_moe_policy() -> dict[str, Any]:
    import bitsandbytes as bnb

    from autoformalizer.config import PolicyConfig
    from autoformalizer.policy import build_policy
    from autoformalizer.quantize import QuantConfig

    compute = "bfloat16" if cuda() else "float32"
    model, _ = build_policy(PolicyConfig(dtype=compute, quant=QuantConfig(compute_dtype=compute)))
    quantized = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    device = quantized[0].weight.device.type
    if device != ("cuda" if cuda() else "cpu"):
        raise AssertionError(f"NF4 weights on {device}")
    ids = torch.randint(100, 5000, (2, 16), generator=torch.Generator().manual_seed(0)).to(device)
    return {"device": device, "nf4_layers": len(quantized), **_train_step(model, ids)}


def check_qlora_rl() -> dict[str, Any]:
    import bitsandbytes as bnb

    from leanloop.training.models import ModelSpec, load_tokenizer
    from rl.config import AdapterConfig, PolicyConfig
    from rl.policy import build_policy

    spec = ModelSpec("qwen3-tiny")
    compute = "bfloat16" if cuda() else "float32"
    policy = build_policy(
        spec,
        load_tokenizer(spec),
        PolicyConfig(adapter=AdapterConfig(kind="qlora", r=2, alpha=4, compute_dtype=compute)),
        beta=0.0,
    )
    device = "cuda" if cuda() else "cpu"
    policy.model.to(device)  # where Lightning puts the stage's module (Params4bit moves its NF4 payload)
    quantized = [m for m in policy.model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    if quantized[0].weight.device.type != device:
        raise AssertionError(f"NF4 weights on {quantized[0].weight.device.type}, expected {device}")
    ids = torch.randint(100, 5000, (2, 16), generator=torch.Generator().manual_seed(0)).to(device)
    return {"device": device, "nf4_layers": len(quantized), **_train_step(policy.model, ids)}


def _needs_vllm(cuda_only: str | None = None) -> None:
    """Skip without vLLM, and on CPU when ``cuda_only`` says why the path needs CUDA."""
    if cuda_only and not cuda():
        raise Skipped(f"CUDA-only: {cuda_only}")
    if not installed("vllm"):
        raise Skipped("vLLM is not installed (pip install -e '.[gpu]'; on CPU: make test-vllm's .venv-vllm)")
    if not cuda():  # vLLM's CPU build: on CPU gpu_memory_utilization is a share of RAM; a small KV cache
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


def _engine_extra() -> dict[str, Any]:
    return {} if cuda() else {"enforce_eager": True}  # no graph compilation: minutes on a small CPU


def check_vllm(fp8: bool) -> dict[str, Any]:
    _needs_vllm("vLLM's CPU build has no FP8 kernels" if fp8 else None)
    from bench.feedback import vllm_pairs
    from leanloop.training.models import ModelSpec, load_model, load_tokenizer

    torch.cuda.empty_cache()  # vLLM sizes its KV cache from the memory free when it starts
    tokenizer = load_tokenizer("qwen3")
    with tempfile.TemporaryDirectory(prefix="gpu-check-vllm-") as folder:
        torch.manual_seed(0)
        load_model(ModelSpec(VLLM_PRESET, dtype="bfloat16"), tokenizer=tokenizer).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        text = "theorem t (a b : Nat) : a + b = b + a := by\n  omega\n" * 3
        programs = [(text, tokenizer(text, add_special_tokens=False)["input_ids"])] * 2
        result = vllm_pairs(Path(folder), tokenizer, programs, max_new_tokens=32, draft_tokens=4, ngram_size=3, fp8=fp8)
    if result["verdict_agreement"] != 1.0:
        raise AssertionError(f"greedy verdicts differ with n-gram speculation: {result}")
    return result


def _logp_gap(sampled: torch.Tensor, trainer: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    keep = mask.bool() & ~torch.isnan(sampled)
    gap = (sampled.float() - trainer.float()).abs()[keep]
    return {"mean": float(gap.mean()), "max": float(gap.max()), "tokens": int(keep.sum())}


def tolerance() -> dict[str, float]:
    return VLLM_LOGP_TOLERANCE["cuda" if cuda() else "cpu"]


def _within(gap: dict[str, float], what: str) -> None:
    if gap["mean"] > tolerance()["mean"] or gap["max"] > tolerance()["max"]:
        raise AssertionError(
            f"{what}: vLLM log-probabilities off the policy's by mean {gap['mean']:.3g} / max "
            f"{gap['max']:.3g} (tolerance {tolerance()})"
        )


def check_vllm_grpo_on_policy(tied: bool = True, sleep: bool = False) -> dict[str, Any]:
    _needs_vllm("vLLM's CPU platform refuses enable_sleep_mode" if sleep else None)
    import copy
    from types import SimpleNamespace

    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from leanloop.grpo.objective import completion_logps
    from leanloop.grpo.rollout import RolloutGenerationConfig, VLLMRollout, VLLMRolloutConfig
    from leanloop.training.models import ModelSpec, load_model, load_tokenizer
    from leanloop.vllm_engine import VLLMEngineConfig

    torch.cuda.empty_cache()
    tokenizer = load_tokenizer("qwen3")
    with tempfile.TemporaryDirectory(prefix="gpu-check-grpo-") as folder:
        torch.manual_seed(0)
        load_model(
            ModelSpec(VLLM_PRESET, dtype="bfloat16", overrides={"tie_word_embeddings": tied}), tokenizer=tokenizer
        ).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        base = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).to("cuda" if cuda() else "cpu")
        policy = get_peft_model(
            base, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
        )
        config = RolloutGenerationConfig(
            backend="vllm",
            max_new_tokens=24,
            temperature=1.0,
            vllm=VLLMRolloutConfig(
                engine=VLLMEngineConfig(
                    gpu_memory_utilization=0.3, max_model_len=512, enable_sleep_mode=sleep, extra=_engine_extra()
                )
            ),
        )
        rollout = VLLMRollout(tokenizer, config, [tokenizer.eos_token])
        rollout.bind(SimpleNamespace(global_rank=0, local_rank=0, world_size=1, strategy=SimpleNamespace()))
        prompts = ["theorem t (a b : Nat) : a + b = b + a := by", "theorem u : (2 : Nat) + 2 = 4 := by"]

        def scored(model, rollouts):
            ids = torch.cat([rollouts.prompt_ids, rollouts.completion_ids], 1)
            mask = torch.cat([rollouts.prompt_mask, rollouts.completion_mask], 1)
            with torch.no_grad():
                return completion_logps(model, ids, mask, rollouts.completion_ids.size(1), 1.0, compute_entropy=False)[
                    0
                ]

        first = rollout.generate(policy, prompts, 4)
        before = _logp_gap(first.sampling_logps, scored(policy, first), first.completion_mask)
        _within(before, "first sync")
        old = copy.deepcopy(policy)
        optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=5e-2)
        logps = completion_logps(
            policy,
            torch.cat([first.prompt_ids, first.completion_ids], 1),
            torch.cat([first.prompt_mask, first.completion_mask], 1),
            first.completion_ids.size(1),
            1.0,
            compute_entropy=False,
        )[0]
        (-(logps * first.completion_mask).sum() / first.completion_mask.sum()).backward()
        optimizer.step()
        second = rollout.generate(policy, prompts, 4)
        after = _logp_gap(second.sampling_logps, scored(policy, second), second.completion_mask)
        _within(after, "sync after an optimizer step")
        moved = _logp_gap(second.sampling_logps, scored(old, second), second.completion_mask)
        if moved["mean"] <= after["mean"] or moved["max"] <= tolerance()["mean"]:
            raise AssertionError(
                f"after the step vLLM still matches the old policy ({moved}) as well as the new "
                f"one ({after}): the weight sync did not carry the step"
            )
    return {
        "tolerance": tolerance(),
        "tied": tied,
        "logp_gap_first_sync": before,
        "logp_gap_after_step": after,
        "logp_gap_to_the_pre_step_policy": moved,
    }


def check_vllm_grpo_steps(steps: Steps, tied: bool = True) -> dict[str, Any]:
    _needs_vllm()
    config = REPO_ROOT / "configs/rl/debug.yaml"
    steps.upstream(config)
    run = f"gpu_check_vllm_{'tied' if tied else 'untied'}"
    _python(
        [
            "-m",
            "rl.train",
            "--config",
            str(config),
            "--run",
            run,
            *_device_args(),
            "--trainer.max_steps",
            "2",
            "--model.generation.backend",
            "vllm",
            "--model.policy.base.name",
            VLLM_PRESET,
            "--model.policy.base.overrides",
            json.dumps({"tie_word_embeddings": tied}),
            "--model.generation.vllm.engine.gpu_memory_utilization",
            "0.3",
            "--model.generation.vllm.engine.extra",
            json.dumps(_engine_extra()),
        ],
        {**steps.env, **{k: v for k, v in os.environ.items() if k.startswith("VLLM_")}},
        timeout=3 * STEP_TIMEOUT_S,
    )
    from rl.module import STEPS_FILE

    from leanloop.jsonl import read_jsonl

    rows = list(read_jsonl(Path(steps.env["LEANLOOP_ARTIFACTS"]) / "rl" / run / STEPS_FILE))
    gaps = [
        {
            "mean": r.get("sampling/sampling_logp_difference/mean"),
            "max": r.get("sampling/sampling_logp_difference/max"),
            "is_ratio_mean": r.get("sampling/importance_sampling_ratio/mean"),
        }
        for r in rows
    ]
    if len(rows) != 2 or any(g["mean"] is None for g in gaps):
        raise AssertionError(f"expected 2 steps with vLLM sampling statistics, got {gaps}")
    for index, gap in enumerate(gaps):
        _within(gap, f"rl step {index}")
    return {"tolerance": tolerance(), "tied": tied, "steps": gaps}


def check_vllm_sample(steps: Steps) -> dict[str, Any]:
    _needs_vllm()
    from leanloop.training.models import ModelSpec, load_model, load_tokenizer

    config = REPO_ROOT / "configs/sft/sample/debug.yaml"
    folder = Path(steps.env["LEANLOOP_ARTIFACTS"]) / "vllm_prover"  # the vLLM-ready preset, not the sft run
    tokenizer = load_tokenizer("qwen3")
    load_model(ModelSpec(VLLM_PRESET), tokenizer=tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    _python(
        [
            "-m",
            "sft.sample",
            "--config",
            str(config),
            "--run",
            "gpu_check_vllm",
            "--model.name",
            str(folder),
            "--generation.backend",
            "vllm",
            "--generation.vllm.gpu_memory_utilization",
            "0.3",
            "--generation.vllm.extra",
            json.dumps(_engine_extra()),
        ],
        {**steps.env, **{k: v for k, v in os.environ.items() if k.startswith("VLLM_")}},
    )
    return {"config": str(config.relative_to(REPO_ROOT))}


def run_check(name: str, fn: Callable[[], dict[str, Any]]) -> CheckResult:
    began = time.perf_counter()
    try:
        detail = fn()
        result = CheckResult(name, "passed", detail=detail)
    except Skipped as why:
        result = CheckResult(name, "skipped", reason=str(why))
    except Exception as error:  # noqa: BLE001 - every failure is recorded, the other checks still run
        result = CheckResult(
            name,
            "failed",
            reason=f"{type(error).__name__}: {error}",
            detail={"traceback": traceback.format_exc()[-4000:]},
        )
    result.seconds = round(time.perf_counter() - began, 2)
    mark = {"passed": "ok  ", "failed": "FAIL", "skipped": "skip"}[result.status]
    print(
        f"[gpu-check] {mark} {name:<26} {result.seconds:7.1f}s  {result.reason.splitlines()[0] if result.reason else ''}",
        flush=True,
    )
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    config, _ = parse_config(
        GpuCheckConfig, argv, prog="python -m bench.gpu_check", description=__doc__.split("\n\n")[0]
    )
    from leanloop.artifacts import artifacts_root

    out = Path(config.out) if config.out else artifacts_root() / "gpu_check" / "report.json"
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as scratch:
        steps = Steps(Path(scratch))
        checks: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            *[
                (f"step:{name}", lambda module=module, config=config: steps.step(module, config))
                for name, module, config in debug_steps()
            ],
            ("flash_attn", check_flash_attn),
            ("zero2", lambda: check_zero(steps, 2)),
            ("zero3", lambda: check_zero(steps, 3)),
            ("nf4_moe_policy", check_nf4_moe_policy),
            ("qlora_rl", check_qlora_rl),
            ("vllm_ngram", lambda: check_vllm(fp8=False)),
            ("vllm_ngram_fp8", lambda: check_vllm(fp8=True)),
            ("vllm_grpo_on_policy", check_vllm_grpo_on_policy),
            ("vllm_grpo_on_policy_untied", lambda: check_vllm_grpo_on_policy(tied=False)),
            ("vllm_sleep_mode", lambda: check_vllm_grpo_on_policy(sleep=True)),
            ("vllm_grpo_steps", lambda: check_vllm_grpo_steps(steps)),
            ("vllm_grpo_steps_untied", lambda: check_vllm_grpo_steps(steps, tied=False)),
            ("vllm_sample", lambda: check_vllm_sample(steps)),
        ]
        known = {name for name, _ in checks}
        if config.only is not None and not set(config.only) <= known:
            raise ValueError(f"unknown checks {sorted(set(config.only) - known)}; known: {sorted(known)}")
        device = torch.cuda.get_device_name(0) if cuda() else "cpu (no CUDA: CPU equivalents, GPU-only paths skipped)"
        print(f"[gpu-check] device: {device}", flush=True)
        results = [run_check(name, fn) for name, fn in checks if config.only is None or name in config.only]
    report = {
        "device": device,
        "cuda": cuda(),
        "torch": torch.__version__,
        "seconds": round(time.perf_counter() - began, 1),
        "counts": {s: sum(r.status == s for r in results) for s in ("passed", "failed", "skipped")},
        "checks": [asdict(r) for r in results],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    print(f"[gpu-check] {report['counts']} in {report['seconds']}s -> {out}")
    return report


if __name__ == "__main__":
    raise SystemExit(cli_entry(lambda: 1 if main()["counts"]["failed"] else 0, prog="python -m bench.gpu_check"))
