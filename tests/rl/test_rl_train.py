"""The RL stage end to end: configs parse, debug.yaml trains (fast_dev_run) and leaves every artifact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leanloop.paths import REPO_ROOT

CONFIGS = sorted((REPO_ROOT / "configs/rl").glob("*.yaml"))


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_every_config_parses(config, artifacts):
    from rl.train import run

    # reward_* / evaluator_* files are layers: they are parsed on top of a run config, as documented;
    # paper_hardened layers the RL environments guide's additions on paper.yaml
    layer = config.stem.startswith(("reward_", "evaluator_"))
    base = ["--config", str(REPO_ROOT / "configs/rl/debug.yaml")] if layer else []
    if config.stem == "paper_hardened":
        base = ["--config", str(REPO_ROOT / "configs/rl/paper.yaml")]
    result = run([*base, "--config", str(config), "--dry_run", "true"])
    assert result.skipped and "protocol:" in result.config


def test_reward_protocol_layers_override_the_protocol(artifacts):
    from rl.train import run

    for name, protocol in (
        ("reward_lean", "lean"),
        ("reward_lean_matched", "lean_matched"),
        ("reward_hybrid", "hybrid"),
        ("reward_evaluator", "evaluator"),
    ):
        result = run(["--config", "configs/rl/debug.yaml", "--config", f"configs/rl/{name}.yaml", "--dry_run", "true"])
        assert f"protocol: {protocol}" in result.config
        assert result.run_dir.name == f"debug+{name}"


def test_debug_fast_dev_run(artifacts):
    import torch
    from transformers import AutoModelForCausalLM

    from rl.train import run

    result = run(["--config", "configs/rl/debug.yaml", "--trainer.fast_dev_run", "true"])
    run_dir = result.run_dir
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["stage"] == "rl" and manifest["fast_dev_run"] is True
    counts = manifest["counts"]
    assert "UNTRAINED" in counts["reward_provenance"] and "replay" in counts["reward_provenance"]
    assert counts["evaluator"]["trained"] is False
    assert counts["judge"] == {"enabled": False, "mode": "async", "sources": ["lean", "evaluator"]}
    # the replay backend reads no live token table: the masker's shipped one, named by its hash
    assert counts["token_table"]["origin"] == "shipped" and len(counts["token_table"]["sha256"]) == 64
    rollouts = counts["rollouts"]
    assert sum(v for k, v in rollouts.items() if k.startswith("source:")) == 4  # 2 problems x G=2
    assert counts["filters"]["statements"] == 2 and counts["evaluation"]["attempts"] == 4
    assert manifest["model"]["adapter"] == "lora" and manifest["model"]["prompt"]["style"] == "raw"

    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    assert len(steps) == 1
    step = steps[0]
    sources = sum(step[f"reward/{s}/count"] for s in ("extraction", "precheck", "lean", "evaluator", "replay", "none"))
    assert sources == 4 and "reward/lean_share" in step and "reward/cutoff_s" in step
    # graded evaluator rewards: the update ran (nothing skipped) and moved the LoRA weights
    assert step["train/micro_batches_skipped"] == 0 and step["train/advantage_abs"] > 0
    from safetensors.torch import load_file

    adapter = load_file(str(run_dir / "final" / "adapter" / "adapter_model.safetensors"))
    lora_b = [t for name, t in adapter.items() if "lora_B" in name]
    assert lora_b and any(bool(t.abs().sum() > 0) for t in lora_b)  # B starts at zero

    filters = [json.loads(line) for line in (run_dir / "filters.jsonl").read_text().splitlines()]
    assert len(filters) == 2 and all(r["checks"]["compile"]["category"] == "unavailable" for r in filters)
    report = (run_dir / "report.md").read_text()
    assert "Where the rewards came from" in report and "UNTRAINED" in report and "pass@k" in report
    assert (run_dir / "rewards.png").stat().st_size > 1000
    assert json.loads((run_dir / "curriculum.json").read_text())["states"]

    final = run_dir / "final"
    assert (final / "adapter" / "adapter_config.json").is_file()
    loaded = AutoModelForCausalLM.from_pretrained(final)
    ids = torch.tensor([[151643, 785, 3838, 220]])
    with torch.no_grad():  # the export merged the adapter into the policy in place: same function
        expected = result.model.model.get_base_model()(input_ids=ids).logits
        assert torch.allclose(loaded(input_ids=ids).logits, expected, atol=1e-5)


def test_reference_policy_only_when_needed():
    from rl.config import AdapterConfig, PolicyConfig
    from leanloop.grpo.objective import GRPOConfig
    from rl.module import GRPOModule
    from leanloop.grpo.rollout import RolloutGenerationConfig

    def module(beta: float, adapter: str) -> GRPOModule:
        return GRPOModule(
            policy=PolicyConfig(adapter=AdapterConfig(kind=adapter, r=2, alpha=4)),
            grpo=GRPOConfig(num_generations=2, beta=beta),
            generation=RolloutGenerationConfig(max_new_tokens=4),
        )

    assert module(0.0, "none").reference is None  # beta 0: no reference model loaded
    full = module(0.04, "none")
    assert full.reference is not None and not any(p.requires_grad for p in full.reference.parameters())
    assert all(torch_equal(a, b) for a, b in zip(full.reference.parameters(), full.model.parameters()))
    assert module(0.04, "lora").reference is None  # the adapter is disabled instead


def torch_equal(a, b) -> bool:
    import torch

    return torch.equal(a, b)


def test_missing_start_checkpoint_uses_the_named_fallback(artifacts, tmp_path):
    from leanloop.training.models import ModelSpec
    from rl.config import PolicyConfig
    from rl.policy import resolve_base

    policy = PolicyConfig(
        base=ModelSpec("artifacts://sft/default"),
        fallbacks=[ModelSpec("artifacts://pretrain/default"), ModelSpec("qwen3-tiny")],
    )
    spec, fallback = resolve_base(policy)
    assert (spec.name, fallback) == ("qwen3-tiny", True)  # the isolated artifacts root holds neither run
    with pytest.raises(FileNotFoundError, match="none of the configured starting checkpoints"):
        resolve_base(PolicyConfig(base=ModelSpec(str(tmp_path / "missing"))))
    assert Path(artifacts).name == "artifacts"


def test_qlora_policy_trains_adapters_over_nf4_and_exports_a_merged_model(tmp_path):
    """QLoRA: the base is bitsandbytes NF4 (its CPU kernels here), only the LoRA weights get
    gradients, the reference (adapter disabled) starts equal, the export merges into full precision."""
    import bitsandbytes as bnb
    import torch
    from transformers import AutoModelForCausalLM

    from leanloop.training.models import ModelSpec, load_tokenizer
    from rl.config import AdapterConfig, PolicyConfig
    from leanloop.grpo.objective import completion_logps
    from rl.policy import build_policy, export_policy

    spec = ModelSpec("qwen3-tiny")
    tokenizer = load_tokenizer(spec)
    policy = build_policy(
        spec,
        tokenizer,
        PolicyConfig(adapter=AdapterConfig(kind="qlora", r=2, alpha=4, compute_dtype="float32")),
        beta=0.04,
    )
    assert policy.reference is None
    quantized = [m for m in policy.model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert quantized and all(m.weight.quant_type == "nf4" for m in quantized)
    ids = torch.randint(100, 5000, (2, 12))
    mask = torch.ones_like(ids)
    logps, _ = completion_logps(policy.model, ids, mask, 4)
    logps.sum().backward()
    trained = {n for n, p in policy.model.named_parameters() if p.grad is not None}
    assert trained and all("lora_" in n for n in trained)
    with torch.no_grad(), policy.model.disable_adapter():
        reference, _ = completion_logps(policy.model, ids, mask, 4)
    assert torch.allclose(logps.detach(), reference)  # LoRA B starts at zero
    info = export_policy(policy, tokenizer, tmp_path)
    assert info["adapter"] == "qlora" and (tmp_path / "adapter" / "adapter_config.json").is_file()
    merged = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert not any(isinstance(m, bnb.nn.Linear4bit) for m in merged.modules())


def test_evaluation_protocols_budget_and_configured_replay(artifacts):
    """LLF Section 6: each evaluation protocol is sampled at its own temperature over its runs, under
    the evaluation timeout (not the lean_matched reward timeout), and curriculum.replay is the buffer
    the module uses (it used to build ReplayBuffer() with defaults, ignoring the config)."""
    from rl.train import run

    result = run(
        [
            "--config",
            "configs/rl/debug.yaml",
            "--config",
            "configs/rl/reward_lean_matched.yaml",
            "--run",
            "protocols",
            "--trainer.fast_dev_run",
            "true",
            "--data.curriculum.replay.enabled",
            "false",
            "--data.curriculum.replay.capacity_per_statement",
            "7",
            "--model.evaluation.timeout",
            "180",
            "--model.evaluation.protocols",
            '[{"name": "pass@1", "attempts": 1, "ks": [1], "temperature": 0.3, "runs": 3},'
            ' {"name": "pass@2", "attempts": 2, "ks": [1, 2], "temperature": 0.7, "runs": 1}]',
        ]
    )
    module = result.model
    assert module.replay.config.enabled is False and module.replay.config.capacity_per_statement == 7
    assert module.verifier.timeout == 13.0 and module.evaluation_verifier().timeout == 180.0
    evaluation = result.manifest["counts"]["evaluation"]
    assert evaluation["attempts"] == 2 * (1 * 3 + 2 * 1)  # 2 statements x (3 runs of 1 + 1 run of 2)
    tables = evaluation["lean_pass_at_k"]
    assert set(tables) == {"pass@1", "pass@2"} and set(tables["pass@2"]) == {"1", "2"}
    assert tables["pass@1"]["1"]["runs"] == 3 and len(tables["pass@1"]["1"]["per_run"]) == 3
    # LLF Table 7: mean +- standard deviation across the repeated evaluations (one run: none)
    assert tables["pass@1"]["1"]["std_over_runs"] == 0.0 and tables["pass@2"]["2"]["std_over_runs"] is None
    # nothing is valid under replay + the rl profile, and unverified attempts are failures: pass@k is 0, not n/a
    assert all(row["pass_at_k"] == 0.0 for table in tables.values() for row in table.values())
