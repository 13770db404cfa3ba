"""System A on real Lean messages of every shipped version, and the repair loop."""

from __future__ import annotations

import json
import re

import pytest

from autoformalizer.mathlib_index import IndexConfig, MathlibIndex
from autoformalizer.repair import did_you_mean, repair_loop, repair_prompt, unknown_identifiers
from autoformalizer.typecheck import ERROR_CHARS


@pytest.fixture(scope="module")
def recorded_errors(shared_data, rl_lean_errors) -> list[tuple[str, str]]:
    """(Lean version, error text) of every recorded error: RL-Lean (v4.9), the REPL tests of all
    versions and the reference manual / batteries outputs (HEAD)."""
    shared = shared_data
    out = [("v4.9", e["data"]) for e in rl_lean_errors]
    with open(shared / "lean_repl/all_versions/repl_io_pairs.derived.jsonl", encoding="utf-8") as handle:
        for row in map(json.loads, handle):
            response = row.get("response") or {}
            if isinstance(response, dict):
                out += [
                    (row.get("lean_toolchain", "?"), m["data"])
                    for m in response.get("messages", [])
                    if m.get("severity") == "error"
                ]
    with open(shared / "lean_text/reference_manual_lean_outputs.jsonl", encoding="utf-8") as handle:
        out += [("v4.34", row["output"]) for row in map(json.loads, handle) if row.get("expects_error")]
    for path in sorted((shared / "lean_text/batteries_tests").rglob("*.lean")):
        out += [("v4.33", m) for m in re.findall(r"/-- error: (.*?)-/", path.read_text(encoding="utf-8"), re.S)]
    return out


@pytest.fixture(scope="module")
def small_index():
    return MathlibIndex.load(
        IndexConfig(
            modules=[
                "Mathlib.NumberTheory.Real.Irrational",
                "Mathlib.Analysis.SpecialFunctions.Trigonometric.Basic",
                "Mathlib.Analysis.Real.Sqrt",
            ]
        )
    )


def test_unknown_identifiers_in_every_lean_wording(recorded_errors):
    errors = recorded_errors
    unknown = [(v, t) for v, t in errors if re.search(r"(?i)unknown (identifier|constant)", t)]
    old = [t for _, t in unknown if "unknown identifier '" in t or "unknown constant '" in t]
    new = [t for _, t in unknown if "Unknown identifier `" in t or "Unknown constant `" in t]
    assert old and new  # both wordings are in the shipped recordings
    for _, text in unknown:
        names = unknown_identifiers(text)
        assert names, text
        for name in names:
            assert f"'{name}'" in text or f"`{name}`" in text
    found = {n for _, t in unknown for n in unknown_identifiers(t)}
    assert {"Real.cos_pi_div_seven", "Irrational.sqrt_two", "IH", "barbaz"} <= found
    assert unknown_identifiers("linarith failed to find a contradiction") == []


def test_did_you_mean_finds_the_real_mathlib_names(small_index):
    suggestions = {
        s.unknown: s
        for s in did_you_mean(
            ["Irrational.sqrt_two", "Real.cos_pi_div_seven", "h₁", "IH", "Real.sqrt_nonneg'"], small_index
        )
    }
    assert suggestions["Irrational.sqrt_two"].candidates[0] == "irrational_sqrt_two"
    cos = suggestions["Real.cos_pi_div_seven"].candidates
    assert cos and all(c.startswith("Real.cos_pi_div_") for c in cos) and all(c in small_index for c in cos)
    assert suggestions["Real.sqrt_nonneg'"].candidates[0] == "Real.sqrt_nonneg"
    assert suggestions["h₁"].local_like and suggestions["IH"].local_like and not suggestions["h₁"].candidates


def test_repair_stops_at_the_first_statement_that_type_checks(recorded_checker, small_index):
    attempts = iter(
        [
            "```lean\ntheorem foo : 1 = 1 := by\nsorry\n```",  # recorded: Unknown identifier `bysorry`
            "theorem aa (x : Nat) (h1 : x  = 2) : x = 2 := by sorry",  # recorded: only the sorry warning
            "theorem never_reached : False := by sorry",
        ]
    )
    prompts = []

    def generate(prompt: str) -> str:
        prompts.append(prompt)
        return next(attempts)

    result = repair_loop("If x = 2 then x = 2.", generate, recorded_checker.check, index=small_index, max_turns=5)
    assert result.solved is True and result.iterations == 2 and result.statuses() == ["failed", "passed"]
    assert len(prompts) == 2
    assert "Unknown identifier `bysorry`" in prompts[1] and "Your previous attempt" in prompts[1]
    assert "theorem foo : 1 = 1 := by\nsorry" in prompts[1]


def test_repair_stops_without_a_verdict_and_caps_feedback(recorded_checker, recorded_errors):
    result = repair_loop(
        "n is at least one.",
        lambda p: "theorem t (n : ℕ) (h : 0 < n) : 1 ≤ n := by sorry",
        recorded_checker.check,
        max_turns=5,
    )
    assert result.solved is None and result.iterations == 1 and "unavailable" in result.stop_reason
    longest = max((t for _, t in recorded_errors), key=len)
    assert len(longest) > ERROR_CHARS
    prompt = repair_prompt("x", "theorem t : True := by sorry", longest)
    shown = prompt.split("Lean reported:\n", 1)[1].split("\n\nWrite a corrected")[0]
    assert len(shown) == ERROR_CHARS and longest.startswith(shown[:-1])


def test_repair_with_a_real_tiny_model_runs_every_turn(recorded_checker):
    import torch

    from leanloop.training.moe import tiny_qwen3_moe
    from autoformalizer.policy import make_generate
    from leanloop.tokenizer import qwen3_tokenizer

    model, tokenizer = tiny_qwen3_moe(seed=0), qwen3_tokenizer()
    generate = make_generate(model, tokenizer, max_new_tokens=12, do_sample=True, seed=0)
    result = repair_loop("Show that 1 = 1.", generate, recorded_checker.check, max_turns=3)
    # an untrained model writes no theorem: every turn is fed back and the loop uses all its turns
    assert result.iterations == 3 and result.solved is False
    assert all(t.check is None and "not a well-formed Lean theorem" in t.feedback for t in result.turns)
    assert result.turns[1].prompt.count("<|im_start|>assistant") == 1
    assert torch.get_num_threads() == 1
