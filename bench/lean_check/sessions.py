"""lean-check item ``sessions``: search's ``ReplEnv`` and prm's ``IncrementalChecker`` run recorded
proofs tactic by tactic in proof-state mode."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bench.lean_check.reverify import read_candidates
from bench.lean_check.target import STANDIN_SESSION_VERSION, Failed, Target
from leanloop.lean.local import LocalBackendConfig

# -- item 6: search and prm proof-state sessions ------------------------------------------------


def _session_cases(target: Target) -> list[tuple[str, str, list[str]]]:
    """(header, statement ending in ``:= by``, tactics) per theorem. Real: recorded-valid RL-Lean
    proofs of miniF2F statements, one tactic per top-level proof line; stand-ins: the recorded HEAD
    REPL sessions (``assumption_proof``, ``readme``)."""
    if not target.real:
        return [
            ("", "theorem aa (x : Nat) (h1 : x  = 2) : x = 2 := by", ["assumption"]),
            ("", "def f (x : Unit) : Nat := by", ["apply Int.natAbs", "exact -37"]),
        ]
    from leanloop.prover.statements import read_statements

    trusted = {s.theorem: s for s in read_statements(target.config.statements).statements}
    found: dict[str, tuple[str, str, list[str]]] = {}
    for row in read_candidates("rl_lean"):
        statement = trusted.get(row.name or "")
        if row.recorded != "valid" or statement is None or not row.program.startswith(statement.prompt):
            continue
        lines = [line for line in row.program[len(statement.prompt) :].split("\n") if line.strip()]
        # one tactic per line, all at the proof's indentation: the same steps in a linear session
        if not lines or any(
            not line.startswith("  ") or line.startswith("   ") or line.strip().startswith(("--", "·"))
            for line in lines
        ):
            continue
        tactics = [line.strip() for line in lines]
        if row.name not in found or len(tactics) < len(found[row.name][2]):
            found[row.name] = (statement.header, statement.context + statement.statement, tactics)  # type: ignore[index]
    # a few steps each (a session, not one call), shortest first
    return sorted(found.values(), key=lambda case: (not 2 <= len(case[2]) <= 4, len(case[2]), case[1]))[
        : target.config.session_theorems
    ]


def _session_config(target: Target) -> LocalBackendConfig:
    return target.local_config(**({} if target.real else {"lean_version": STANDIN_SESSION_VERSION}))


def search_env(target: Target) -> Any:
    """search's proof-state environment on this run's Lean."""
    from search.repl_env import ReplEnv

    # the recorded HEAD sessions were sent without lean-interact's Elab.async option
    return ReplEnv(
        replace(
            _session_config(target),
            timeout=target.config.lean.timeout,
            parallel_elaboration=None if target.real else False,
        )
    )


def prm_checker(target: Target) -> Any:
    """prm's tactic-by-tactic checker on this run's Lean."""
    from prm.labels_from_lean import IncrementalChecker

    from leanloop.lean.session import LeanSession

    config = replace(_session_config(target), parallel_elaboration=None if target.real else False)
    return IncrementalChecker(LeanSession(config), timeout=target.config.lean.timeout)


def check_sessions(target: Target) -> dict[str, Any]:
    from prm.labels_from_lean import OK

    cases = _session_cases(target)
    results: list[dict[str, Any]] = []
    env, checker = search_env(target), prm_checker(target)
    try:
        for header, statement, tactics in cases:
            theorem = (header + statement).rstrip()
            start = env.start(theorem)
            closed, error = False, start.error
            if start.ok:
                goals = list(start.goals)
                for tactic in tactics:
                    if not goals:
                        break
                    step = env.apply(goals[0], tactic)
                    if not step.ok:
                        error = f"{step.status.value}: {step.error}"
                        break
                    goals = list(step.goals) + goals[1:]
                else:
                    closed = not goals
            search_status = "closed" if closed else (start.status.value if not start.ok else f"open ({error})")
            prm = checker.check(header, statement, tactics)
            prm_status = (
                "all steps pass"
                if prm.status == OK and prm.first_failure is None
                else f"{prm.status}: first failure {prm.first_failure} {str(prm.output)[:160]}"
            )
            results.append(
                {
                    "theorem": statement.split("\n")[-1][:80] or statement[:80],
                    "tactics": len(tactics),
                    "search": search_status,
                    "prm": prm_status,
                    "ok": closed and prm.status == OK and prm.first_failure is None,
                }
            )
    finally:
        env.close()
        checker.close()
    passed = sum(r["ok"] for r in results)
    detail = {
        "theorems": results,
        "summary": f"{passed}/{len(results)} recorded proofs closed in both the search "
        "ReplEnv and prm's IncrementalChecker",
    }
    if passed < len(results):
        raise Failed(detail["summary"], detail)
    return detail
