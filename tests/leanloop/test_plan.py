"""The memory planner: every paper config fits 80 GB with 10% headroom, its activation and loss-head
figures match a real step's saved-tensor bytes, and the stages' dry runs and the CLI print it."""

from __future__ import annotations

import json
from functools import lru_cache

import pytest
import torch

from leanloop.paths import REPO_ROOT
from leanloop.plan import (
    HEADROOM,
    SavedBytes,
    activations,
    architecture,
    head_bytes,
    main,
    paper_configs,
    paper_table,
    plan_args,
    resolve,
    workload,
)
from leanloop.training.models import ModelSpec, load_model

PAPER_CONFIGS = paper_configs()


@lru_cache(maxsize=None)
def _plan(config: str):
    return plan_args(["--config", config])


def test_every_training_paper_config_is_planned():
    assert len(PAPER_CONFIGS) == 13 and "configs/autoformalizer/grpo/paper.yaml" in PAPER_CONFIGS
    assert not any("/eval/" in c or "/sample/" in c for c in PAPER_CONFIGS)


@pytest.mark.parametrize("config", PAPER_CONFIGS)
def test_paper_config_names_its_strategy(config):
    import yaml

    assert (yaml.safe_load((REPO_ROOT / config).read_text())["trainer"] or {}).get("strategy"), config


@pytest.mark.parametrize("config", PAPER_CONFIGS)
def test_paper_config_fits_80gb_with_headroom(config):
    plan = _plan(config)
    assert plan.gpu_gb == 80.0
    assert plan.headroom >= HEADROOM, plan.table()
    if plan.world > 1 and plan.strategy == "ddp":
        assert any(t.name == "gradients" and "DDP buckets" in t.note for t in plan.terms) or plan.stage == "rl"


@pytest.mark.parametrize(
    "layers",
    [
        ["configs/sft/paper.yaml", "configs/strategy/zero3.yaml"],  # make plan's example
        ["configs/rl/paper.yaml", "configs/rl/paper_hardened.yaml"],  # the RL environments guide's additions
        # rl/paper.yaml's full fine-tuning: the layer and the micro-batch its comment names
        [
            "configs/rl/paper.yaml",
            "configs/strategy/zero2.yaml",
            "--model.policy.adapter.kind",
            "none",
            "--model.grpo.micro_batch_size",
            "4",
        ],
    ],
)
def test_paper_configs_with_the_layers_they_name_fit(layers):
    args = [a for item in layers for a in (["--config", item] if item.endswith(".yaml") else [item])]
    plan = plan_args(args)
    assert plan.headroom >= HEADROOM, plan.table()
    if any(item.startswith("configs/strategy/zero") for item in layers):
        assert plan.strategy.startswith("zero"), plan.table()


def test_unsharded_paper_sft_does_not_fit():
    """sft/paper.yaml as it was (no strategy: DDP with full replicas) is refused by the plan."""
    plan = plan_args(["--config", "configs/sft/paper.yaml", "--trainer.strategy", "ddp"])
    assert not plan.fits and plan.peak_gb > 100


def test_planner_matches_a_real_step():
    """The planner's activation bytes (one meta forward, flash attention's saved tensors) and its loss
    head's saved bytes against a real bf16 step of the sft debug config on CPU (sdpa): within 2%."""
    config_tree = resolve("sft", ["--config", "configs/sft/debug.yaml"])
    work = workload("sft", config_tree)
    config, _ = architecture(work.model)
    unchecked, _, _ = activations(config, work)
    head_saved, head_peak, _ = head_bytes(config, work)
    model = load_model(ModelSpec("qwen3-tiny", dtype="bfloat16")).train()
    ids = torch.randint(0, 1000, (work.micro_batch, work.seq_len))
    with SavedBytes(model) as body:
        model.model(input_ids=ids, use_cache=False)
    with SavedBytes(model) as whole:
        model(input_ids=ids, labels=ids)
    assert body.total == pytest.approx(unchecked, rel=0.02)
    assert whole.total == pytest.approx(unchecked + head_saved, rel=0.02)
    assert head_peak > head_saved  # the backward's fp32 gradients come on top of what is saved


def test_dry_run_prints_the_plan_and_json(tmp_path, capsys):
    from sft.train import run

    run(["--config", "configs/sft/debug.yaml", "--dry_run", "true"])
    out = capsys.readouterr().out
    assert "memory plan: sft, qwen3-tiny" in out and "sft: peak" in out and "fits" in out
    path = tmp_path / "plan.json"
    assert main(["--config", "configs/sft/debug.yaml", "--json", str(path)]) == 0
    record = json.loads(path.read_text())
    assert set(record) >= {"peak_gb", "gpu_gb", "fits", "terms"} and record["fits"] is True
    assert max(record["terms"].values()) <= record["peak_gb"] <= sum(record["terms"].values()) + 0.01  # rounded terms


def test_published_plans_are_the_planners_output():
    """docs/results/plan.md's table and rl/README.md's budget are what the planner prints today."""
    table = paper_table([(config, _plan(config)) for config in PAPER_CONFIGS])
    assert table in (REPO_ROOT / "docs/results/plan.md").read_text()
    readme = (REPO_ROOT / "rl/README.md").read_text()
    assert "\n".join("  " + line for line in _plan("configs/rl/paper.yaml").table().splitlines()) in readme


def test_planned_weights_gradients_and_optimizer_states_match_a_real_adamw_step():
    """The static terms for the sft debug config (fp32, one process) against the bytes a real AdamW step
    leaves: parameters, their gradients and the optimizer's state tensors, to the byte up to 1%."""
    plan = plan_args(["--config", "configs/sft/debug.yaml"])
    by = {t.name: t.gb * 1e9 for t in plan.terms}
    model = load_model(ModelSpec("qwen3-tiny")).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 1000, (1, 16))
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    params = list(model.parameters())
    states = sum(v.numel() * v.element_size() for s in optimizer.state.values() for v in s.values() if v.dim())
    assert by["weights"] == pytest.approx(sum(p.numel() * p.element_size() for p in params), rel=0.01)
    assert by["gradients"] == pytest.approx(sum(p.grad.numel() * p.grad.element_size() for p in params), rel=0.01)
    assert by["optimizer states (AdamW)"] == pytest.approx(states, rel=0.01)
