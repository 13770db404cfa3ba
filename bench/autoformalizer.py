"""``python -m bench.autoformalizer`` (``make bench-autoformalizer``): the autoformalizer's
policy costs, measured side by side in one run on a small-but-not-tiny Qwen3-MoE on CPU.
"""

from __future__ import annotations

import copy
import json
import os
import statistics
import time
from dataclasses import dataclass

import torch

from autoformalizer.adapters import AdapterConfig, apply_adapters
from leanloop.training.moe import MoEArchConfig, tiny_qwen3_moe
from autoformalizer.quantize import QuantConfig, estimate_bytes, paper_memory_report, parameter_bytes, quantize_nf4_
from leanloop.tool import cli_entry, parse_config

# bos/eos/pad: the last id of the bench vocabulary (Qwen's <|endoftext|>, 151,643, lies outside it)
BENCH_ARCH = MoEArchConfig(
    vocab_size=16_384,
    hidden_size=512,
    num_hidden_layers=4,
    num_attention_heads=8,
    num_key_value_heads=2,
    head_dim=64,
    intermediate_size=1024,
    moe_intermediate_size=384,
    num_experts=16,
    num_experts_per_tok=4,
    bos_token_id=16_383,
    eos_token_id=16_383,
    pad_token_id=16_383,
)
# --smoke: the same code on a model a few seconds can build, quantize and train (every 4-bit layer's
# input width a multiple of the NF4 block size, 64)
SMOKE_ARCH = MoEArchConfig(
    vocab_size=1_024,
    hidden_size=64,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,
    intermediate_size=128,
    moe_intermediate_size=64,
    num_experts=4,
    num_experts_per_tok=2,
    bos_token_id=1_023,
    eos_token_id=1_023,
    pad_token_id=1_023,
)


@dataclass
class BenchConfig:
    threads: int = 1
    """Torch intra-op threads."""
    batch: int = 2
    """Sequences per forward and training step."""
    seq: int = 128
    """Tokens per sequence."""
    repeats: int = 3
    """Interleaved repetitions per timing (medians)."""
    smoke: bool = False
    """A tiny MoE, one repetition: checks the bench runs (seconds)."""

    def __post_init__(self) -> None:
        if self.smoke:
            self.batch, self.seq, self.repeats = 1, 16, 1


def cpu_seconds(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def interleaved(fns: dict[str, callable], repeats: int) -> dict[str, float]:
    """Median CPU seconds of each function, run A B A B ... after one warm-up each."""
    for fn in fns.values():
        fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            samples[name].append(cpu_seconds(fn))
    return {name: statistics.median(values) for name, values in samples.items()}


def bench_memory(arch: MoEArchConfig, quant: QuantConfig) -> dict:
    model = tiny_qwen3_moe(arch, dtype=torch.bfloat16)
    bf16 = parameter_bytes(model)["total"]
    estimate = estimate_bytes(model, quant)["total"]
    quantize_nf4_(model, quant)
    nf4 = parameter_bytes(model)["total"]
    paper = paper_memory_report(quant)
    return {
        "bf16_bytes": bf16,
        "nf4_bytes": nf4,
        "ratio": bf16 / nf4,
        "nf4_estimate_bytes": estimate,
        "paper_bf16_gb": paper.bf16_bytes["total"] / 1e9,
        "paper_nf4_gb": paper.nf4_bytes["total"] / 1e9,
        "paper_ratio": paper.ratio,
        "paper_table": paper.table(),
    }


def bench_forward(arch: MoEArchConfig, batch: int, seq: int, repeats: int) -> dict:
    fused = tiny_qwen3_moe(arch, unfused=False)
    unfused = tiny_qwen3_moe(arch, unfused=True)
    ids = torch.randint(0, arch.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        diff = (fused(ids).logits - unfused(ids).logits).abs().max().item()

    def run(model):
        return lambda: model(ids)

    results = {}
    for impl in ("eager", "grouped_mm"):
        fused.set_experts_implementation(impl)
        with torch.no_grad():
            times = interleaved({"fused": run(fused), "unfused": run(unfused)}, repeats)
        results[impl] = {
            "fused_s": times["fused"],
            "unfused_s": times["unfused"],
            "unfused_over_fused": times["unfused"] / times["fused"],
        }
    return {"max_abs_logit_diff": diff, "tokens": batch * seq, **results}


def bench_adapters(arch: MoEArchConfig, quant: QuantConfig, batch: int, seq: int, repeats: int) -> dict:
    base = tiny_qwen3_moe(arch, dtype=torch.bfloat16)
    quantize_nf4_(base, quant)
    ids = torch.randint(0, arch.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(1))
    steps = {}
    reports = {}
    for name, dora in (("qlora", False), ("qdora", True)):
        model = apply_adapters(copy.deepcopy(base), AdapterConfig(use_dora=dora, dropout=0.0))
        model.train()
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)

        def step(model=model, optimizer=optimizer):
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        steps[name] = step
        reports[name] = sum(p.numel() for p in model.parameters() if p.requires_grad)
    times = interleaved(steps, repeats)
    tokens = batch * seq
    out = {name: {"step_s": t, "tokens_per_s": tokens / t, "trainable": reports[name]} for name, t in times.items()}
    out["qdora_slowdown"] = times["qdora"] / times["qlora"]
    return out


def main(argv: list[str] | None = None) -> dict:
    config, _ = parse_config(
        BenchConfig, argv, prog="python -m bench.autoformalizer", description=__doc__.split("\n\n")[0]
    )
    arch = SMOKE_ARCH if config.smoke else BENCH_ARCH
    torch.set_num_threads(config.threads)
    torch.manual_seed(0)
    quant = QuantConfig(compute_dtype="float32")  # CPU matmuls are faster in fp32 than bf16
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    params = sum(p.numel() for p in tiny_qwen3_moe(arch, unfused=False).parameters())
    print(
        f"[bench-autoformalizer]{' SMOKE (tiny sizes, ratios meaningless)' if config.smoke else ''} {cores} usable cores, torch threads {config.threads}; bench MoE: "
        f"{arch.num_hidden_layers} layers, hidden {arch.hidden_size}, {arch.num_experts} experts "
        f"top-{arch.num_experts_per_tok}, {params / 1e6:.1f} M parameters; batch {config.batch} x {config.seq} tokens"
    )
    memory = bench_memory(arch, quant)
    print(
        f"[memory] bf16 {memory['bf16_bytes'] / 2**20:.1f} MiB -> NF4 {memory['nf4_bytes'] / 2**20:.1f} MiB: "
        f"{memory['ratio']:.2f}x smaller (module-tree estimate {memory['nf4_estimate_bytes'] / 2**20:.1f} MiB)"
    )
    print(
        f"[memory] Qwen3-Coder-30B-A3B (module tree): bf16 {memory['paper_bf16_gb']:.2f} GB -> NF4 "
        f"{memory['paper_nf4_gb']:.2f} GB, {memory['paper_ratio']:.2f}x (seed: ~60 GB -> ~16.7 GB)"
    )
    forward = bench_forward(arch, config.batch, config.seq, config.repeats)
    for impl in ("eager", "grouped_mm"):
        r = forward[impl]
        print(
            f"[forward] fused ({impl}) {r['fused_s'] * 1e3:.0f} ms vs unfused {r['unfused_s'] * 1e3:.0f} ms "
            f"CPU per forward: unfused/fused {r['unfused_over_fused']:.2f}x"
        )
    print(f"[forward] max |logit difference| fused vs unfused: {forward['max_abs_logit_diff']:.2e}")
    adapters = bench_adapters(arch, quant, config.batch, config.seq, config.repeats)
    print(
        f"[train step] QLoRA {adapters['qlora']['tokens_per_s']:.0f} tokens/s vs QDoRA "
        f"{adapters['qdora']['tokens_per_s']:.0f} tokens/s: QDoRA {adapters['qdora_slowdown']:.2f}x slower "
        "(seed: ~2.2x)"
    )
    result = {
        "cores": cores,
        "threads": config.threads,
        "memory": {k: v for k, v in memory.items() if k != "paper_table"},
        "forward": forward,
        "adapters": adapters,
    }
    print(json.dumps(result, default=float))
    return result


if __name__ == "__main__":
    raise SystemExit(cli_entry(main, prog="python -m bench.autoformalizer"))
