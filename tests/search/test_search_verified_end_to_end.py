"""A proof the search finds is a Verifier verdict, end to end on real recordings (no Lean).

The problems are the theorems of recorded REPL programs that Lean accepted, whose ``allTactics``
replies give the goals before each tactic (``search.recorded``). The real ``SearchBatch`` searches
the replay of those steps; its proof is rendered as one program and checked by the Verifier over the
replay backend of the same recordings. The shipped recordings hold such a pair (a whole-program
verdict and per-tactic goals of the same program) only for one-tactic proofs, so the proofs found
here are one tactic deep: the search must still pick the recorded tactic among wrong ones."""

from __future__ import annotations

import json

import pytest

from leanloop.lean.acceptance import reasons as R
from leanloop.lean.recordings import normalize_program
from leanloop.lean.replay import ReplayBackend
from leanloop.lean.types import Category
from leanloop.lean.verifier import Verifier
from search.config import SearchConfig
from search.env import EnvStatus
from search.mcts import SearchBatch, start_searches
from search.program import FoundProof, found_request, render_program, verify_found
from search.recorded import REPL_SOURCES, recorded_env, recorded_problems
from search.synthetic import NoisyPolicy
from search.trees import TreeNode

FILE2 = "h@HEAD:file2#0"  # repl test/file2.lean: `rw [Nat.add_assoc, Nat.add_comm y, h1]` after two defs
# the programs whose proof sits on its own line, as `render_program` writes it
ROUND_TRIP = {
    FILE2,
    "foo@e72b3256e81d:test/Mathlib/test/incrementality#0",
    "foo2@e72b3256e81d:test/Mathlib/test/incrementality#1",
}


@pytest.fixture(scope="module")
def recorded():
    problems, skipped = recorded_problems()
    return {p.statement.name: p for p in problems}, skipped


@pytest.fixture(scope="module")
def backend():
    return ReplayBackend(REPL_SOURCES)


@pytest.fixture(scope="module")
def found(recorded):
    """The search's proofs: a policy that always offers the recorded tactic but never first."""
    problems, _ = recorded
    env = recorded_env(list(problems.values()))
    config = SearchConfig(simulations=16)
    searches, failed = start_searches(sorted(problems), env, config)
    assert not failed
    SearchBatch(searches, NoisyPolicy(env, p=1.0, q=0.0, k=3, seed=0), config).run()
    return env, {s.name: s for s in searches}


def _found_proof(problem, tree: TreeNode) -> FoundProof:
    s = problem.statement
    return FoundProof(s.name, tree, s.statement, s.header, s.context, theorem=s.theorem)


def test_accepted_programs_become_replay_problems_with_their_recorded_goals(recorded):
    problems, skipped = recorded
    assert ROUND_TRIP <= set(problems)
    file2 = problems[FILE2]
    assert file2.statement.theorem == "h" and file2.statement.header == ""
    assert (
        file2.statement.context.startswith("def a : Nat := 37\n")
        and "theorem h1 : a = b := rfl" in file2.statement.context
    )
    assert file2.statement.statement == "theorem h (x y z : Nat) : x + y + (z + a) = x + (z + b + y) := by"
    # the root is the goal Lean printed before the tactic; the tactic closed it (Lean accepted the program)
    assert file2.tree.state == "x y z : Nat\n⊢ x + y + (z + a) = x + (z + b + y)"
    assert file2.tree.tactic == "rw [Nat.add_assoc, Nat.add_comm y, h1]" and file2.tree.children == []
    # programs with a sorry (calc), or a proof that is not a theorem's (`def f : Nat := by ...`), are counted out
    assert skipped["not_accepted"] >= 1 and skipped["not_a_theorem_proof"] >= 1
    assert all(p.statement.theorem in p.program for p in problems.values())


def test_a_found_proof_is_valid_exactly_where_its_program_is_the_recorded_one(recorded, found, backend):
    problems, _ = recorded
    env, searches = found
    assert all(s.solved for s in searches.values())
    # the recorded tactic was never the policy's first candidate: the search had to recover from failures
    assert all(s.stats.unavailable >= 1 for s in searches.values())
    proofs = [_found_proof(problems[name], search.proof()) for name, search in sorted(searches.items())]
    outcomes = dict(zip(sorted(searches), verify_found(Verifier(backend, "collection"), proofs)))
    valid = {name for name, o in outcomes.items() if o.category is Category.VALID}
    assert valid == ROUND_TRIP
    file2 = next(p for p in proofs if p.name == FILE2)
    program = render_program(file2.tree, file2.statement, file2.header, file2.preamble)
    assert normalize_program(program) == normalize_program(problems[FILE2].program)
    assert outcomes[FILE2].messages == backend.answer(problems[FILE2].program).messages == []
    # a proof on the declaration's line (`:= by exact rfl`) renders on its own line: a program nobody
    # recorded, so no verdict, never a guessed one
    for name in set(outcomes) - ROUND_TRIP:
        assert outcomes[name].category is Category.UNAVAILABLE, name
        assert R.code_of(outcomes[name].reasons[0]) == R.NO_RECORDING


def test_a_composition_the_recordings_do_not_cover_is_unavailable(recorded, found, backend):
    problems, _ = recorded
    env, searches = found
    tree = searches[FILE2].proof()
    root = env.start(FILE2).goals[0]
    verifier = Verifier(backend, "collection")
    # every step recorded (the replay matches tactics up to whitespace) but the program is not
    respaced = "rw [Nat.add_assoc,  Nat.add_comm y, h1]"
    assert env.apply(root, respaced).closed
    # a rewrite in another order: neither the step nor the program was recorded
    reordered = "rw [Nat.add_comm y, Nat.add_assoc, h1]"
    assert env.apply(root, reordered).status is EnvStatus.UNAVAILABLE
    for tactic in (respaced, reordered):
        perturbed = TreeNode(tree.goals, tactic).measure()
        (outcome,) = verify_found(verifier, [_found_proof(problems[FILE2], perturbed)])
        assert outcome.category is Category.UNAVAILABLE and R.code_of(outcome.reasons[0]) == R.NO_RECORDING


def test_under_rl_the_recorded_program_is_reached_but_the_harness_cannot_be_answered(recorded, found, backend):
    """The rl harness compiles more than the recorded text (the trusted statement, a check theorem,
    ``#print axioms``): the recording says the program is clean, which cannot settle the harness's
    checks, so the verdict is ``unavailable`` with that reason, not ``no_recording``."""
    problems, _ = recorded
    _, searches = found
    proof = _found_proof(problems[FILE2], searches[FILE2].proof())
    verifier = Verifier(backend, "rl")
    (outcome,) = verify_found(verifier, [proof])
    assert outcome.category is Category.UNAVAILABLE and R.code_of(outcome.reasons[0]) == R.NO_TRAILER_REPLY
    # the harness elaborates the trusted statement after the statement's own context (the defs it names)
    submission = verifier.prepare(found_request(proof))
    lines = submission.program.split("\n")
    assert lines[submission.header_lines - 1] == "theorem h1 : a = b := rfl"
    assert lines[submission.header_lines] == "set_option maxHeartbeats 800000"


def test_search_eval_over_recordings_counts_verified_proofs_as_solved(artifacts):
    from search import evaluate

    report = evaluate.main(["--config", "configs/search/eval/recorded.yaml", "--run", "t"])
    metrics = report.manifest["metrics"]
    assert metrics["theorems"] == metrics["search_closed"] == metrics["oracle_solved"] >= len(ROUND_TRIP)
    assert metrics["solved"] == metrics["verified_valid"] == len(ROUND_TRIP)
    assert metrics["verdicts"] == {"valid": len(ROUND_TRIP), "unavailable": metrics["theorems"] - len(ROUND_TRIP)}
    rows = [json.loads(line) for line in (report.run_dir / "results.jsonl").read_text().splitlines()]
    assert {r["theorem"] for r in rows if r.get("verdict") == "valid"} == ROUND_TRIP
    assert "model" not in report.manifest["inputs"] and "recordings:repl_io" in report.manifest["inputs"]
    text = (report.run_dir / "report.md").read_text()
    assert "recorded REPL replies" in text and "`collection` profile" in text
    # the oracle has tactics only where something was recorded: with Lean it is a user's mistake, no run
    with pytest.raises(SystemExit, match="policy 'oracle'"):
        evaluate.main(["--config", "configs/search/eval/recorded.yaml", "--environment", "http", "--run", "u"])
    assert not (artifacts / "search_eval" / "u").exists()
