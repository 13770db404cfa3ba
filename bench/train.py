"""``python -m bench.train`` (``make bench-train``): packed vs naively padded batches."""

from __future__ import annotations

import copy
import os
import random
import time
from dataclasses import dataclass

import torch
import yaml

from leanloop.paths import REPO_ROOT
from leanloop.tool import cli_entry, parse_config
from leanloop.training.models import ModelSpec, load_model, load_tokenizer
from leanloop.training.packing import (
    IGNORE,
    PackedCollator,
    PaddedCollator,
    lm_examples,
    pack_examples,
    pack_lengths,
)

PADDING_TARGET = 0.02
SPEEDUP_TARGET = 1.5


@dataclass
class BenchConfig:
    examples: int = 40
    """Random examples trained both ways."""
    max_length: int = 512
    """Tokens per example and per packed row."""
    batch_size: int = 4
    """Sequences per step."""
    seed: int = 0
    """Seed of the sampled examples, their order and the initial weights."""
    smoke: bool = False
    """The corpus's first 200 documents, 4 examples of 64 tokens, batch 2: checks the bench runs (seconds;
    ratios meaningless)."""

    def __post_init__(self) -> None:
        if self.smoke:
            self.examples, self.max_length, self.batch_size = 4, 64, 2


def default_corpus_examples(tokenizer, max_length: int, documents_limit: int | None = None) -> list[dict]:
    from pretrain.config import CorpusConfig, JsonlSource
    from pretrain.documents import collect_documents

    corpus = yaml.safe_load((REPO_ROOT / "configs/pretrain/default.yaml").read_text())["data"]["corpus"]
    # the holdout (a data-stage run's eval theorems, a few dozen documents) is left in: lengths
    # and throughput do not depend on which theorems, and the bench then needs no `make data`
    corpus.pop("holdout", None)
    config = CorpusConfig(**{**corpus, "jsonl": [JsonlSource(**j) for j in corpus.get("jsonl", [])]})
    documents, _ = collect_documents(config)
    return [e for d in documents[:documents_limit] for e in lm_examples(tokenizer, d["text"], max_length)]


def epoch_padding(lengths: list[int], max_length: int, batch_size: int, seed: int) -> dict[str, float]:
    """Padding fraction of one epoch's batch tensors, packed and padded (each batch padded to its
    longest sequence, as the collators do)."""
    rng = random.Random(seed)
    rows = [sum(lengths[i] for i in b) for b in pack_lengths(lengths, max_length)]
    rng.shuffle(rows)
    order = lengths[:]
    rng.shuffle(order)

    def padding(seqs: list[int]) -> float:
        tensor = sum(
            max(seqs[i : i + batch_size]) * len(seqs[i : i + batch_size]) for i in range(0, len(seqs), batch_size)
        )
        return 1 - sum(seqs) / tensor

    return {"packed": padding(rows), "padded": padding(order), "rows": len(rows)}


def summed_loss(model, batches: list[dict]) -> tuple[float, int]:
    """Sum of token losses and the number of trained tokens (batch means differ by composition)."""
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in batches:
            n = int((batch["labels"][:, 1:] != IGNORE).sum())
            total += float(model(**batch).loss) * n
            count += n
    return total, count


def train_side_by_side(models: dict, batches: dict[str, list]) -> dict[str, dict[str, float]]:
    """One pass per batching, steps alternating; wall and process-CPU seconds in each run's steps."""
    optimizers = {kind: torch.optim.AdamW(model.parameters(), lr=1e-3) for kind, model in models.items()}
    queues = {kind: list(b) for kind, b in batches.items()}
    seconds = {kind: {"wall": 0.0, "cpu": 0.0} for kind in models}
    for model in models.values():
        model.train()
    while any(queues.values()):
        for kind, queue in queues.items():
            if not queue:
                continue
            batch = queue.pop(0)
            wall, cpu = time.perf_counter(), time.process_time()
            models[kind](**batch).loss.backward()
            optimizers[kind].step()
            optimizers[kind].zero_grad(set_to_none=True)
            seconds[kind]["wall"] += time.perf_counter() - wall
            seconds[kind]["cpu"] += time.process_time() - cpu
    return seconds


def bench_packing(
    examples_n: int = 40, max_length: int = 512, batch_size: int = 4, seed: int = 0, documents_limit: int | None = None
) -> dict:
    tokenizer = load_tokenizer("qwen3")
    examples = default_corpus_examples(tokenizer, max_length, documents_limit)
    lengths = [len(e["input_ids"]) for e in examples]
    corpus = epoch_padding(lengths, max_length, batch_size, seed)

    rng = random.Random(seed)
    sample = rng.sample(examples, min(examples_n, len(examples)))
    real = sum(len(e["input_ids"]) for e in sample)
    rows = pack_examples(sample, max_length)
    rng.shuffle(rows)
    order = sample[:]
    rng.shuffle(order)
    batches = {
        "packed": [
            PackedCollator(tokenizer.pad_token_id)(rows[i : i + batch_size]) for i in range(0, len(rows), batch_size)
        ],
        "padded": [
            PaddedCollator(tokenizer.pad_token_id)(order[i : i + batch_size]) for i in range(0, len(order), batch_size)
        ],
    }
    tensor_tokens = {kind: sum(b["input_ids"].numel() for b in bs) for kind, bs in batches.items()}

    torch.manual_seed(seed)
    base = load_model(ModelSpec("qwen3-tiny"), tokenizer=tokenizer).eval()
    losses = {kind: summed_loss(base, bs) for kind, bs in batches.items()}
    seconds = train_side_by_side({"packed": base, "padded": copy.deepcopy(base)}, batches)

    result = {
        "max_length": max_length,
        "batch_size": batch_size,
        "documents_limit": documents_limit,
        "corpus": {"examples": len(examples), "tokens": sum(lengths), **corpus},
        "sample": {"examples": len(sample), "tokens": real, "rows": len(rows)},
    }
    for kind in ("packed", "padded"):
        result[kind] = {
            "steps": len(batches[kind]),
            "sample_padding": 1 - real / tensor_tokens[kind],
            "tensor_tokens": tensor_tokens[kind],
            "seconds": seconds[kind]["wall"],
            "tokens_per_s": real / seconds[kind]["wall"],
            "cpu_seconds": seconds[kind]["cpu"],
            "tokens_per_cpu_s": real / seconds[kind]["cpu"],
            "loss": losses[kind][0] / losses[kind][1],
            "trained_tokens": losses[kind][1],
        }
    result["speedup"] = result["packed"]["tokens_per_cpu_s"] / result["padded"]["tokens_per_cpu_s"]
    result["wall_speedup"] = result["packed"]["tokens_per_s"] / result["padded"]["tokens_per_s"]
    result["loss_abs_diff"] = abs(result["packed"]["loss"] - result["padded"]["loss"])
    return result


def report(r: dict) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    ok = lambda good: "PASS" if good else "FAIL"  # noqa: E731
    c, s = r["corpus"], r["sample"]
    same_tokens = r["packed"]["trained_tokens"] == r["padded"]["trained_tokens"]
    lines = [
        f"# packed vs padded batches (tiny Qwen3, real Qwen vocabulary) - {os.cpu_count()} cores, "
        f"load {load:.1f}, torch threads {torch.get_num_threads()}",
        f"max_length {r['max_length']}, batch_size {r['batch_size']} sequences per step",
        f"{'default corpus' if r.get('documents_limit') is None else 'first %d documents of the default corpus' % r['documents_limit']} ({c['examples']:,} examples, {c['tokens']:,} tokens; {c['rows']:,} packed rows): "
        f"padding packed {c['packed']:.2%}, padded {c['padded']:.2%}",
        f"trained here: {s['examples']} random examples, {s['tokens']:,} tokens ({s['rows']} packed rows)",
        f"{'':8} {'steps':>6} {'padding':>9} {'CPU s':>8} {'tokens/CPU s':>13} {'wall s':>8} {'tokens/s':>9}",
    ]
    for kind in ("packed", "padded"):
        k = r[kind]
        lines.append(
            f"{kind:8} {k['steps']:>6} {k['sample_padding']:>8.1%} {k['cpu_seconds']:>8.1f} "
            f"{k['tokens_per_cpu_s']:>13.0f} {k['seconds']:>8.1f} {k['tokens_per_s']:>9.0f}"
        )
    tensor_ratio = r["padded"]["tensor_tokens"] / r["packed"]["tensor_tokens"]
    lines += [
        f"padding fraction packed over the corpus {c['packed']:.2%} (target <= {PADDING_TARGET:.0%}): "
        f"{ok(c['packed'] <= PADDING_TARGET)}",
        f"training tokens per CPU second packed / padded = {r['speedup']:.2f}x (target >= {SPEEDUP_TARGET}x; "
        f"the batch tensors hold {tensor_ratio:.2f}x fewer positions packed): {ok(r['speedup'] >= SPEEDUP_TARGET)}",
        f"  per wall-clock second: {r['wall_speedup']:.2f}x (load {load:.1f} on {os.cpu_count()} cores; "
        "other processes' share of the cores lands in it at random)",
        f"loss of the same weights on the same examples: packed {r['packed']['loss']:.6f}, padded "
        f"{r['padded']['loss']:.6f}, |diff| {r['loss_abs_diff']:.2e} over {r['packed']['trained_tokens']:,} "
        f"trained tokens: {ok(r['loss_abs_diff'] < 1e-4 and same_tokens)}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    config, _ = parse_config(BenchConfig, argv, prog="python -m bench.train", description=__doc__.splitlines()[0])
    result = bench_packing(
        config.examples, config.max_length, config.batch_size, config.seed, 200 if config.smoke else None
    )
    print(report(result), flush=True)
    return result


if __name__ == "__main__":
    raise SystemExit(cli_entry(main, prog="python -m bench.train"))
