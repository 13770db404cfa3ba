"""What only real Lean can confirm (``make lean-check`` runs these first): the rl harness's check
line, the fresh-process path with its channel probe, a proof-state session in search and in prm,
and the judge on one valid and one invalid program. All carry the ``lean`` marker: they skip
without a toolchain (``LEANLOOP_LEAN_PROJECT`` = a built Lean + Mathlib project, or ``lake`` on PATH).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import replace

import pytest

from leanloop.lean.local import LocalBackend, LocalBackendConfig
from leanloop.lean.session import LeanSession
from leanloop.lean.acceptance import reasons as R
from leanloop.lean.types import Category, ResponseStatus, VerifyRequest
from leanloop.lean.verifier import Verifier

NAME = "mathd_algebra_478"
CORE_THEOREM = "theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q := by"


def _config(**options) -> LocalBackendConfig:
    project = os.environ.get("LEANLOOP_LEAN_PROJECT")
    return LocalBackendConfig(**({"project_dir": project} if project else {}), timeout=900, **options)


@pytest.fixture(scope="module")
def accepted(rl_rows, statements):
    row = next(r for r in rl_rows if r["verdict_pass"] and r["name"] == NAME)
    trusted = statements[NAME]
    return VerifyRequest(
        program=row["code"], name=NAME, statement=trusted["formal_statement"], header=trusted["header"]
    )


@pytest.mark.lean
def test_the_check_line_compiles_and_names_only_the_global_target(accepted):
    """The composed program (harness block, sorry'd ``expected``, ``type_of%`` check line, ``#print
    axioms`` trailer) is accepted for the recorded proof; its harness lines carry no error and the
    trailer answers. The same proof moved into a namespace is not ``_root_.<name>``: rejected."""
    verifier = Verifier(LocalBackend(_config()), "rl", concurrency=1, timeout=900)
    submission = verifier.prepare(accepted)
    assert "type_of% @_root_." in submission.program and "#print axioms _root_." in submission.program
    at = accepted.program.index(f"theorem {NAME}")
    namespaced = VerifyRequest(
        program=accepted.program[:at] + "namespace Decoy\n" + accepted.program[at:] + "\nend Decoy\n",
        name=NAME,
        statement=accepted.statement,
        header=accepted.header,
    )
    valid, moved = verifier.check_sync([accepted, namespaced])
    assert valid.category is Category.VALID, (valid.reasons, valid.first_error)
    assert not any(R.code_of(r) == R.HARNESS_LINE_ERROR for r in valid.reasons)
    assert moved.category is Category.INVALID, (moved.reasons, moved.first_error)


@pytest.mark.lean
def test_fresh_process_restores_the_header_and_the_probe_catches_a_dead_repl(accepted):
    """fresh_process: the recorded proof compiles in a new REPL from the header pickle (twice: built,
    then restored), no process survives, and a program whose code exits the REPL after it was sent
    is the candidate's failure (the probe got no reply)."""
    backend = LocalBackend(_config(fresh_process=True, all_tactics=False))
    exits = accepted.header + "\n#eval (IO.Process.exit 0 : IO Unit)\n"

    async def scenario():
        try:
            first = await backend.run(accepted.program)
            second = await backend.run(accepted.program)
            alive = backend.worker_pids()
            died = await backend.run(exits)
            return first, second, alive, died
        finally:
            await backend.aclose()

    first, second, alive, died = asyncio.run(scenario())
    for response in (first, second):
        assert response.status is ResponseStatus.OK and not response.errors, response.detail
    assert alive == [None]
    assert died.status is ResponseStatus.CANDIDATE_FAILURE, (died.status, died.detail)


@pytest.mark.lean
def test_a_proof_state_session_in_search():
    from search.repl_env import ReplEnv

    env = ReplEnv(replace(_config(), timeout=300))
    try:
        start = env.start(CORE_THEOREM.removesuffix(" := by"))
        assert start.ok, start.error
        split = env.apply(start.goals[0], "constructor")
        assert split.ok and len(split.goals) == 2, split.error
        assert env.apply(split.goals[0], "exact hp").closed
        assert env.apply(split.goals[1], "exact hq").closed
        wrong = env.apply(split.goals[0], "exact hq")
        assert not wrong.ok and wrong.error
    finally:
        env.close()


@pytest.mark.lean
def test_a_proof_state_session_in_prm():
    from prm.labels_from_lean import OK, IncrementalChecker

    checker = IncrementalChecker(LeanSession(_config()), timeout=300)
    try:
        good = checker.check("", CORE_THEOREM, ["constructor", "exact hp", "exact hq"])
        assert (good.status, good.first_failure, good.checked) == (OK, None, 3), good.output
        bad = checker.check("", CORE_THEOREM, ["constructor", "exact hq", "exact hp"])
        assert (bad.status, bad.first_failure) == (OK, 1), bad.output
    finally:
        checker.close()


@pytest.mark.lean
@pytest.mark.skipif(
    any(shutil.which(t) is None for t in ("comparator", "lean4export", "landrun")),
    reason="comparator / lean4export / landrun not on PATH",
)
def test_the_judge_on_one_valid_and_one_invalid_program(tmp_path):
    from leanloop.lean.judge import ComparatorJudge, JudgeConfig

    statement = "theorem comm (a b : Nat) : a + b = b + a :="
    proof = "theorem comm (a b : Nat) : a + b = b + a := Nat.add_comm a b\n"
    wrong = "theorem comm (a b : Nat) : a + b = a + b := rfl\n"  # proves another statement
    judge = ComparatorJudge(JudgeConfig(workdir=str(tmp_path), timeout=600))
    valid, invalid = judge.check_sync(
        [
            VerifyRequest(program=proof, name="comm", statement=statement, header=""),
            VerifyRequest(program=wrong, name="comm", statement=statement, header=""),
        ]
    )
    assert valid.category is Category.VALID, valid.reasons
    assert invalid.category is Category.INVALID, invalid.reasons


@pytest.mark.lean
def test_lean_check_agrees_with_the_recorded_sample_on_real_lean(artifacts):
    """``make lean-check``'s re-verification and fixtures on a small sample, on this machine's Lean."""
    from bench.lean_check.driver import main
    from leanloop.paths import REPO_ROOT

    code = main(
        [
            "--config",
            str(REPO_ROOT / "configs/lean_check/default.yaml"),
            "--run",
            "lean_test",
            "--only",
            "[discovery,reverify,fixtures]",
            "--sample_size",
            "24",
            "--lean.concurrency",
            "2",
        ]
    )
    assert code == 0, (artifacts / "lean_check" / "lean_test" / "report.md").read_text()
