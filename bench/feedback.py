"""``python -m bench.feedback`` (``make bench-feedback``): speculative copy-drafting, measured."""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from leanloop.tool import check_output_file, cli_entry, parse_config

TARGET = 3.0
SEED_REPORTED = 3.04


@dataclass
class BenchConfig:
    model: str = "artifacts://feedback_model/default"
    """Feedback run or final/ folder (a random-init qwen3-tiny when it does not exist)."""
    corpus: str = "artifacts://data/default"
    """Data run whose programs are generated for."""
    split: str = "test"
    """Corpus split the programs are drawn from."""
    programs: int = 8
    """Real programs, each generated twice."""
    max_input_tokens: int = 1024
    """Programs whose prompt is longer are passed over."""
    max_new_tokens: int = 1024
    """Generated tokens per trace at most."""
    draft_tokens: int = 8
    """Tokens copied per draft."""
    ngram_size: int = 3
    """Longest n-gram matched to find a draft."""
    paper_model: str | None = None
    """GPU only: a large feedback model's run or final/."""
    fp8: bool = False
    """vLLM only: FP8 weights."""
    threads: int = 1
    """Torch intra-op threads on CPU (a tiny model gains nothing from more, and on busy shared cores idle
    threads spin and distort both runs); 0: torch's default."""
    seed: int = 0
    """Seed of the program sample."""
    json: str | None = None
    """Also write the results to this JSON file."""
    smoke: bool = False
    """2 programs of <= 512 prompt tokens, 16 new tokens: checks the bench runs (seconds)."""

    def __post_init__(self) -> None:
        if self.smoke:
            self.programs, self.max_input_tokens, self.max_new_tokens = 2, 512, 16


def pick_programs(
    corpus: str, split: str, count: int, tokenizer: Any, fmt: Any, max_input_tokens: int, seed: int
) -> list[tuple[str, list[int]]]:
    from feedback_model.pairs import read_corpus

    rows = [
        r
        for r in read_corpus(corpus, ("id", "program", "split", "label"))
        if r["split"] == split and r["label"] is not None
    ]
    random.Random(seed).shuffle(rows)
    chosen = []
    for row in rows:
        ids = tokenizer(fmt.prompt(row["program"]), add_special_tokens=False)["input_ids"]
        if len(ids) <= max_input_tokens:
            chosen.append((row["program"], ids))
        if len(chosen) == count:
            break
    if not chosen:
        raise SystemExit(f"no program of split {split!r} in {corpus} fits {max_input_tokens} input tokens")
    return chosen


def load_model(ref: str, device: str) -> tuple[Any, Any, Any, str]:
    """(model, tokenizer, trace format, description)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from feedback_model.config import FeedbackModelCard, TraceFormat
    from leanloop.artifacts import resolve_model

    try:
        final = resolve_model(ref, "feedback_model")
    except Exception as error:  # noqa: BLE001 - any reason the artifact is unusable is reported
        from leanloop.training.models import ModelSpec, load_model as build, load_tokenizer

        print(
            f"[bench-feedback] no trained feedback model at {ref} ({error}); falling back to a RANDOM-INIT "
            "qwen3-tiny, which copies poorly: train one with `make feedback-model` for a meaningful ratio"
        )
        torch.manual_seed(0)
        spec = ModelSpec("qwen3-tiny")
        tokenizer = load_tokenizer(spec)
        return build(spec, tokenizer=tokenizer).to(device), tokenizer, TraceFormat(), "random-init qwen3-tiny"
    card = FeedbackModelCard.read(final)
    model = AutoModelForCausalLM.from_pretrained(str(final)).to(device)
    params = sum(p.numel() for p in model.parameters())
    return (
        model,
        AutoTokenizer.from_pretrained(str(final)),
        card.format,
        f"trained feedback model {final} (base {card.base}, {params / 1e6:.1f}M parameters)",
    )


def paired_runs(
    model: Any,
    tokenizer: Any,
    programs: list[tuple[str, list[int]]],
    max_new_tokens: int,
    draft_tokens: int,
    ngram_size: int,
    device: str,
) -> dict[str, Any]:
    from feedback_model.config import TraceGenerationConfig
    from feedback_model.generate import HFTraceGenerator
    from leanloop.traces import source_preservation, trace_verdict

    configs = {
        "plain": TraceGenerationConfig(
            max_new_tokens=max_new_tokens, max_input_tokens=10**6, draft_tokens=0, device=device
        ),
        "drafted": TraceGenerationConfig(
            max_new_tokens=max_new_tokens,
            max_input_tokens=10**6,
            draft_tokens=draft_tokens,
            ngram_size=ngram_size,
            device=device,
        ),
    }
    generators = {name: HFTraceGenerator(model, tokenizer, config) for name, config in configs.items()}
    forwards = [0]
    hook = model.register_forward_hook(lambda *_: forwards.__setitem__(0, forwards[0] + 1))
    stats = {name: {"seconds": 0.0, "tokens": 0, "forwards": 0, "traces": [], "truncated": 0} for name in configs}
    try:
        generators["plain"].generate([programs[0][1][:64]])  # warm-up (allocator, kernels), not timed
        for index, (_, prompt) in enumerate(programs):
            order = ["plain", "drafted"] if index % 2 == 0 else ["drafted", "plain"]
            for name in order:
                forwards[0] = 0
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                began = time.perf_counter()
                trace = generators[name].generate([prompt])[0][0]
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                entry = stats[name]
                entry["seconds"] += time.perf_counter() - began
                entry["tokens"] += trace.new_tokens
                entry["forwards"] += forwards[0]
                entry["truncated"] += trace.truncated
                entry["traces"].append(trace)
    finally:
        hook.remove()
    costs = forward_costs(model, list(programs[len(programs) // 2][1]), draft_tokens, device)
    plain, drafted = stats["plain"]["traces"], stats["drafted"]["traces"]
    verdicts = [
        (trace_verdict(a.text, a.truncated).valid, trace_verdict(b.text, b.truncated).valid)
        for a, b in zip(plain, drafted)
    ]
    return {
        "programs": len(programs),
        "speedup": stats["plain"]["seconds"] / stats["drafted"]["seconds"],
        "verdict_agreement": sum(a == b for a, b in verdicts) / len(verdicts),
        "identical_traces": sum(a.text == b.text and a.truncated == b.truncated for a, b in zip(plain, drafted))
        / len(plain),
        "valid_verdicts": sum(a for a, _ in verdicts),
        # does the model copy? a feedback trace reproduces the program (whole, or up to its first
        # error); a model that does not gets its drafts accepted from its own repetitions instead
        "finished_traces": sum(t.finished for t in plain),
        "traces_keeping_the_program": sum(
            source_preservation(t.text, program) in ("full", "prefix") for t, (program, _) in zip(plain, programs)
        ),
        **costs,
        # the speedup, decomposed exactly (both runs generate the same tokens): accepted tokens per
        # step, divided by what a drafted step costs in plain steps (its forward over 1 + drafts
        # positions, plus the lookup and bookkeeping of a step)
        "step_cost_ratio": (stats["drafted"]["seconds"] / max(stats["drafted"]["forwards"], 1))
        / (stats["plain"]["seconds"] / max(stats["plain"]["forwards"], 1)),
        "speedup_at_full_acceptance": (draft_tokens + 1) / costs["drafted_forward_cost"],
        **{
            f"{name}_{key}": value
            for name, entry in stats.items()
            for key, value in (
                ("seconds", entry["seconds"]),
                ("programs_per_s", len(programs) / entry["seconds"]),
                ("tokens_per_s", entry["tokens"] / entry["seconds"]),
                ("tokens", entry["tokens"]),
                ("tokens_per_forward", entry["tokens"] / max(entry["forwards"], 1)),
                ("truncated", entry["truncated"]),
            )
        },
    }


@torch.inference_mode()
def forward_costs(model: Any, prompt: list[int], draft_tokens: int, device: str, repeats: int = 20) -> dict[str, float]:
    """Seconds of one decoding forward on a KV cache of ``prompt``: with 1 new token (a plain step)
    and with ``draft_tokens + 1`` (a drafted step: the last token plus the drafts, checked at once).
    Their ratio is what a drafted step costs in plain steps: with ``a`` tokens accepted per drafted
    step, the speedup is at most ``a / ratio`` (less the draft lookup and bookkeeping per step)."""
    from transformers import DynamicCache

    ids = torch.tensor([prompt], device=device)
    cache = DynamicCache(config=model.config)
    model(ids, cache=cache, use_cache=True)
    out: dict[str, float] = {}
    for name, width in (("plain_forward_s", 1), ("drafted_forward_s", draft_tokens + 1)):
        step = ids[:, -width:]
        model(step, cache=cache, use_cache=True)  # warm-up
        cache.crop(-width)
        times = []
        for _ in range(repeats):
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            began = time.perf_counter()
            model(step, cache=cache, use_cache=True)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            times.append(time.perf_counter() - began)
            cache.crop(-width)
        out[name] = float(sorted(times)[len(times) // 2])  # median: robust to a busy machine
    out["drafted_forward_cost"] = out["drafted_forward_s"] / out["plain_forward_s"]
    return out


def vllm_pairs(
    model_dir: Path,
    tokenizer: Any,
    programs: list[tuple[str, list[int]]],
    max_new_tokens: int,
    draft_tokens: int,
    ngram_size: int,
    fp8: bool,
) -> dict[str, Any]:
    from feedback_model.config import TraceGenerationConfig
    from feedback_model.speculative import VLLMTraceGenerator
    from leanloop.traces import trace_verdict

    out: dict[str, Any] = {}
    traces = {}
    for name, drafts in (("plain", 0), ("drafted", draft_tokens)):
        config = TraceGenerationConfig(
            max_new_tokens=max_new_tokens,
            max_input_tokens=max(len(p) for _, p in programs),
            draft_tokens=drafts,
            ngram_size=ngram_size,
            backend="vllm",
            device="cuda",
            dtype="bfloat16",
            fp8=fp8,
            gpu_memory_utilization=0.8,
        )
        generator = VLLMTraceGenerator(model_dir, tokenizer, config)
        generator.generate([programs[0][1]])  # warm-up
        began = time.perf_counter()
        traces[name] = [t[0] for t in generator.generate([p for _, p in programs])]
        out[f"{name}_seconds"] = time.perf_counter() - began
        del generator
        torch.cuda.empty_cache()
    out["speedup"] = out["plain_seconds"] / out["drafted_seconds"]
    out["verdict_agreement"] = sum(
        trace_verdict(a.text, a.truncated).valid == trace_verdict(b.text, b.truncated).valid
        for a, b in zip(traces["plain"], traces["drafted"])
    ) / len(programs)
    return out


def show(title: str, result: dict[str, Any]) -> None:
    print(f"\n== {title}")
    print(f"{'':22}{'plain':>12}{'drafted':>12}")
    for key, label in (
        ("seconds", "wall seconds"),
        ("programs_per_s", "programs/s"),
        ("tokens_per_s", "tokens/s"),
        ("tokens_per_forward", "tokens per forward"),
        ("tokens", "generated tokens"),
        ("truncated", "at output limit"),
    ):
        a, b = result.get(f"plain_{key}"), result.get(f"drafted_{key}")
        if a is not None:
            print(f"{label:22}{a:>12.3f}{b:>12.3f}" if isinstance(a, float) else f"{label:22}{a:>12}{b:>12}")
    if "drafted_forward_cost" in result:
        a = result["drafted_tokens_per_forward"] / result["plain_tokens_per_forward"]
        print(
            f"speedup = {a:.2f}x tokens per step / {result['step_cost_ratio']:.2f} plain steps per drafted step "
            f"= {a / result['step_cost_ratio']:.2f}x"
        )
        print(
            f"one forward alone: {result['plain_forward_s'] * 1e3:.2f} ms for 1 token, "
            f"{result['drafted_forward_s'] * 1e3:.2f} ms for 1 + drafts (x{result['drafted_forward_cost']:.2f}: "
            f"the output layer runs for every drafted position); every draft accepted would give at most "
            f"{result['speedup_at_full_acceptance']:.2f}x"
        )
    if "traces_keeping_the_program" in result:
        kept, n = result["traces_keeping_the_program"], result["programs"]
        print(
            f"traces that reproduce their program: {kept}/{n}; ended by the model (not the limit): "
            f"{result['finished_traces']}/{n}"
        )
        if kept < n / 2:
            print(
                "NOTE: this model does not copy its input (it is not a working feedback model), so drafts are "
                "accepted from its own repetitive output: the ratio below says little about copy-drafting on "
                "a trained feedback model; the forward costs above and the accepted tokens per forward do"
            )
    verdict = "meets" if result["speedup"] >= TARGET else "BELOW"
    print(
        f"speedup (plain / drafted): {result['speedup']:.2f}x — {verdict} the {TARGET:.0f}x target "
        f"(seed: {SEED_REPORTED}x)"
    )
    print(
        f"verdict agreement: {result['verdict_agreement']:.1%} (must be 100% under greedy)"
        + (f"; token-identical traces: {result['identical_traces']:.1%}" if "identical_traces" in result else "")
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    config, _ = parse_config(BenchConfig, argv, prog="python -m bench.feedback", description=__doc__.splitlines()[0])
    check_output_file(config.json)
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(
        f"[bench-feedback] {cores} core(s), load average {os.getloadavg()[0]:.1f}, torch threads {torch.get_num_threads()}, "
        f"GPU: {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'}"
    )
    results: dict[str, Any] = {}
    model, tokenizer, fmt, description = load_model(config.model, "cpu")
    print(f"[bench-feedback] model: {description}")
    programs = pick_programs(
        config.corpus, config.split, config.programs, tokenizer, fmt, config.max_input_tokens, config.seed
    )
    print(
        f"[bench-feedback] {len(programs)} programs of split {config.split!r} (prompt tokens "
        f"{min(len(p) for _, p in programs)}-{max(len(p) for _, p in programs)}), greedy, max {config.max_new_tokens} "
        f"new tokens, {config.draft_tokens} draft tokens, n-gram <= {config.ngram_size}"
    )
    results["cpu"] = {
        "model": description,
        **paired_runs(model, tokenizer, programs, config.max_new_tokens, config.draft_tokens, config.ngram_size, "cpu"),
    }
    show(f"CPU, transformers prompt lookup — {description}", results["cpu"])

    if torch.cuda.is_available():
        targets = [(config.model, model, tokenizer, description)]
        if config.paper_model:
            big, big_tok, _, big_description = load_model(config.paper_model, "cuda")
            targets.append((config.paper_model, big, big_tok, big_description))
        for ref, gpu_model, gpu_tok, gpu_description in targets:
            key = f"gpu:{ref}"
            results[key] = {
                "model": gpu_description,
                **paired_runs(
                    gpu_model.to("cuda"),
                    gpu_tok,
                    programs,
                    config.max_new_tokens,
                    config.draft_tokens,
                    config.ngram_size,
                    "cuda",
                ),
            }
            show(f"GPU, transformers prompt lookup — {gpu_description}", results[key])
        try:
            from leanloop.artifacts import resolve_model
            from leanloop.vllm_engine import import_vllm

            import_vllm()
            ref = config.paper_model or config.model
            results["gpu:vllm"] = vllm_pairs(
                resolve_model(ref, "feedback_model"),
                tokenizer,
                programs,
                config.max_new_tokens,
                config.draft_tokens,
                config.ngram_size,
                config.fp8,
            )
            print(
                f"\n== GPU, vLLM n-gram speculation ({ref}{', FP8' if config.fp8 else ''}): "
                f"speedup {results['gpu:vllm']['speedup']:.2f}x, verdict agreement "
                f"{results['gpu:vllm']['verdict_agreement']:.1%}"
            )
        except ImportError as error:
            print(f"\n[bench-feedback] vLLM not measured: {error}")
    else:
        print("\n[bench-feedback] no GPU here: the paper-model and vLLM measurements are skipped")
    if config.json:
        Path(config.json).write_text(json.dumps(results, indent=2, default=str))
    return results


if __name__ == "__main__":
    raise SystemExit(cli_entry(main, prog="python -m bench.feedback"))
