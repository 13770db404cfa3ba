"""The autoformalizer end to end on the debug configs: Stage 1 SFT (fast_dev_run) -> its exported
policy -> Stage 2 GRPO from it (fast_dev_run) -> the nine-metric evaluation of the result, whose
report names every metric it could not compute without Lean, and why."""

from __future__ import annotations

import json

import pytest
import torch

from leanloop.paths import REPO_ROOT


def _check_sft_export(result) -> None:
    """final/ holds the adapter merged into the full-precision base (Hugging Face format, unfused),
    final/adapter/ the adapter as trained; the manifest names the recipe and the theorems."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from autoformalizer.policy import build_base, full_precision

    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["stage"] == "autoformalizer" and manifest["model"]["model_type"] == "qwen3_moe_unfused"
    assert manifest["model"]["trainable"]["method"] == "QLoRA" and manifest["model"]["base"] == "preset:qwen3-moe-tiny"
    counts = manifest["counts"]
    assert counts["train_examples"] == 8 and not set(counts["train_theorems"]) & set(counts["test_theorems"])
    final = result.run_dir / "final"
    merged = AutoModelForCausalLM.from_pretrained(final).eval()
    assert type(merged).__name__ == "UnfusedQwen3MoeForCausalLM"
    # the adapter moved in the one step (lora_B starts at zero), and merging it is exact
    trained = result.model.model
    assert any(float(p.detach().abs().sum()) > 0 for n, p in trained.named_parameters() if "lora_B" in n)
    config = result.model.policy_config
    base = build_base(full_precision(config)).eval()
    ids = torch.tensor([[151644, 8948, 198, 2610, 525, 458]])
    with torch.no_grad():
        before = base(ids).logits
        adapted = PeftModel.from_pretrained(base, final / "adapter").eval()
        assert torch.allclose(merged(ids).logits, adapted(ids).logits, atol=1e-4)
        assert not torch.allclose(merged(ids).logits, before, atol=1e-6)


@pytest.mark.slow
def test_sft_grpo_evaluation_on_the_debug_configs(artifacts):
    from autoformalizer.config import load_config
    from autoformalizer.evaluate import run as evaluate
    from autoformalizer.train import run as sft
    from autoformalizer.train_grpo import run as grpo

    _check_sft_export(
        sft(["--config", str(REPO_ROOT / "configs/autoformalizer/debug.yaml"), "--trainer.fast_dev_run", "true"])
    )
    result = grpo(
        ["--config", str(REPO_ROOT / "configs/autoformalizer/grpo/debug.yaml"), "--trainer.fast_dev_run", "true"]
    )
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["stage"] == "autoformalizer_grpo" and manifest["inputs"]["base_model"]["path"].endswith(
        "autoformalizer/debug"
    )
    G = manifest["counts"]["grpo"]["num_generations"]
    assert manifest["counts"]["grpo"]["beta"] == 0.04 and manifest["counts"]["rollouts"]["rollouts"] == G
    assert "well-formedness part" in manifest["counts"]["reward_provenance"]
    rows = [json.loads(line) for line in (result.run_dir / "rollouts.jsonl").read_text().splitlines()]
    step = json.loads((result.run_dir / "steps.jsonl").read_text().splitlines()[0])
    assert len(rows) == G and step["reward/no_verdict"] == sum(r["gate"] == "unavailable" for r in rows)
    assert step["reward/well_formed_only"] == sum(r["well_formed_only"] for r in rows)
    assert step["train/reward"] == pytest.approx(sum(r["training_reward"] for r in rows) / G)
    assert "well-formedness part" in (result.run_dir / "report.md").read_text()
    assert (result.run_dir / "final" / "config.json").is_file() and (result.run_dir / "final" / "adapter").is_dir()

    config = load_config(
        str(REPO_ROOT / "configs/autoformalizer/eval/default.yaml"),
        overrides=[
            "--run=debug",
            "--policy.name=artifacts://autoformalizer_grpo/debug",
            "--evaluation.limit=2",
            "--evaluation.samples=2",
            "--repair.max_turns=2",
            "--repair.max_new_tokens=12",
            "--repair.retrieval=false",
            "--repair.did_you_mean=false",
            "--lean.backend.replay.sources=[repl_io]",
        ],
    )
    run_dir, report = evaluate(config)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    text = (run_dir / "report.md").read_text()
    assert report.counts["problems"] == 2 and report.tokens_per_sec > 0 and report.resources["peak_memory_bytes"] > 0
    assert metrics["well_formed"] is not None and metrics["faithfulness_code"] is not None
    none = {k for k in ("mean_iters_solved", "goal_exact_match") if metrics[k] is None}
    none |= {"compile@k" for v in metrics["compile_at_k"].values() if v is None}
    none |= {"pass@N" for v in metrics["pass_at_n"].values() if v is None}
    none |= {"error_breakdown"} if not sum(metrics["error_breakdown"].values()) else set()
    assert none and "## Not computed" in text
    for name in none:
        assert name in report.missing and f"**{name}**" in text
    attempts = (run_dir / "attempts.jsonl").read_text().splitlines()
    assert len(attempts) == sum(report.counts["statuses"].values())
    evaluated = json.loads((run_dir / "manifest.json").read_text())
    assert evaluated["inputs"]["policy"]["path"] == str(result.run_dir)
