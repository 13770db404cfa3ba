"""``python -m bench.vllm`` (``make bench-vllm``): the two generation backends side by side, tokens/s."""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from leanloop.tool import check_output_file, cli_entry, parse_config

STATEMENTS = "shared://statements/minif2f_goedel_prover_v2_repaired.jsonl"


@dataclass
class BenchConfig:
    statements: int = 8
    """Statements sampled (the first of the miniF2F set)."""
    k: int = 8
    """Attempts per statement."""
    max_new_tokens: int = 64
    """Tokens per attempt at most (an untrained model rarely stops earlier)."""
    programs: int = 8
    """Feedback evaluator: real programs traced, greedy."""
    trace_tokens: int = 512
    """Feedback evaluator: tokens per trace at most."""
    threads: int = 1
    """Torch intra-op threads of the transformers backend (vLLM's CPU worker binds its own)."""
    json: str | None = None
    """Also write the results to this JSON file."""


def timed(generator: Any, prompts: list[str], names: list[str], sampling: Any) -> dict[str, float]:
    began = time.perf_counter()
    attempts = generator.sample_batch(prompts, names, sampling)
    seconds = time.perf_counter() - began
    tokens = sum(a.num_tokens for row in attempts for a in row)
    return {"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds}


def traced(evaluator: Any, programs: list[str]) -> dict[str, float]:
    began = time.perf_counter()
    predictions = evaluator.score(programs)
    seconds = time.perf_counter() - began
    tokens = sum(p.new_tokens for p in predictions)
    return {"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds}


def feedback_programs(count: int) -> list[str]:
    import gzip

    from leanloop.paths import resolve_shared

    path = resolve_shared("shared://candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        programs = [json.loads(line)["code"] for _, line in zip(range(400), handle)]
    return sorted(programs, key=len)[:count]


def show(title: str, hf: dict[str, float], vllm: dict[str, float], start: float) -> float:
    ratio = vllm["tokens_per_s"] / hf["tokens_per_s"]
    print(f"\n== {title}\n{'':16}{'transformers':>14}{'vllm':>14}")
    for key, label in (("tokens", "tokens"), ("seconds", "wall seconds"), ("tokens_per_s", "tokens/s")):
        print(f"{label:16}{hf[key]:>14.1f}{vllm[key]:>14.1f}")
    print(f"vLLM / transformers tokens/s: {ratio:.2f}x (vLLM engine start + warm-up {start:.0f}s, not counted)")
    return ratio


def main(argv: list[str] | None = None) -> dict[str, Any]:
    config, _ = parse_config(BenchConfig, argv, prog="python -m bench.vllm", description=__doc__.splitlines()[0])
    check_output_file(config.json)
    from leanloop.prover.generation import SamplingConfig, TransformersGenerator, VLLMGenerator
    from leanloop.prover.statements import read_statements
    from leanloop.training.models import ModelSpec, load_model, load_tokenizer
    from leanloop.vllm_engine import VLLMEngineConfig

    torch.set_num_threads(config.threads)
    statements = read_statements(STATEMENTS).statements[: config.statements]
    prompts, names = [s.prompt for s in statements], [s.name for s in statements]
    sampling = SamplingConfig(k=config.k, max_new_tokens=config.max_new_tokens, attempts_per_batch=config.k)
    tokenizer = load_tokenizer("qwen3")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(
        f"[bench-vllm] {os.cpu_count()} core(s), load average {os.getloadavg()[0]:.1f}, device {device}; "
        f"{len(prompts)} statements x {config.k} attempts x <= {config.max_new_tokens} tokens"
    )
    results: dict[str, Any] = {"device": device, "load_average": os.getloadavg()[0], "config": vars(config)}
    with tempfile.TemporaryDirectory(prefix="bench-vllm-") as folder:
        torch.manual_seed(0)
        model = load_model(ModelSpec("qwen3-tiny-vllm"), tokenizer=tokenizer)
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        stops = [tokenizer.eos_token]
        hf = TransformersGenerator(model.to(device), tokenizer, stops)
        hf.sample_batch(prompts[:1], names[:1], SamplingConfig(k=1, max_new_tokens=4))  # warm-up
        results["transformers"] = timed(hf, prompts, names, sampling)
        began = time.perf_counter()
        engine = VLLMEngineConfig(max_model_len=2048, extra={} if device == "cuda" else {"enforce_eager": True})
        vllm = VLLMGenerator(folder, stops, engine, dtype="float32")
        vllm.sample_batch(prompts[:1], names[:1], SamplingConfig(k=1, max_new_tokens=4))  # warm-up
        results["vllm_start_seconds"] = time.perf_counter() - began
        results["vllm"] = timed(vllm, prompts, names, sampling)
        del vllm
        results["ratio"] = show(
            "make sft-sample", results["transformers"], results["vllm"], results["vllm_start_seconds"]
        )
        results["feedback"] = feedback(Path(folder), config)
    if config.json:
        Path(config.json).write_text(json.dumps(results, indent=1))
    return results


def feedback(folder: Path, config: BenchConfig) -> dict[str, Any]:
    """The feedback evaluator on both backends over ``folder`` (made a feedback model's final/ here)."""
    from feedback_model.config import FeedbackModelCard, TraceFormat, TraceGenerationConfig
    from feedback_model.evaluator import FeedbackEvaluator

    FeedbackModelCard(TraceFormat(), max_length=2048, base="preset:qwen3-tiny-vllm").write(folder)
    programs = feedback_programs(config.programs)
    out: dict[str, Any] = {}
    for backend in ("transformers", "vllm"):
        began = time.perf_counter()
        generation = TraceGenerationConfig(
            backend=backend,
            max_input_tokens=1024,
            max_new_tokens=config.trace_tokens,
            vllm_extra={} if torch.cuda.is_available() else {"enforce_eager": True},
        )
        evaluator = FeedbackEvaluator.load(folder, generation)
        evaluator.score(programs[:1])  # warm-up
        out[f"{backend}_start_seconds"] = time.perf_counter() - began
        out[backend] = traced(evaluator, programs)
        del evaluator
    out["ratio"] = show(
        f"feedback evaluator: {len(programs)} real programs, greedy, <= {config.trace_tokens} tokens, copy-drafting on",
        out["transformers"],
        out["vllm"],
        out["vllm_start_seconds"],
    )
    return out


if __name__ == "__main__":
    raise SystemExit(cli_entry(main, prog="python -m bench.vllm"))
