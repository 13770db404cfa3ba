"""Step labels from Lean against real recorded replies: the incremental REPL path through
lean-interact and the stand-in REPL (the REPL's own v4.33.0-rc2 test transcripts), the prefix path through the replay
backend, first-failure propagation, the reviewer's decisions (a scripted rule reviewer) and the
correspondence judge."""

from __future__ import annotations

import asyncio
import gzip
import json
from dataclasses import replace

import pytest

from leanloop.lean.local import LocalBackend, standin_config
from leanloop.lean.replay import ReplayBackend
from leanloop.lean.session import LeanSession, standin_session_config
from leanloop.lean.replies import response_from_rl_lean
from leanloop.lean.standins.repl import prepare_repl_dir
from leanloop.lean.types import Category, Outcome
from leanloop.lean.verifier import Verifier
from prm.labels_from_lean import (
    INFRA_ERROR,
    OK,
    UNAVAILABLE,
    IncrementalChecker,
    PrefixChecker,
    label_paired_proof,
    labels_from_outcome,
    propagate,
    split_prefix_errors,
    training_prefix,
)
from prm.review import ReviewRule, RuleReviewer, parse_review
from prm.paired import PairedStep
from prm.steps import split_steps


@pytest.fixture(scope="module")
def incremental(tmp_path_factory, shared_data):
    root = prepare_repl_dir(
        tmp_path_factory.mktemp("repl"), [shared_data / "lean_repl" / "repl_io_pairs.jsonl"], lean_version="v4.33.0-rc2"
    )  # lean-interact reads proofStatus (HEAD)
    checker = IncrementalChecker(LeanSession(standin_session_config(root, timeout=20)))
    yield checker
    checker.close()


@pytest.fixture(scope="module")
def verifier():
    return Verifier(ReplayBackend(["repl_io"]), "collection")


def whole(verifier):
    return lambda request: verifier.check_sync([request])[0]


def steps(*tactics):
    return [PairedStep(f"step doing {t}", t) for t in tactics]


def test_propagation_marks_the_first_failure_and_everything_after():
    labels = propagate(4, 1, "linarith failed")
    assert [l for l, _ in labels] == [True, False, False, False]
    assert labels[1][1] == "first failure: linarith failed" and "step 2" in labels[3][1]
    assert [l for l, _ in propagate(3, None, "")] == [True, True, True]
    assert training_prefix([True, False, None, False]) == [True, False]


def test_incremental_all_steps_pass(incremental):
    # repl test "readme": def f (x : Unit) : Nat := by sorry; apply Int.natAbs; exact -37 -> no goals
    result = incremental.check("", "def f (x : Unit) : Nat := by", ["apply Int.natAbs", "exact -37"])
    assert (result.status, result.first_failure, result.checked, result.goals_left) == (OK, None, 2, False)


def test_incremental_first_failure_stops_there(incremental):
    # repl test "invalid_tactic": `exact my_fake_premise` -> unknown identifier. The later tactic was
    # never recorded: had the checker asked, the stand-in would have answered "no recorded answer"
    result = incremental.check("", "theorem my_theorem (x : Nat) : x = x := by", ["exact my_fake_premise", "rfl"])
    assert (result.status, result.first_failure, result.checked) == (OK, 0, 1)
    assert "Unknown identifier `my_fake_premise`" in result.output


def test_incremental_goals_left_fail_the_last_step_and_unrecorded_steps_give_no_label(incremental):
    left = incremental.check("", "def f : Nat := by", ["apply Int.natAbs"])  # recorded goals: ⊢ Int
    assert (left.first_failure, left.goals_left) == (0, True) and "⊢ Int" in left.output
    missing = incremental.check("", "def f : Nat := by", ["exact 7"])
    assert missing.status == UNAVAILABLE and missing.first_failure is None


def test_prefix_reads_only_errors_before_the_sorry():
    checker = PrefixChecker(ReplayBackend(["repl_io"]))
    # recorded: "example : True := by\n  have h : set Nat := by sorry\n  sorry" has errors on line 2
    failing = checker.check("", "example : True := by", ["have h : set Nat := by sorry", "trivial"])
    assert (failing.status, failing.first_failure, failing.checked) == (OK, 0, 1)
    assert "type expected" in failing.output
    # recorded: "example : True := by\n  sorry\n  sorry" -> "no goals to be solved" ON the sorry line:
    # prefix 1 passes; prefix 2 was never recorded, so the proof gets no labels
    unrecorded = checker.check("", "example : True := by", ["sorry", "sorry"])
    assert unrecorded.status == UNAVAILABLE and unrecorded.checked == 2


def test_prefix_blames_no_step_for_errors_in_the_trusted_statement():
    # recorded (repl test "line_breaks"): "theorem foo : 1 = 1 := by\n\nsorry" -> unsolved goals on line 1
    response = asyncio.run(ReplayBackend(["repl_io"]).run("theorem foo : 1 = 1 := by\n\nsorry", 10))
    on_statement = [e for e in response.errors if e.pos.line == 1]
    assert on_statement and "unsolved goals" in on_statement[0].data
    trusted, in_steps = split_prefix_errors(on_statement, first_tactic_line=2, sorry_line=3)
    assert trusted == on_statement and in_steps == []
    trusted, in_steps = split_prefix_errors(on_statement, first_tactic_line=1, sorry_line=3)
    assert trusted == [] and in_steps == on_statement


def test_a_candidate_that_crashes_the_repl_gives_no_labels(tmp_path, shared_data, verifier):
    # the stand-in REPL dies on this tactic every time it is sent: the local backend answers
    # candidate_failure (the program's doing), which is no verdict on any step
    root = prepare_repl_dir(
        tmp_path,
        [shared_data / "lean_repl" / "repl_io_pairs.jsonl"],
        lean_version="v4.33.0-rc2",
        faults=[{"when": "crash_probe", "action": "crash"}],
    )
    backend = LocalBackend(standin_config(root, timeout=20, workers=1, all_tactics=False, crash_retries=0))
    labels = label_paired_proof(
        steps("exact crash_probe"),
        header="",
        name=None,
        statement="theorem t : True := by",
        checker=PrefixChecker(backend, timeout=20),
        whole_program=whole(verifier),
    )
    assert labels.status == "candidate_failure" and [s.label for s in labels.steps] == [None]
    assert labels.proof_label is None


def test_incremental_checker_forgets_header_environments_with_the_killed_repl(tmp_path, shared_data):
    # a statement that hangs times out and the REPL is killed; the next proof under the same header
    # (recorded: repl test "Mathlib/test/H20231115") must elaborate the header again in the new REPL
    root = prepare_repl_dir(
        tmp_path,
        [shared_data / "lean_repl" / "repl_io_pairs.jsonl"],
        lean_version="v4.33.0-rc2",
        faults=[{"when": "hang_probe", "action": "hang"}],
    )
    checker = IncrementalChecker(LeanSession(standin_session_config(root, timeout=20)), timeout=2)
    try:
        header = "import Mathlib.Tactic.Cases"
        assert checker.check(header, "theorem hang_probe : True := by", ["trivial"]).status == "timeout"
        after = checker.check(header, "example {x : Nat} : x + 1 > x := by", ["induction' x with x hx"])
        assert after.status == OK and after.checked == 1
    finally:
        checker.close()


def test_reviewer_off_every_failure_counts(incremental, verifier):
    labels = label_paired_proof(
        steps("exact my_fake_premise", "rfl"),
        header="",
        name="my_theorem",
        statement="theorem my_theorem (x : Nat) : x = x := by",
        checker=incremental,
        whole_program=whole(verifier),
    )
    assert [s.label for s in labels.steps] == [False, False] and labels.proof_label is False
    assert labels.reviewer == [] and labels.first_error == 0


def test_reviewer_keeps_mathematical_failures_and_drops_the_rest(incremental, verifier):
    statement = "theorem my_theorem (x : Nat) : x = x := by"
    kept = label_paired_proof(
        steps("exact my_fake_premise", "rfl"),
        header="",
        statement=statement,
        name=None,
        checker=incremental,
        whole_program=whole(verifier),
        reviewer=RuleReviewer([]),
    )
    assert [s.label for s in kept.steps] == [False, False]
    assert kept.reviewer == [{"step": 0, "verdict": "mathematical", "reason": "no rule matched", "repair": None}]
    rules = RuleReviewer([ReviewRule("(?i)unknown identifier", "syntax", "misspelt name")])
    dropped = label_paired_proof(
        steps("exact my_fake_premise", "rfl"),
        header="",
        statement=statement,
        name=None,
        checker=incremental,
        whole_program=whole(verifier),
        reviewer=rules,
    )
    assert [s.label for s in dropped.steps] == [None, None]
    assert dropped.steps[0].reason.startswith("dropped: reviewer judged the failure syntax")
    assert training_prefix([s.label for s in dropped.steps]) == []


def test_reviewer_repairs_a_syntax_failure_once_and_the_proof_is_checked_again(incremental, verifier):
    # repl test "unknown_tactic": `exat 42` -> "Lean error: unknown tactic"; repaired to the recorded
    # `have t : Nat := 42` (repl test "proof_step"), after which `exact t` closes the goal
    rules = RuleReviewer([ReviewRule("unknown tactic", "syntax", "typo", replace=["exat 42", "have t : Nat := 42"])])
    labels = label_paired_proof(
        steps("exat 42", "exact t"),
        header="",
        statement="def f : Nat := by",
        name=None,
        checker=incremental,
        whole_program=whole(verifier),
        reviewer=rules,
    )
    assert labels.repaired and labels.first_error is None
    assert labels.steps[0].tactic == "have t : Nat := 42"
    assert labels.reviewer[0]["verdict"] == "syntax" and labels.reviewer[0]["recheck"] == "fixed"
    # every tactic compiles, but the acceptance policy decides the proof: a `def` proves no theorem,
    # which says nothing about either step
    assert labels.proof_label is False and "precheck_rejected" in labels.reason
    assert [s.label for s in labels.steps] == [None, None] and labels.status == OK
    assert all(s.reason.startswith("no label: whole program precheck_rejected") for s in labels.steps)


def test_a_repair_that_cannot_be_checked_drops_the_failure(incremental, verifier):
    rules = RuleReviewer([ReviewRule("unknown tactic", "syntax", replace=["exat", "exact"])])
    labels = label_paired_proof(
        steps("exat 42"),
        header="",
        statement="def f : Nat := by",
        name=None,
        checker=incremental,
        whole_program=whole(verifier),
        reviewer=rules,
    )
    assert labels.reviewer[0]["recheck"] == UNAVAILABLE and [s.label for s in labels.steps] == [None]


def test_correspondence_judge_drops_rejected_steps(incremental, verifier):
    class Judge:
        name = "scripted"

        def judge(self, prose, tactic):
            return ("rfl" not in tactic, "scripted")

    labels = label_paired_proof(
        steps("exact my_fake_premise", "rfl"),
        header="",
        name=None,
        statement="theorem my_theorem (x : Nat) : x = x := by",
        checker=incremental,
        whole_program=whole(verifier),
        judge=Judge(),
    )
    assert [s.label for s in labels.steps] == [False, None] and labels.correspondence_rejected == 1
    assert labels.steps[1].reason.startswith("dropped: correspondence judge rejected")


def test_model_reviewer_answers_are_parsed_strictly():
    assert parse_review("VERDICT: MATHEMATICAL").verdict == "mathematical"
    syntax = parse_review("VERDICT: syntax\n```lean4\nexact h\n```")
    assert (syntax.verdict, syntax.repair) == ("syntax", "exact h")
    assert parse_review("it looks fine").verdict == "unclear"


def test_recorded_first_error_labels(shared_data):
    path = shared_data / "candidates" / "rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz"
    rows = [json.loads(line) for line in gzip.open(path, "rt")]
    row = next(
        r
        for r in rows
        if r["name"] == "numbertheory_4x3m7y3neq2003" and not r["verdict_pass"] and r["compilation_result"]["errors"]
    )
    response = response_from_rl_lean(row["compilation_result"], row["code"])
    cut = split_steps(row["code"], row["name"])
    labels, proof, first, _ = labels_from_outcome(cut, Outcome(Category.INVALID, messages=response.messages))
    # errors on the declaration line (the proof's `by`: goals left open) are placed only when no step holds one
    error_line = min(e.pos.line for e in response.errors if e.pos.line >= cut[0].start.line)
    assert proof is False and cut[first].start.line <= error_line <= cut[first].end_line
    assert [l.label for l in labels] == [True] * first + [False] * (len(cut) - first)
    none, proof, _, why = labels_from_outcome(cut, Outcome(Category.TIMEOUT))
    assert proof is None and all(l.label is None for l in none) and why == "timeout"


def test_only_errors_on_the_proofs_by_fall_to_the_last_step(shared_data):
    path = shared_data / "candidates" / "rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz"
    row = next(
        r
        for r in map(json.loads, gzip.open(path, "rt"))
        if r["name"] == "amc12a_2021_p14" and not r["verdict_pass"] and r["compilation_result"]["errors"]
    )
    response = response_from_rl_lean(row["compilation_result"], row["code"])
    cut = split_steps(row["code"], row["name"])
    # recorded: "unsolved goals" on the line of `:= by`, no error inside a step: the last step claimed to finish
    assert [e.pos.line for e in response.errors] == [cut[0].by_line]
    labels, proof, first, _ = labels_from_outcome(cut, Outcome(Category.INVALID, messages=response.messages))
    assert first == len(cut) - 1 and [l.label for l in labels] == [True] * first + [False]
    # the same error anywhere else outside the steps (here: unplaced, or on the statement's first
    # line) blames no step
    error = response.errors[0]
    for moved in (replace(error, pos=None), replace(error, pos=replace(error.pos, line=cut[0].by_line - 1))):
        labels, proof, first, why = labels_from_outcome(cut, Outcome(Category.INVALID, messages=[moved]))
        assert first is None and proof is False and all(l.label is None for l in labels)
        assert why.startswith("error outside every step")


def test_model_reviewer_whose_answer_has_no_verdict_drops_the_failure(incremental, verifier):
    from leanloop.training.models import ModelSpec
    from prm.review import ModelReviewer

    reviewer = ModelReviewer(ModelSpec(name="qwen3-tiny"), max_new_tokens=4)  # random weights: no VERDICT line
    labels = label_paired_proof(
        steps("exact my_fake_premise"),
        header="",
        name=None,
        reviewer=reviewer,
        statement="theorem my_theorem (x : Nat) : x = x := by",
        checker=incremental,
        whole_program=whole(verifier),
    )
    assert labels.reviewer[0]["verdict"] == "unclear" and "no VERDICT" in labels.reviewer[0]["reason"]
    assert [s.label for s in labels.steps] == [None]
