"""``python -m leanloop.bench.train`` (``make bench-train``): packed vs naively padded batches.

On the embedded default pretraining corpus (configs/pretrain/default.yaml: shipped Lean text,
statements, accepted proofs) tokenized with the real Qwen3 vocabulary and packed whole, the examples
of a few random packed rows are batched two ways and trained for one pass from the same initial
weights of the tiny Qwen3:

- packed: examples packed into ``max_length`` rows (best-fit decreasing), ``batch_size`` rows per
  step, position ids reset per example, block-diagonal attention (leanloop.training.packing);
- padded: the same examples in shuffled order, ``batch_size`` per step, right-padded to the longest.

Reported side by side in one run: padding fraction of the batch tensors (target packed <= 2%),
trained tokens per second (target packed >= 1.5x padded; steps of the two runs alternate so that
load from other processes hits both alike), and the loss of the SAME weights on the SAME examples
computed both ways (must be identical up to float tolerance: the packing is exact).
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import time

import torch
import yaml

from leanloop.paths import REPO_ROOT
from leanloop.training.models import ModelSpec, load_model, load_tokenizer
from leanloop.training.packing import PackedCollator, PaddedCollator, lm_examples, pack_examples

PADDING_TARGET = 0.02
SPEEDUP_TARGET = 1.5


def default_corpus_examples(tokenizer, max_length: int) -> list[dict]:
    from pretrain.config import CorpusConfig, JsonlSource
    from pretrain.corpus import collect_documents

    corpus = yaml.safe_load((REPO_ROOT / "configs/pretrain/default.yaml").read_text())["data"]["corpus"]
    config = CorpusConfig(**{**corpus, "jsonl": [JsonlSource(**j) for j in corpus.get("jsonl", [])]})
    documents, _ = collect_documents(config)
    return [e for d in documents for e in lm_examples(tokenizer, d["text"], max_length)]


def padding_fraction(batches: list[dict], pad_lengths: list[int]) -> float:
    total = sum(b["input_ids"].numel() for b in batches)
    return 1.0 - sum(pad_lengths) / total


def summed_loss(model, batches: list[dict]) -> tuple[float, int]:
    """Sum of token losses and the number of trained tokens (means differ by batch composition)."""
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in batches:
            n = int((batch["labels"][:, 1:] != -100).sum())
            total += float(model(**batch).loss) * n
            count += n
    return total, count


def bench_packing(rows_n: int = 24, max_length: int = 512, batch_size: int = 4, seed: int = 0) -> dict:
    """The whole default corpus is packed (as training would); ``rows_n`` packed rows are drawn and
    their examples are what both runs train on."""
    tokenizer = load_tokenizer("qwen3")
    examples = default_corpus_examples(tokenizer, max_length)
    rng = random.Random(seed)
    all_rows = pack_examples(examples, max_length)
    corpus_padding = 1 - sum(len(e["input_ids"]) for e in examples) / (len(all_rows) * max_length)
    rng.shuffle(all_rows)
    rows = all_rows[:rows_n]
    sample = [e for row in rows for e in row]
    real = sum(len(e["input_ids"]) for e in sample)

    packed_collate = PackedCollator(tokenizer.pad_token_id)
    packed = [packed_collate(rows[i:i + batch_size]) for i in range(0, len(rows), batch_size)]
    packed_real = [sum(len(e["input_ids"]) for r in rows[i:i + batch_size] for e in r)
                   for i in range(0, len(rows), batch_size)]
    order = sample[:]
    rng.shuffle(order)
    padded_collate = PaddedCollator(tokenizer.pad_token_id)
    padded = [padded_collate(order[i:i + batch_size]) for i in range(0, len(order), batch_size)]
    padded_real = [int(b["attention_mask"].sum()) for b in padded]

    torch.manual_seed(seed)
    base = load_model(ModelSpec("qwen3-tiny"), tokenizer=tokenizer)
    base.eval()
    loss_packed, n_packed = summed_loss(base, packed)
    loss_padded, n_padded = summed_loss(base, padded)

    models = {"packed": base, "padded": copy.deepcopy(base)}
    optimizers = {k: torch.optim.AdamW(m.parameters(), lr=1e-3) for k, m in models.items()}
    queues = {"packed": list(packed), "padded": list(padded)}
    seconds = {"packed": 0.0, "padded": 0.0}
    for model in models.values():
        model.train()
    while any(queues.values()):  # alternate steps: background load hits both runs alike
        for kind, queue in queues.items():
            if not queue:
                continue
            batch = queue.pop(0)
            start = time.perf_counter()
            loss = models[kind](**batch).loss
            loss.backward()
            optimizers[kind].step()
            optimizers[kind].zero_grad(set_to_none=True)
            seconds[kind] += time.perf_counter() - start

    result = {
        "corpus_examples": len(examples), "corpus_rows": len(all_rows), "corpus_padding": corpus_padding,
        "rows": len(rows), "examples": len(sample), "real_tokens": real, "max_length": max_length, "batch_size": batch_size,
        "packed": {"steps": len(packed), "padding_fraction": padding_fraction(packed, packed_real),
                   "seconds": seconds["packed"], "tokens_per_s": real / seconds["packed"]},
        "padded": {"steps": len(padded), "padding_fraction": padding_fraction(padded, padded_real),
                   "seconds": seconds["padded"], "tokens_per_s": real / seconds["padded"]},
        "loss_same_weights": {"packed": loss_packed / n_packed, "padded": loss_padded / n_padded,
                              "trained_tokens": [n_packed, n_padded]},
    }
    result["speedup"] = result["packed"]["tokens_per_s"] / result["padded"]["tokens_per_s"]
    result["loss_abs_diff"] = abs(result["loss_same_weights"]["packed"] - result["loss_same_weights"]["padded"])
    return result


def report(r: dict) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    ok = lambda good: "PASS" if good else "FAIL"  # noqa: E731
    lines = [
        f"# packed vs padded batches (tiny Qwen3, real Qwen vocabulary) — {os.cpu_count()} cores, "
        f"load {load:.1f}, torch threads {torch.get_num_threads()}",
        f"default corpus: {r['corpus_examples']:,} examples packed into {r['corpus_rows']:,} rows of "
        f"{r['max_length']} tokens, {r['corpus_padding']:.2%} padding",
        f"trained here: the {r['examples']} examples ({r['real_tokens']:,} tokens) of {r['rows']} "
        f"random rows, batch_size {r['batch_size']} (rows packed, examples padded)",
        f"{'':8} {'steps':>6} {'padding':>9} {'seconds':>9} {'tokens/s':>10}",
    ]
    for kind in ("packed", "padded"):
        k = r[kind]
        lines.append(f"{kind:8} {k['steps']:>6} {k['padding_fraction']:>8.1%} {k['seconds']:>9.1f} "
                     f"{k['tokens_per_s']:>10.0f}")
    loss = r["loss_same_weights"]
    lines += [
        f"padding fraction packed {r['packed']['padding_fraction']:.2%} (target <= {PADDING_TARGET:.0%}): "
        f"{ok(r['packed']['padding_fraction'] <= PADDING_TARGET)}",
        f"training tokens/s packed / padded = {r['speedup']:.2f}x (target >= {SPEEDUP_TARGET}x): "
        f"{ok(r['speedup'] >= SPEEDUP_TARGET)}",
        f"loss of the same weights on the same examples: packed {loss['packed']:.6f}, padded "
        f"{loss['padded']:.6f}, |diff| {r['loss_abs_diff']:.2e} over {loss['trained_tokens'][0]:,} "
        f"trained tokens: {ok(r['loss_abs_diff'] < 1e-4 and loss['trained_tokens'][0] == loss['trained_tokens'][1])}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=24, help="packed rows drawn; their examples are trained both ways")
    parser.add_argument("--max_length", type=int, default=512)
    parser.add_argument("--batch_size", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(report(bench_packing(args.rows, args.max_length, args.batch_size, args.seed)), flush=True)


if __name__ == "__main__":
    main()
