"""Trees extracted from Lean text by re-executing the script in proof-state mode: through the real
lean-interact client against the stand-in REPL (recorded session), and with real Lean (``lean``)."""

from __future__ import annotations

import pytest

from search.env import EnvStatus
from search.extract import ExtractionError, extract_file, parse_script, split_declarations


def test_scripts_parse_into_blocks_and_unsupported_forms_are_refused():
    script = parse_script("\n  constructor\n  · exact hp\n  · simp at hq\n    exact hq\n")
    assert script.items[0] == "constructor" and [b.items for b in script.items[1:]] == [
        ["exact hp"],
        ["simp at hq", "exact hq"],
    ]
    assert parse_script(" rfl").items == ["rfl"]
    with pytest.raises(ExtractionError):
        parse_script("\n  cases h <;> simp")
    assert [d[0] for d in split_declarations("theorem a : True := by\n  trivial\n\nlemma b : 1 = 1 := rfl\n")] == ["a"]


def test_extraction_through_the_standin_repl(standin_env):
    text = (
        "theorem aa (x : Nat) (h1 : x  = 2) : x = 2 := by\n  assumption\n\n"
        "theorem my_theorem (x : Nat) : x = x := by\n  exact my_fake_premise\n"
    )
    good, bad = extract_file(standin_env, text)
    assert good.verified and good.tree.tactic == "assumption" and good.tree.size == 1 and good.env_calls == 1
    assert good.tree.state == "x : Nat\nh1 : x = 2\n⊢ x = 2"
    assert not bad.verified and bad.tree is None and "my_fake_premise" in bad.error
    assert EnvStatus.ERROR.value in bad.error


@pytest.mark.lean
def test_extraction_with_real_lean():
    from leanloop.lean.session import SessionConfig
    from search.repl_env import ReplEnv

    env = ReplEnv(SessionConfig(require_mathlib=False, timeout=120))
    try:
        (item,) = extract_file(
            env, "theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q := by\n  constructor\n  · exact hp\n  · exact hq\n"
        )
    finally:
        env.close()
    assert item.verified, item.error
    assert item.tree.tactic == "constructor" and [c.tactic for c in item.tree.children] == ["exact hp", "exact hq"]
