"""The actor-critic on a tiny Qwen3 (real Qwen vocabulary), the replay buffer's way into training,
and the search-expert-iteration / search-eval entry points on the debug model."""

from __future__ import annotations

import json

import pytest
import torch

from leanloop.jsonl import write_jsonl
from leanloop.training.models import ModelSpec, load_model, load_tokenizer
from search.config import SearchConfig
from search.env import ReplayEnv
from search.mcts import SearchBatch, start_searches
from search.model import BUCKET_BOUNDS, ModelPolicy, encode_step, value_bucket, value_token_ids
from search.policy import OraclePolicy
from search.expert_iteration import proof_steps
from search.simplify import simplify


@pytest.fixture(scope="module")
def tiny():
    spec = ModelSpec("qwen3-tiny")
    tokenizer = load_tokenizer(spec)
    torch.manual_seed(0)
    return load_model(spec, tokenizer=tokenizer), tokenizer


def test_value_is_a_token_of_the_shared_vocabulary(tiny):
    _, tokenizer = tiny
    assert [value_bucket(d) for d in (1, 2, 6, 7, 8, 9, 16, 17, 100)] == [0, 1, 5, 6, 6, 7, 8, 9, 9]
    assert len(BUCKET_BOUNDS) == 10
    example = encode_step(tokenizer, "⊢ True", "trivial", depth=7, max_length=128)
    ids, labels = example["input_ids"], example["labels"]
    position = example["value_pos"] + 1
    assert ids[position] == value_token_ids(tokenizer)[6] == labels[position]  # bucket of distance 7
    assert all(label == -100 for label in labels[:position])  # the prompt carries no loss
    assert tokenizer.decode(ids[position + 1 : -1]).strip() == "trivial"
    assert encode_step(tokenizer, "⊢ True", "trivial", 1, max_length=5) is None


def test_policy_samples_capped_distinct_tactics_and_a_value(tiny):
    model, tokenizer = tiny
    policy = ModelPolicy(model, tokenizer, max_new_tokens=6, first_token_cap=1, seed=0)
    proposals = policy.propose(["x : ℕ\n⊢ x = x", "⊢ True"], samples=4)
    assert len(proposals) == 2 and policy.calls == 1
    for proposal in proposals:
        assert 1.0 <= proposal.distance <= 20.0
        texts = [t for t, _ in proposal.tactics]
        assert 1 <= len(texts) <= 4 and len(set(texts)) == len(texts)
        assert all(lp <= 0 for _, lp in proposal.tactics)
        # cap 1: every sampled tactic opened with a different first token
        firsts = [tokenizer(t, add_special_tokens=False)["input_ids"][:1] for t in texts]
        assert len({tuple(f) for f in firsts}) == len(firsts)


def test_tactic_log_probabilities_are_those_the_model_sampled_from(tiny):
    """One log-probability pass: the scores ``generate`` normalized, gathered, equal a fresh forward
    pass over the sampled sequences (the position ids of left-padded rows as generate uses them)."""
    model, tokenizer = tiny
    policy = ModelPolicy(model, tokenizer, max_new_tokens=5, seed=3)
    captured = {}
    generate = model.generate

    def recording(**kwargs):
        captured["out"], captured["input_ids"] = generate(**kwargs), kwargs["input_ids"]
        return captured["out"]

    rows = [
        policy._prompt("⊢ True") + [policy.values[0], 785],
        policy._prompt("x : ℕ\n⊢ x = x") + [policy.values[1], 4340],
    ]
    model.generate = recording
    try:
        _, scores = policy._continue(rows)
    finally:
        del model.generate
    sequences, width = captured["out"].sequences, captured["input_ids"].shape[1]
    pad = captured["input_ids"] == policy.eos
    mask = torch.ones_like(sequences)
    mask[:, :width] = (~pad).long()
    with torch.no_grad():
        logits = model(input_ids=sequences, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0)).logits
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    for row, score in enumerate(scores):
        expected = 0.0
        for position in range(width, sequences.shape[1]):
            token = int(sequences[row, position])
            if token == policy.eos:
                break
            expected += float(log_probs[row, position - 1, token])
        assert score == pytest.approx(expected, abs=1e-3)


def test_the_value_and_first_tokens_come_from_one_prompt_pass(tiny):
    model, tokenizer = tiny
    policy = ModelPolicy(model, tokenizer, max_new_tokens=4, seed=0)
    states = ["x : ℕ\n⊢ x = x", "⊢ True"]
    proposals = policy.propose(states, samples=2)
    # the critic alone (a plain forward over the prompts) reads the same value distribution
    assert [p.distance for p in proposals] == pytest.approx(policy.critic(states), abs=1e-4)


def test_simplified_found_proofs_feed_the_training_data(search_data, tmp_path, artifacts):
    env = ReplayEnv.from_run(search_data)
    import pandas as pd

    names = list(pd.read_parquet(search_data / "final" / "test.parquet")["name"][:6])
    config = SearchConfig(simulations=50)
    searches, _ = start_searches(names, env, config)
    SearchBatch(searches, OraclePolicy(env), config).run()
    steps = [s for search in searches for s in proof_steps(simplify(search.proof(), env))]
    assert steps and all(s["depth"] >= 1 for s in steps)
    buffer = write_jsonl(tmp_path / "buffer.jsonl", steps)
    from search.data import SearchData

    data = SearchData(
        trees=str(search_data),
        replay_buffers=[str(buffer)],
        replay_repeats=3,
        max_train_examples=5,
        max_val_examples=2,
        max_length=256,
    )
    data.setup()
    assert data.counts["replay_steps"] == len(steps)
    assert data.counts["train_examples"] + data.counts["train_too_long"] == 5 + 3 * len(steps)


def test_expert_iteration_round_chains_manifests_and_eval_writes_a_report(search_data, artifacts, monkeypatch):
    import shutil

    from search import evaluate, expert_iteration
    from search.train import run as train

    shutil.copytree(search_data, artifacts / "search_data" / "default")
    train(["--config", "configs/search/debug.yaml", "--trainer.fast_dev_run", "true"])
    result = expert_iteration.main(["--config", "configs/search/expert_iteration/debug.yaml"])
    round_run = artifacts / "search" / "debug-round1"
    round_manifest = json.loads((round_run / "manifest.json").read_text())
    assert round_manifest["inputs"]["base_model"]["path"].endswith("search/debug")
    assert "replay_buffer_0" in round_manifest["inputs"]
    assert result.manifest["metrics"]["final_model"] == "artifacts://search/debug-round1"
    report = evaluate.main(
        [
            "--config",
            "configs/search/eval/demo.yaml",
            "--model",
            "artifacts://search/debug",
            "--limit",
            "2",
            "--budgets",
            "[1, 2]",
            "--max_new_tokens",
            "4",
            "--run",
            "t",
        ]
    )
    metrics = report.manifest["metrics"]
    assert metrics["theorems"] == 2 and set(metrics["solved_vs_budget"]) == {"1", "2"}
    # the baseline's fixed budget: the most the search could spend (budget 2 x demo's 4 tactics per expansion)
    assert metrics["baseline_env_calls_per_theorem"] <= metrics["baseline_calls_budget"] == 2 * 4
    assert 0 <= metrics["baseline_solved_equal_calls"] <= 2
    assert metrics["oracle_solved"] >= metrics["solved"] and metrics["oracle_solved"] >= 1
    assert (report.run_dir / "solved_vs_budget.png").stat().st_size > 1000
    assert "no Lean" in (report.run_dir / "report.md").read_text()


def test_with_lean_only_a_valid_whole_program_counts_as_solved():
    from search.evaluate import SearchEvalConfig, summarize
    from search.simplify import SimplifyStats

    def row(theorem, attempt, solved_at, verdict):
        return {
            "theorem": theorem,
            "attempt": attempt,
            "started": True,
            "solved": True,
            "solved_at_iteration": solved_at,
            "env_calls_to_solve": 3,
            "env_calls": 5,
            "cycles": 0,
            "unavailable": 0,
            "duplicates": 0,
            "model_s": 1.0,
            "env_s": 1.0,
            "verdict": verdict,
        }

    # a: closed at 1 and 4 but only the later proof is valid; b: closed, the kernel rejects it
    rows = [row("a", 0, 1, "invalid"), row("a", 1, 4, "valid"), row("b", 0, 2, "invalid")]
    lean = summarize(
        rows, SearchEvalConfig(environment="repl", attempts=2, budgets=[2, 4], baseline=False), SimplifyStats()
    )
    assert (lean["solved"], lean["search_closed"], lean["pass@2"]) == (1, 2, 0.5)
    assert lean["solved_vs_budget"] == {"2": 0, "4": 1} and lean["verdicts"] == {"invalid": 2, "valid": 1}
    replay = summarize(
        rows, SearchEvalConfig(environment="replay", attempts=2, budgets=[2, 4], baseline=False), SimplifyStats()
    )
    assert (replay["solved"], replay["search_closed"]) == (2, 2) and replay["solved_vs_budget"] == {"2": 2, "4": 2}
