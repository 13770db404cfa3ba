"""The gated reward on real statements and real recorded Lean answers."""

from __future__ import annotations

import json
import re

import pytest

from leanloop.lean.acceptance.masking import mask

from autoformalizer.reward import GatedReward
from autoformalizer.statements import canonicalize, faithfulness, find_declaration, well_formed
from autoformalizer.typecheck import CheckStatus, statement_program
from leanloop.lean.check import LeanConfig


def _rows(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.fixture(scope="module")
def formal_statements(shared_data):
    """Every shipped ProofNet / miniF2F formal statement."""
    out = []
    for name in (
        "proofnet_lean4_rahul3613.jsonl",
        "proofnet_deepseek_prover_v1.5.jsonl",
        "minif2f_deepseek_prover_v1.5.jsonl",
        "minif2f_goedel_prover_v2_repaired.jsonl",
    ):
        out += [(name, r["name"], r["formal_statement"]) for r in _rows(shared_data / "statements" / name)]
    out += [
        ("yangky11", r["name"], r["lean_file"])
        for r in _rows(shared_data / "statements" / "minif2f_yangky11_lean4.jsonl")
    ]
    return out


def test_real_formal_statements_are_well_formed_and_broken_ones_are_not(formal_statements):
    theorems = [
        (src, name, s)
        for src, name, s in formal_statements
        if any(line.lstrip().startswith(("theorem ", "lemma ")) for line in s.splitlines())
    ]
    bad = {(src, name) for src, name, s in theorems if not well_formed(s).ok}
    # exactly the statements whose parentheses do not even balance by count: two rahul3613 ProofNet
    # rows are cut off upstream (`(ha : a ≠ 0)\n  (f_a := sorry`)
    code = {(src, name): mask(s).text for src, name, s in theorems}  # comments/docstrings blanked
    unbalanced = {key for key, text in code.items() if text.count("(") != text.count(")")}
    assert bad == unbalanced and len(bad) < 5
    # ProofNet states some exercises as `def`/`instance ... : CommGroup G :=`: no theorem, not well-formed
    others = [s for src, name, s in formal_statements if (src, name) not in code]
    assert all(re.search(r"(?m)^(noncomputable )?(def|instance) ", mask(s).text) for s in others)
    assert others and all("no theorem/lemma declaration" in well_formed(s).reasons for s in others)
    theorems = [t for t in theorems if (t[0], t[1]) not in bad]
    for src, name, statement in theorems[:400]:
        decl = find_declaration(statement)
        assert not well_formed(f"{decl.keyword} {decl.name} {decl.binders} := by sorry").ok  # type removed
        assert not well_formed(statement.replace(decl.keyword, "example", 1)).ok  # no theorem
        masked = mask(statement).text
        if ")" in masked:
            cut = masked.rindex(")")  # drop the last closing parenthesis of the code
            assert not well_formed(statement[:cut] + statement[cut + 1 :]).ok


def test_faithfulness_ignores_names_proofs_comments_and_whitespace(shared_data):
    dsp = {r["name"]: r for r in _rows(shared_data / "statements" / "minif2f_deepseek_prover_v1.5.jsonl")}
    yang = {r["name"]: r for r in _rows(shared_data / "statements" / "minif2f_yangky11_lean4.jsonl")}
    common = sorted(set(dsp) & set(yang))
    same = [n for n in common if canonicalize(dsp[n]["formal_statement"]) == canonicalize(yang[n]["lean_file"])]
    assert len(same) > 200  # the two copies agree on most statements (yangky11's file adds imports)
    for name in same:
        assert faithfulness(dsp[name]["formal_statement"], yang[name]["lean_file"]) == 1.0
    statement = dsp[same[0]]["formal_statement"]
    renamed = statement.replace(same[0], "my_attempt", 1).replace(
        ":= by", ":= by -- a proof follows\n  norm_num\n  simp", 1
    )
    assert faithfulness(renamed, statement) == 1.0
    other = dsp[same[1]]["formal_statement"]
    assert faithfulness(statement, other) < 0.9
    different = [n for n in common if n not in same]
    assert all(faithfulness(dsp[n]["formal_statement"], yang[n]["lean_file"]) < 1.0 for n in different)


def test_gates_on_recorded_lean_answers(recorded_checker):
    reward = GatedReward(recorded_checker)
    candidates = [
        # recorded (Lean v4.33): only the sorry warning -> type-checks; identical canonical form
        (
            "theorem aa (x : Nat) (h1 : x  = 2) : x = 2 := by sorry",
            "theorem t (x : Nat) (h1 : x = 2) :\n  x = 2 := by omega",
        ),
        # recorded (v4.8, the 'sorry' wording) -> type-checks; a different reference lowers faithfulness
        ("theorem self_application : 1 = 0 := by sorry", "theorem t : 1 = 1 := by rfl"),
        # recorded errors -> well-formed but fails to type-check
        ("theorem foo : 1 = 1 := by\nsorry", "theorem foo : 1 = 1 := rfl"),  # Unknown identifier `bysorry`
        ("theorem foo : 1 = 1 := by\n\nsorry", "theorem foo : 1 = 1 := rfl"),  # unexpected token 'sorry'
        # not well-formed: no Lean call
        ("theorem aa (x : Nat) (h1 : x = 2 : x = 2 := by sorry", "theorem foo : 1 = 1 := rfl"),
        ("example : 1 = 1 := rfl", "theorem foo : 1 = 1 := rfl"),
        # well-formed, never recorded -> no verdict, no guess
        (
            "theorem never_recorded (n : ℕ) (h : 0 < n) : 1 ≤ n := by omega",
            "theorem t (n : ℕ) (h : 0 < n) : 1 ≤ n := by omega",
        ),
        # rejected by the acceptance policy's deterministic prechecks -> 0
        ("theorem t (h : (2 : ℕ) + 2 = 4 := by native_decide) : True := by sorry", "theorem t : True := trivial"),
    ]
    results = reward.score([c for c, _ in candidates], [r for _, r in candidates])
    gates = [r.gate for r in results]
    assert gates == [
        "typechecks",
        "typechecks",
        "fails_typecheck",
        "fails_typecheck",
        "malformed",
        "malformed",
        "unavailable",
        "rejected",
    ]
    assert results[0].value == pytest.approx(1.0) and results[0].faithfulness == 1.0
    assert results[1].value == pytest.approx(0.3 + 0.7 * faithfulness(candidates[1][0], candidates[1][1]))
    assert 0.3 < results[1].value < 1.0
    assert [r.value for r in results[2:6]] == [0.1, 0.1, 0.0, 0.0]
    assert "bysorry" in results[2].reason and "unexpected token" in results[3].check.feedback()
    assert results[6].value is None and "unavailable" in results[6].reason
    assert results[7].value == 0.0 and "native_decide" in results[7].reason


def test_the_program_compiles_the_statement_with_sorry_under_the_harness_header():
    header = "import Mathlib\n\n"
    proof = "theorem t (a b : ℕ) (h : a = b) : b = a := by\n  rw [h]\n  -- done"
    assert statement_program(proof, header) == header + "theorem t (a b : ℕ) (h : a = b) : b = a := by sorry"
    kept = "theorem t (a b : ℕ) :\n    a + b = b + a := by\n  sorry"
    assert statement_program(kept, header) == header + kept  # already `by sorry`: verbatim
    assert statement_program("/-- doc -/\ntheorem t : True", "") == "theorem t : True := by sorry"
    assert CheckStatus.REJECTED.value == "rejected"


def test_typecheck_tier_is_no_error_and_the_strict_warning_rule_is_an_option(replay_backend):
    """The design's tier: a statement type-checks when Lean reports no error. A real recording whose
    only messages are linter warnings used to drop to 0.1 ("only the sorry warning allowed"); that
    rule stays as warnings="only_sorry"."""
    from autoformalizer.typecheck import StatementChecker, interpret
    from leanloop.lean.acceptance.submission import verbatim
    from leanloop.lean.types import ResponseStatus, VerifyRequest

    program, response = next(
        (p, rs[0].response)
        for p, rs in replay_backend.index
        if rs[0].response.status is ResponseStatus.OK
        and "theorem" in p
        and rs[0].response.messages
        and all(m.severity == "warning" and "sorry" not in m.data for m in rs[0].response.messages)
    )
    request = VerifyRequest(program=program)
    lean = LeanConfig(profile="statement", heartbeats=None)
    design = StatementChecker(lean, header="", backend=replay_backend).verifier.policy
    strict = StatementChecker(lean, header="", warnings="only_sorry", backend=replay_backend).verifier.policy
    assert interpret(program, design.judge(request, verbatim(program), response)).passed
    assert not interpret(program, strict.judge(request, verbatim(program), response)).passed
    with pytest.raises(ValueError, match="warnings"):
        StatementChecker(lean, warnings="none", backend=replay_backend)


def test_the_statement_checker_takes_the_lean_blocks_budget():
    """The checker's Verifier is the ``lean:`` block's: its backend kind, heartbeats, concurrency and
    timeout, under the statement profile whatever the block's profile reads."""
    from autoformalizer.config import TypecheckConfig
    from leanloop.lean.backends import BackendConfig
    from leanloop.lean.replay import ReplayBackend

    lean = LeanConfig(
        profile="statement", heartbeats=1234, concurrency=3, timeout=7.0, backend=BackendConfig(kind="replay")
    )
    verifier = TypecheckConfig(header="import Mathlib\n", warnings="only_sorry").checker(lean).verifier
    assert isinstance(verifier.backend, ReplayBackend)
    assert (verifier.concurrency, verifier.timeout) == (3, 7.0)
    policy = verifier.policy
    assert (policy.name, policy.profile.heartbeats, policy.header) == ("statement", 1234, "import Mathlib\n")
    assert policy.profile.only_sorry_warning
