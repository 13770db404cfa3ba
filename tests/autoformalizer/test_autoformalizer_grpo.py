"""Stage 2 (GRPO against the compiler): rewards, the update, the configs (the debug run itself is in
test_autoformalizer_stages.py).

The rewards come from real recorded Lean replies (REPL transcripts, v4.8 .. v4.33), read through the
Verifier with the `statement` profile; a statement nobody recorded is `unavailable`.
"""

from __future__ import annotations

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader

from autoformalizer.config import PolicyConfig, TypecheckConfig
from autoformalizer.data import END_OF_TURN, Pair
from autoformalizer.grpo import AutoformalizerGRPOModule
from autoformalizer.reward import GatedReward, RewardConfig, training_value
from leanloop.lean.backends import BackendConfig
from leanloop.lean.check import LeanConfig
from leanloop.lean.replay import ReplayBackendConfig
from leanloop.paths import REPO_ROOT
from leanloop.grpo.objective import GRPOConfig, completion_logps
from leanloop.grpo.rollout import RolloutGenerationConfig, Rollouts, completion_mask

# One problem and four completions whose statements Lean answered when the REPL tests were recorded
# (or nobody recorded), so that a GRPO group holds every gate.
REFERENCE = "theorem t (x : Nat) (h1 : x = 2) : x = 2 := by omega"
COMPLETIONS = [
    "theorem aa (x : Nat) (h1 : x  = 2) : x = 2 := by sorry",  # recorded: only the sorry warning
    "theorem foo : 1 = 1 := by\nsorry",  # recorded: Unknown identifier `bysorry`
    "theorem never_recorded (n : ℕ) (h : 0 < n) : 1 ≤ n := by sorry",  # well-formed, no recording
    "theorem broken (x : Nat) (h1 : x = 2 : x = 2 := by sorry",  # not well-formed
]
PROBLEM = Pair("t", "If x is a natural number equal to 2, then x equals 2.", REFERENCE, None, "train", "test")


def recorded_lean() -> LeanConfig:
    """The replay backend over the REPL recordings; programs compiled verbatim (no heartbeat line)
    so that the recorded programs are exactly what Lean saw."""
    return LeanConfig(
        profile="statement",
        heartbeats=None,
        backend=BackendConfig(kind="replay", replay=ReplayBackendConfig(sources=["repl_io", "repl_all_versions"])),
    )


VERBATIM = TypecheckConfig(header="", problem_header=False)
"""No header either: the statements are checked as the recordings hold them."""


def test_unavailable_treatment_on_recorded_replies():
    gated = GatedReward(VERBATIM.checker(recorded_lean()))
    results = gated.score(COMPLETIONS, [REFERENCE] * 4)
    assert [r.gate for r in results] == ["typechecks", "fails_typecheck", "unavailable", "malformed"]
    assert [r.value for r in results] == [pytest.approx(1.0), 0.1, None, 0.0]  # faithfulness 1: same statement
    exclude, credit = RewardConfig(unavailable="exclude"), RewardConfig(unavailable="well_formed_only")
    assert [training_value(r, exclude) for r in results] == [
        (results[0].value, False),
        (0.1, False),
        (None, False),
        (0.0, False),
    ]
    # only the statement with no verdict changes: it gets the well-formedness part, flagged as such
    assert [training_value(r, credit) for r in results] == [
        (results[0].value, False),
        (0.1, False),
        (0.1, True),
        (0.0, False),
    ]


def _rollouts(module: AutoformalizerGRPOModule, prompt: str, texts: list[str]) -> Rollouts:
    """The four completions as the rollout would hold them had the policy sampled them."""
    tokenizer, rollout = module.tokenizer, module.rollout
    prompt_ids, prompt_mask = rollout.encode_prompts([prompt], len(texts))
    encoded = [tokenizer(t + END_OF_TURN, add_special_tokens=False)["input_ids"] for t in texts]
    width = max(map(len, encoded))
    ids = torch.full((len(texts), width), rollout.pad_id, dtype=torch.long)
    for row, tokens in enumerate(encoded):
        ids[row, : len(tokens)] = torch.tensor(tokens)
    mask, truncated = completion_mask(ids, rollout.stop_ids)
    return Rollouts(
        prompt_ids, prompt_mask, ids, mask, rollout.decode(ids, mask), truncated, len(texts), rollout.pad_id
    )


class RecordedCompletions(AutoformalizerGRPOModule):
    """The stage's module, with the sampled completions replaced by the four recorded ones (a random
    tiny policy samples no well-formed statement, so its group would have no advantage to follow)."""

    def training_step(self, batch, batch_idx):
        problems = list(batch)
        self.rollouts = _rollouts(self, problems[0].prompt, COMPLETIONS)
        self.scored = self.score(problems, self.rollouts.texts)
        self.stats = {
            **self.update.step(self, self.model, self.reference, self.rollouts, self.scored),
            **self._reward_stats(self.scored),
        }


def test_grpo_step_moves_only_the_adapters_towards_the_typechecking_statement(tmp_path):
    policy = PolicyConfig()
    policy.arch.num_hidden_layers = 1  # small; still NF4 + QLoRA on attention and experts
    module = RecordedCompletions(
        policy=policy,
        grpo=GRPOConfig(num_generations=4, beta=0.04, loss_type="grpo"),
        generation=RolloutGenerationConfig(max_new_tokens=8),
        reward=RewardConfig(unavailable="well_formed_only"),
        lean=recorded_lean(),
        typecheck=VERBATIM,
    )
    from leanloop.training.optim import OptimConfig

    module.optim = OptimConfig(lr=1e-2, warmup_ratio=0.0, schedule="constant")
    before = {n: p.detach().clone() for n, p in module.model.named_parameters()}
    trainer = L.Trainer(
        max_steps=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        default_root_dir=str(tmp_path),
    )
    trainer.fit(module, train_dataloaders=DataLoader([[PROBLEM]], batch_size=None, collate_fn=lambda x: x))
    assert [s.reward for s in module.scored] == [pytest.approx(1.0), 0.1, 0.1, 0.0]
    assert [s.well_formed_only for s in module.scored] == [False, False, True, False]
    assert module.stats["train/zero_std_groups"] == 0.0 and module.stats["train/kl"] == pytest.approx(0.0, abs=1e-6)
    changed = {n for n, p in module.model.named_parameters() if not torch.equal(p.detach(), before[n])}
    trainable = {n for n, p in module.model.named_parameters() if p.requires_grad}
    assert changed and changed <= trainable and all("lora_" in n for n in trainable)
    assert any(".experts." in n for n in changed) and any(".self_attn." in n for n in changed)
    # the update raised the log-probability of the statement that type-checks, relative to the malformed one
    r = module.rollouts
    ids = torch.cat([r.prompt_ids, r.completion_ids], dim=1)
    attention = torch.cat([r.prompt_mask, r.completion_mask], dim=1)
    with torch.no_grad():
        after = (completion_logps(module.model, ids, attention, r.completion_ids.size(1))[0] * r.completion_mask).sum(1)
        with module.model.disable_adapter():  # the starting policy (the adapters are zero-initialised)
            start = (
                completion_logps(module.model, ids, attention, r.completion_ids.size(1))[0] * r.completion_mask
            ).sum(1)
    assert after[0] - start[0] > after[3] - start[3]
    assert module.stats["reward/no_verdict"] == 1 and module.stats["reward/well_formed_only"] == 1
    assert module.stats["train/reward"] == pytest.approx((module.scored[0].reward + 0.1 + 0.1 + 0.0) / 4)
    report = (tmp_path / "report.md").read_text()  # the stage's report, in the run folder
    assert "rollouts: 4; without a Lean verdict: 1; credited with the well-formedness part only: 1" in report


def test_evaluation_refuses_theorems_the_policy_trained_on(artifacts):
    """The policy's manifests name what it trained on; evaluating those theorems is an error."""
    from leanloop.artifacts import Manifest

    from autoformalizer.config import AutoformalizerConfig, EvaluationConfig
    from autoformalizer.data import load_pairs
    from autoformalizer.evaluate import select_problems

    pairs, _ = load_pairs(AutoformalizerConfig().pairs)
    run = artifacts / "autoformalizer" / "trained"
    Manifest("autoformalizer", "trained", counts={"train_theorems": [p.name for p in pairs["train"]]}).write(run)
    config = AutoformalizerConfig(
        policy=PolicyConfig(name="artifacts://autoformalizer/trained"),
        evaluation=EvaluationConfig(split="train", limit=None),
    )
    with pytest.raises(ValueError, match="trained on"):
        select_problems(config)
    config.evaluation.split = "test"
    problems, _ = select_problems(config)
    assert len(problems) == len(pairs["test"])


@pytest.mark.parametrize("name", ["debug", "default", "paper"])
def test_grpo_configs_parse_against_the_stage(name, artifacts):
    """configs/autoformalizer/grpo/*.yaml (a subfolder, so not in the generic config test)."""
    import yaml

    from autoformalizer.train_grpo import run

    path = REPO_ROOT / "configs/autoformalizer/grpo" / f"{name}.yaml"
    resolved = yaml.safe_load(run(["--config", str(path), "--dry_run", "true"]).config)
    written = yaml.safe_load(path.read_text())
    assert resolved["model"]["grpo"]["beta"] == 0.04 and resolved["model"]["policy"]["name"].startswith(
        "artifacts://autoformalizer/"
    )
    assert resolved["model"]["reward"]["unavailable"] == written["model"]["reward"]["unavailable"]
    assert resolved["data"]["problems_per_step"] == written["data"]["problems_per_step"]
    assert not artifacts.exists()
