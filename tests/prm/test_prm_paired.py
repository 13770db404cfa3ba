"""The paired prose + tactic format: round trip, each rejection, and the assembled Lean program."""

from __future__ import annotations

import pytest

from prm.paired import (
    EMPTY_TACTIC,
    MISSING_PROSE,
    MISSING_TACTIC,
    NO_STEPS,
    PROSE_AFTER_TACTIC,
    SEVERAL_TACTICS,
    STEP_ORDER,
    TEXT_OUTSIDE_STEP,
    UNCLOSED_BLOCK,
    PairedFormatError,
    PairedStep,
    assemble_program,
    parse_paired,
    render_paired,
)

STEPS = [
    PairedStep("Substitute the values of b and h.", "subst h₂ h₃"),
    PairedStep("Normalise the numbers in the hypothesis and the goal.", "norm_num at h₁ ⊢"),
    PairedStep("The goal follows linearly.", "nlinarith [sq_nonneg (a - b),\n  sq_nonneg (a + b)]"),
]


def test_round_trip_keeps_multiline_tactics():
    text = render_paired(STEPS)
    assert parse_paired(text) == STEPS
    # a model's indentation inside the block and "Step N." headers are accepted
    loose = text.replace("Step 2:", "Step 2.").replace("```lean4\nsubst", "```lean\n    subst")
    assert parse_paired(loose)[0].tactic == "subst h₂ h₃" and len(parse_paired(loose)) == 3


@pytest.mark.parametrize(
    "text,reason",
    [
        ("", NO_STEPS),
        ("I think we should use linarith.", TEXT_OUTSIDE_STEP),
        ("```lean4\nlinarith\n```\nStep 1: done\n```lean4\nrfl\n```", TEXT_OUTSIDE_STEP),
        ("Step 1: a\n```lean4\nrfl\n```\nStep 3: c\n```lean4\nrfl\n```", STEP_ORDER),
        ("Step 1:\n```lean4\nrfl\n```", MISSING_PROSE),
        ("Step 1: we are done by reflexivity.\nStep 2: x\n```lean4\nrfl\n```", MISSING_TACTIC),
        ("Step 1: a\n```lean4\nrfl\n```\n```lean4\nsimp\n```", SEVERAL_TACTICS),
        ("Step 1: a\n```lean4\n\n```", EMPTY_TACTIC),
        ("Step 1: a\n```lean4\nrfl", UNCLOSED_BLOCK),
        ("Step 1: a\n```lean4\nrfl\n```\nand that is it.", PROSE_AFTER_TACTIC),
    ],
)
def test_rejections_say_why(text, reason):
    with pytest.raises(PairedFormatError) as caught:
        parse_paired(text)
    assert caught.value.reason == reason


def test_assembled_program_uses_the_trusted_statement_and_indents_every_tactic_line():
    program = assemble_program(
        "import Mathlib", "theorem t (a b : ℝ) : 0 ≤ a ^ 2 + b ^ 2 := by", [s.tactic for s in STEPS]
    )
    assert program == (
        "import Mathlib\n\ntheorem t (a b : ℝ) : 0 ≤ a ^ 2 + b ^ 2 := by\n  subst h₂ h₃\n"
        "  norm_num at h₁ ⊢\n  nlinarith [sq_nonneg (a - b),\n    sq_nonneg (a + b)]"
    )
    with pytest.raises(ValueError, match=":= by"):
        assemble_program("", "theorem t : True :=", ["trivial"])
