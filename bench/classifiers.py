"""``python -m bench.classifiers`` (part of ``make bench-train``): classifier scoring throughput."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from leanloop.jsonl import read_jsonl
from leanloop.paths import artifacts_root, shared_data_dir
from leanloop.tool import cli_entry, parse_config

SCORE_TOLERANCE = 1e-4  # float32 sums in a different order (padded vs unpadded rows)
DEFAULT_RUNS = {"encoder": "classifiers/encoder_default", "onetoken": "classifiers/onetoken_default"}


@dataclass
class BenchConfig:
    programs: int = 96
    """Real programs scored per measurement."""
    batch_size: int = 16
    """Programs per forward of the batched evaluators."""
    smoke: bool = False
    """8 programs, batch 4: checks the bench runs (seconds; ratios meaningless)."""

    def __post_init__(self) -> None:
        if self.smoke:
            self.programs, self.batch_size = 8, 4


def real_programs(n: int) -> list[str]:
    path = shared_data_dir() / "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz"
    return [row["code"] for row in read_jsonl(path, limit=n)]


def default_config(kind: str) -> tuple[dict, int, str]:
    """(base model spec fields, max_length, encoder pooling) of a classifier's embedded default config."""
    import yaml

    from leanloop.paths import REPO_ROOT

    config = yaml.safe_load((REPO_ROOT / "configs/classifiers" / f"{kind}_default.yaml").read_text())
    init = config["model"]["init_args"]
    return dict(init["base"]), int(init.get("inputs", {}).get("max_length", 512)), init.get("pooling", "cls")


def _finished(ref: str) -> bool:
    from leanloop.artifacts import ManifestError, resolve_run

    try:
        return resolve_run(ref) is not None
    except (ManifestError, FileNotFoundError):
        return False


def evaluator(kind: str, batch_size: int):
    """The trained default run's evaluator if it exists, else the default config's architecture
    untrained (a base run that is not there yet: the preset it descends from)."""
    from classifiers.evaluator import ClassifierEvaluator, ClassifierSpec
    from classifiers.model_io import FALSE_TOKEN, ONETOKEN_SUFFIX, TRUE_TOKEN
    from leanloop.training.models import ModelSpec, load_model, load_tokenizer

    final = artifacts_root() / DEFAULT_RUNS[kind] / "final"
    if (final / "classifier.json").is_file():
        return ClassifierEvaluator.load(final, batch_size=batch_size), str(final)
    base, max_length, pooling = default_config(kind)
    if base["name"].startswith("artifacts://") and not _finished(base["name"]):
        base = {"name": str(base.get("expect_base", "")).removeprefix("preset:") or "qwen3-tiny"}
    spec = ModelSpec(name=base["name"], overrides=dict(base.get("overrides", {})))
    if kind == "encoder":
        from transformers import AutoModelForSequenceClassification as auto

        classifier = ClassifierSpec("encoder", max_length, 0.25, pooling=pooling)
    else:
        from transformers import AutoModelForCausalLM as auto

        classifier = ClassifierSpec(
            "onetoken", max_length, 0.25, suffix=ONETOKEN_SUFFIX, true_token=TRUE_TOKEN, false_token=FALSE_TOKEN
        )
    tokenizer = load_tokenizer(spec)
    model = load_model(spec, auto, tokenizer=tokenizer)
    return ClassifierEvaluator(classifier, model, tokenizer, batch_size=batch_size), f"untrained {spec.name}"


def throughput(ev, programs: list[str], repeats: int = 1) -> tuple[float, list[float]]:
    """(candidates per second, the scores) of scoring ``programs`` through the Evaluator API."""
    ev.score(programs[: ev.batch_size])  # warm-up (allocator, kernels)
    start = time.perf_counter()
    for _ in range(repeats):
        predictions = ev.score(programs)
    elapsed = time.perf_counter() - start
    if any(p.score is None for p in predictions):
        raise RuntimeError("a benchmark run left programs unscored")
    return repeats * len(programs) / elapsed, [p.score for p in predictions]


def main(argv: list[str] | None = None) -> dict[str, float]:
    config, _ = parse_config(BenchConfig, argv, prog="python -m bench.classifiers", description=__doc__.splitlines()[0])
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    programs = real_programs(config.programs)
    results: dict[str, float] = {}
    print(
        f"classifier scoring throughput: {len(programs)} real RL-Lean programs, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f}, torch threads {torch.get_num_threads()}"
    )
    agree = True
    for kind in ("encoder", "onetoken"):
        from classifiers.evaluator import ClassifierEvaluator

        batched, source = evaluator(kind, config.batch_size)
        single = ClassifierEvaluator(batched.spec, batched.model, batched.tokenizer, batch_size=1)
        results[f"{kind}_batched"], batched_scores = throughput(batched, programs)
        few = programs[: max(8, len(programs) // 4)]
        results[f"{kind}_single"], single_scores = throughput(single, few)
        # Batching must not change a score (padding is masked): the speed is only worth having if so.
        gap = max(abs(a - b) for a, b in zip(batched_scores, single_scores))
        results[f"{kind}_max_score_gap"] = gap
        agree &= gap <= SCORE_TOLERANCE
        print(
            f"  {kind:9s} ({source}, context {batched.spec.max_length}): "
            f"{results[f'{kind}_batched']:8.1f} candidates/s at batch {config.batch_size}, "
            f"{results[f'{kind}_single']:8.1f} at batch 1 "
            f"(batching x{results[f'{kind}_batched'] / results[f'{kind}_single']:.2f}); "
            f"batched vs one-at-a-time scores differ by at most {gap:.1e}"
        )
    ratio = results["onetoken_batched"] / results["encoder_batched"]
    print(f"  one-token / encoder throughput ratio: {ratio:.2f}")
    results["onetoken_over_encoder"] = ratio
    print(
        f"  {'PASS' if agree else 'FAIL'}: batched scoring gives the one-at-a-time scores "
        f"(tolerance {SCORE_TOLERANCE:g}) for both classifiers"
    )
    return results


if __name__ == "__main__":
    raise SystemExit(cli_entry(main, prog="python -m bench.classifiers"))
