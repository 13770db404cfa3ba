"""``python -m leanloop.bench.classifiers`` (part of ``make bench-train``): classifier scoring throughput.

Candidates scored per second by both verdict classifiers through the Evaluator API
(:class:`classifiers.evaluator.ClassifierEvaluator`: tokenize, head+tail truncate, batch by length,
one forward per batch), on the same real programs (the shipped RL-Lean candidates), measured side
by side in one run: the encoder, the one-token classifier, their ratio, and batched vs one at a time.

Models: the trained runs' ``final/`` folders when they exist (``make classifiers``), otherwise the
same architectures untrained (the shipped MiniLM with a fresh head; a tiny Qwen3 with the real
vocabulary): throughput depends on the architecture and the input lengths, not on the weights.
Wall time is reported with the machine's core count and load, since other work on a shared machine
slows every number alike (the ratios are the comparable part).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time
from pathlib import Path

import torch

from leanloop.paths import artifacts_root, shared_data_dir

DEFAULT_RUNS = {"encoder": "classifiers/encoder_default", "onetoken": "classifiers/onetoken_default"}


def real_programs(n: int) -> list[str]:
    path = shared_data_dir() / "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        programs = [json.loads(line)["code"] for line in handle]
    return programs[:n]


def evaluator(kind: str, max_length: int, batch_size: int):
    """The trained run's evaluator if it exists, else the same architecture untrained."""
    from classifiers.evaluator import ClassifierEvaluator, ClassifierSpec
    from classifiers.scoring import FALSE_TOKEN, ONETOKEN_SUFFIX, TRUE_TOKEN
    from leanloop.training.models import ModelSpec, load_model, load_tokenizer

    final = artifacts_root() / DEFAULT_RUNS[kind] / "final"
    if (final / "classifier.json").is_file():
        return ClassifierEvaluator.load(final, batch_size=batch_size), str(final)
    if kind == "encoder":
        from transformers import AutoModelForSequenceClassification

        spec, auto = ModelSpec("minilm"), AutoModelForSequenceClassification
        classifier = ClassifierSpec("encoder", max_length, 0.25)
    else:
        from transformers import AutoModelForCausalLM

        spec, auto = ModelSpec("qwen3-tiny"), AutoModelForCausalLM
        classifier = ClassifierSpec("onetoken", max_length, 0.25, suffix=ONETOKEN_SUFFIX,
                                    true_token=TRUE_TOKEN, false_token=FALSE_TOKEN)
    tokenizer = load_tokenizer(spec)
    model = load_model(spec, auto, tokenizer=tokenizer)
    return ClassifierEvaluator(classifier, model, tokenizer, batch_size=batch_size), f"untrained {spec.name}"


def throughput(ev, programs: list[str], repeats: int = 1) -> float:
    ev.score(programs[: ev.batch_size])  # warm-up (allocator, kernels)
    start = time.perf_counter()
    for _ in range(repeats):
        predictions = ev.score(programs)
    elapsed = time.perf_counter() - start
    if any(p.score is None for p in predictions):
        raise RuntimeError("a benchmark run left programs unscored")
    return repeats * len(programs) / elapsed


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=96, help="real programs scored per measurement")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--encoder-max-length", type=int, default=256)
    parser.add_argument("--onetoken-max-length", type=int, default=1024)
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    programs = real_programs(args.programs)
    results: dict[str, float] = {}
    print(f"classifier scoring throughput: {len(programs)} real RL-Lean programs, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}, torch threads {torch.get_num_threads()}")
    for kind, max_length in (("encoder", args.encoder_max_length), ("onetoken", args.onetoken_max_length)):
        from classifiers.evaluator import ClassifierEvaluator

        batched, source = evaluator(kind, max_length, args.batch_size)
        single = ClassifierEvaluator(batched.spec, batched.model, batched.tokenizer, batch_size=1)
        results[f"{kind}_batched"] = throughput(batched, programs)
        results[f"{kind}_single"] = throughput(single, programs[: max(8, len(programs) // 4)])
        print(f"  {kind:9s} ({source}, context {batched.spec.max_length}): "
              f"{results[f'{kind}_batched']:8.1f} candidates/s at batch {args.batch_size}, "
              f"{results[f'{kind}_single']:8.1f} at batch 1 "
              f"(batching x{results[f'{kind}_batched'] / results[f'{kind}_single']:.2f})")
    ratio = results["onetoken_batched"] / results["encoder_batched"]
    print(f"  one-token / encoder throughput ratio: {ratio:.2f}")
    results["onetoken_over_encoder"] = ratio
    return results


if __name__ == "__main__":
    main()
