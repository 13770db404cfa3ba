"""Honest proofs an earlier rl harness refused: CRLF, helper lines between a docstring
and its statement, `open ... in` / `section` / `variable` in a completion, `theorem _root_.x`
inside a namespace, a leading `open` line, and trusted statements with their own context.

Each honest completion is the recorded accepted RL-Lean proof of mathd_algebra_478 (Lean's own
messages for it come from the recording), rewritten only in layout. The trailer's `#print axioms`
reply is never recorded (recordings have no harness lines): it is the reference manual's clean
reply placed on the axioms line, marked ASSUMED REPLY where used.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from leanloop.lean.acceptance import mask, parse_axioms_reply
from leanloop.lean.acceptance.submission import HARNESS_NAMESPACE
from leanloop.lean.types import Category, LeanMessage, LeanResponse, Position, ResponseStatus
from rl.reward_harness import RewardHarness, Stage, split_docstring

NAME = "mathd_algebra_478"


@pytest.fixture(scope="module")
def accepted(continuations):
    return next(c for c in continuations if c[2]["verdict_pass"] and c[0].name == NAME)


def block(statement, before: str, proof: str, name: str = NAME) -> str:
    head = statement.statement.rstrip()
    assert head.endswith(":= by")
    head = head.replace(f"theorem {NAME}", f"theorem {name}", 1)
    return f"Proof:\n```lean4\n{before}{head}{proof}\n```\n"


def test_helpers_go_before_the_docstring_so_it_stays_on_its_statement(accepted):
    statement, proof, row = accepted
    assert split_docstring(statement.context)[1].startswith("/--")
    for before in (
        "open Real in\n",
        "set_option maxRecDepth 1000 in\n",
        "section\nvariable (k : ℕ)\n",
        "lemma helper : (1 : ℝ) = 1 := rfl\n\n",
    ):
        candidate = RewardHarness("rl").build(statement, block(statement, before, proof))
        assert candidate.stage is Stage.READY, (before, candidate.precheck_reasons)
        docstring = split_docstring(statement.context)[1]
        # the docstring is directly followed by the trusted statement; the helpers come before it
        assert docstring + statement.statement.rstrip().removesuffix(" by").rstrip() in candidate.program
        assert candidate.program.index(before) < candidate.program.index(docstring)


def test_the_completions_own_docstring_of_the_target_gives_way_to_the_trusted_one(accepted):
    statement, proof, _ = accepted
    candidate = RewardHarness("rl").build(statement, block(statement, "open Real\n\n/-- my restatement -/\n", proof))
    assert candidate.stage is Stage.READY, candidate.precheck_reasons
    assert "my restatement" not in candidate.program and "open Real\n" in candidate.program
    assert (
        split_docstring(statement.context)[1] + statement.statement.rstrip().removesuffix(" by").rstrip()
        in candidate.program
    )


def test_a_leading_open_line_of_the_completion_is_kept(accepted):
    statement, proof, _ = accepted
    candidate = RewardHarness("rl").build(statement, block(statement, "import Mathlib\nopen Finset\n\n", proof))
    assert candidate.stage is Stage.READY
    assert "open Finset\n" in candidate.program and candidate.program.count("import Mathlib") == 1


def test_root_name_inside_a_namespace_stays_global(accepted):
    statement, proof, _ = accepted
    completion = block(statement, "namespace Work\n\n", proof, name=f"_root_.{NAME}")
    candidate = RewardHarness("rl").build(statement, completion)
    assert candidate.stage is Stage.READY, candidate.precheck_reasons
    assert f"theorem _root_.{NAME}" in candidate.program
    lines = candidate.submission.program.split("\n")
    assert lines[candidate.submission.trailer_line - 1] == "end Work"  # closed before the check line


def test_crlf_completion_is_the_same_program(accepted):
    statement, proof, row = accepted
    harness = RewardHarness("rl")
    lf = harness.build(statement, proof)
    crlf = harness.build(statement, proof.replace("\n", "\r\n"))
    assert crlf.stage is Stage.READY and crlf.program == lf.program == row["code"]


def test_the_recorded_accepted_program_is_valid_through_the_new_layout(accepted, replay, shared_data):
    statement, proof, row = accepted
    harness = RewardHarness("rl")
    candidate = harness.build(statement, proof)
    sub = candidate.submission
    lines = sub.program.split("\n")
    assert lines[sub.header_lines].startswith("set_option maxHeartbeats")
    assert lines[sub.header_lines + 1].startswith(f"theorem {HARNESS_NAMESPACE}.expected_")
    recorded = replay.answer(row["code"])
    moved = [
        LeanMessage(
            m.severity,
            m.data,
            None
            if m.pos is None
            else Position(m.pos.line + (sub.block_lines if m.pos.line > sub.header_lines else 0), m.pos.column),
        )
        for m in recorded.messages
    ]
    clean = next(
        json.loads(line)["output"]
        for line in open(shared_data / "lean_text/reference_manual_lean_outputs.jsonl")
        if "does not depend on any axioms" in json.loads(line)["output"]
        or "depends on axioms" in json.loads(line)["output"]
    )
    reply = parse_axioms_reply(clean)
    # ASSUMED REPLY: the reference manual's axioms reply (renamed to the check theorem) on the
    # axioms line, and Lean's usual sorry warning for the harness's own `expected := sorry` line
    text = clean.replace(f"'{reply.name}'", f"'{sub.check_name}'")
    harness_sorry = LeanMessage("warning", "declaration uses 'sorry'", Position(sub.header_lines + 2, 8))
    response = LeanResponse(
        ResponseStatus.OK, messages=[*moved, harness_sorry, LeanMessage("info", text, Position(sub.axioms_line, 0))]
    )
    outcome = harness.policy.judge(candidate.request, sub, response, "recorded")
    expected = Category.VALID if not reply.disallowed else Category.INVALID
    assert outcome.category is expected
    assert [(m.data, m.pos) for m in outcome.messages] == [(m.data, m.pos) for m in recorded.messages]


def test_trusted_statements_are_elaborated_in_their_own_context():
    """Counted on the shipped statement sets: the harness's parse (stage READY for an honest-looking
    continuation) and where the trusted statement is elaborated (after its own context)."""
    from leanloop.prover.statements import read_statements

    harness = RewardHarness("rl", "continuation")
    ready, context_used = Counter(), Counter()
    for name in (
        "matholympiadbench_goedel_prover_v2",
        "minif2f_deepseek_prover_v1.5",
        "minif2f_goedel_prover_v2_repaired",
        "minif2f_yangky11_lean4",
        "proofnet_deepseek_prover_v1.5",
        "proofnet_lean4_rahul3613",
    ):
        for statement in read_statements(f"shared://statements/{name}.jsonl").statements:
            candidate = harness.build(statement, "\n  simp\n")
            ready[name] += candidate.stage is Stage.READY
            if candidate.stage is Stage.READY:
                before = split_docstring(statement.context)[0]
                # the harness block comes after the statement's own context, so its opens, variables
                # and definitions are in scope when the trusted statement is elaborated
                harness_at = candidate.submission.program.index(f"theorem {HARNESS_NAMESPACE}.expected_")
                assert (
                    candidate.submission.program[:harness_at].endswith("set_option maxHeartbeats 800000\n")
                    and before.rstrip() in candidate.submission.program[:harness_at]
                )
                context_used[name] += bool(re.search(r"\b(?:open|variable|def|abbrev)\b", mask(before).text))
    # the earlier harness: 347 / 357 / 358 (instances and notation of trusted contexts were refused as
    # if the candidate wrote them); the rest are targets declared as `instance`/`def` and one
    # context with an `axiom`
    assert ready == {
        "matholympiadbench_goedel_prover_v2": 359,
        "minif2f_deepseek_prover_v1.5": 488,
        "minif2f_goedel_prover_v2_repaired": 244,
        "minif2f_yangky11_lean4": 488,
        "proofnet_deepseek_prover_v1.5": 357,
        "proofnet_lean4_rahul3613": 358,
    }
    assert (
        context_used["matholympiadbench_goedel_prover_v2"] >= 200
        and context_used["proofnet_deepseek_prover_v1.5"] >= 19
    )
