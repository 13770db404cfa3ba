"""The collection_llf statement check compares signatures as Lean's printer lays them out (LLF App. B):
a spelling difference never makes a proof Lean accepted invalid."""

from __future__ import annotations

import gzip
import json

import pytest

from leanloop.lean.acceptance.policy import signature_verdict
from leanloop.lean.acceptance.signature import DIFFERENT, SAME, UNDECIDED, compare, term
from leanloop.lean.types import VerifyRequest


@pytest.mark.parametrize(
    "want, got",
    [
        (("(x y : ℕ)", "x+x = y"), ("(x : ℕ) (y : ℕ)", "x + x = y")),  # grouping, spacing
        (("(m x : ℤ) (h : 6 * x % m = 1)", "m = 43"), ("(m x : ℤ) (h : (6 * x) % m = 1)", "(m = 43)")),
        (("(a : ℝ)", "a ^ 2 ^ 3 = a - b - c"), ("(a : ℝ)", "a ^ (2 ^ 3) = (a - b) - c")),
        (("(s : Finset ℕ)", "∑ k ∈ s, 2 * k = 0"), ("(s : Finset ℕ)", "∑ k in s, (2 * k) = 0")),
        (("(f : ℕ → ℕ)", "∀ x, f x = 0"), ("(f : ℕ → ℕ)", "∀ x, (f (x)) = 0")),
    ],
)
def test_spellings_the_printer_unifies_are_the_same_signature(want, got):
    assert compare(want, got) == SAME


@pytest.mark.parametrize(
    "want, got",
    [
        (("(a : ℝ)", "a - (b - c) = 0"), ("(a : ℝ)", "a - b - c = 0")),  # left-associative: not redundant
        (("(a : ℝ)", "(a ^ b) ^ c = 0"), ("(a : ℝ)", "a ^ b ^ c = 0")),  # right-associative
        # Mathlib's big operators parse their body at precedence 67: `∑ k ∈ s, 2 * k + 1` is `(∑ ...) + 1`
        (("(s : Finset ℕ)", "∑ k ∈ s, (2 * k + 1) = 0"), ("(s : Finset ℕ)", "∑ k ∈ s, 2 * k + 1 = 0")),
        (("(x : ℝ)", "|x| = 1"), ("(x : ℝ)", "abs x = 1")),  # one notation, two spellings: Lean's printer decides
        (
            ("(f g : ℕ → ℕ)", "(f ∘ g) (x + 1) = 0"),
            ("(f g : ℕ → ℕ)", "(f ∘ g) x + 1 = 0"),
        ),  # an argument: not redundant
    ],
)
def test_other_differences_are_left_to_lean(want, got):
    assert compare(want, got) == UNDECIDED


def test_a_binder_renamed_or_added_is_a_mismatch():
    assert compare(("(x : ℕ) (h₀ : x = 2)", "x = 2"), ("(x : ℕ) (h : x = 2)", "x = 2")) == DIFFERENT
    assert compare(("(n : ℕ)", "0 ≤ n"), ("(n : ℕ) (hn : 0 < n)", "0 ≤ n")) == DIFFERENT


def test_tokens_keep_type_ascriptions_and_applications():
    assert term("f (x : ℝ) = (g x) + 1") == ("f", "(", "x", ":", "ℝ", ")", "=", "g", "x", "+", "1")


def test_no_lean_accepted_proof_is_invalid_for_its_spelling(shared_data):
    """The shipped accepted miniF2F proofs against the DSP statements: under the whitespace rule 7 of
    197 Kimina-Prover proofs were rejected; now only those whose binders differ (a different
    statement: the printer shows binder names as written) are, the rest are unavailable, not invalid."""
    statements = {
        r["name"]: r["formal_statement"]
        for r in map(json.loads, (shared_data / "statements/minif2f_deepseek_prover_v1.5.jsonl").open())
    }
    verdicts = {}
    for row in map(json.loads, (shared_data / "candidates/kimina_prover_preview_minif2f_test_solved.jsonl").open()):
        request = VerifyRequest(program=row["correct_proof"], name=row["name"], statement=statements[row["name"]])
        verdicts[row["name"]] = signature_verdict(request, row["correct_proof"])[0]
    assert len(verdicts) == 197
    assert sorted(n for n, v in verdicts.items() if v == DIFFERENT) == ["aime_1994_p3", "mathd_numbertheory_618"]
    assert sum(v == SAME for v in verdicts.values()) == 190
    seed = [
        r
        for r in map(json.loads, gzip.open(shared_data / "candidates/seed_prover_solved.jsonl.gz"))
        if r["name"] in statements
    ]
    seed_verdicts = [
        signature_verdict(
            VerifyRequest(program=r["program"], name=r["name"], statement=statements[r["name"]]), r["program"]
        )[0]
        for r in seed
    ]
    assert (seed_verdicts.count(SAME), seed_verdicts.count(UNDECIDED), seed_verdicts.count(DIFFERENT)) == (33, 5, 2)
