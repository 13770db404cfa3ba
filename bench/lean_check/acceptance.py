"""lean-check items on what the ``rl`` acceptance path accepts: ``fixtures`` (the red-team exploits
and honest proofs, and the layer that decides each) and ``tokens`` (the shipped token table against
the live one)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from bench.lean_check.reverify import Sampled, read_candidates
from bench.lean_check.target import Failed, Target
from leanloop.lean.acceptance import reasons as R
from leanloop.lean.local import LocalBackend

FIXTURE_THEOREM = "mathd_algebra_478"


# -- item 4: the red-team fixtures under rl -----------------------------------------------------


def check_fixtures(target: Target) -> dict[str, Any]:
    from leanloop.prover.statements import read_statements
    from rl.reward_harness import RewardHarness, Stage

    from rl import exploits as redteam

    statements = {s.theorem: s for s in read_statements(target.config.statements).statements}
    statement = statements[FIXTURE_THEOREM]
    recorded = read_candidates("rl_lean")
    row = next(
        r
        for r in recorded
        if r.name == FIXTURE_THEOREM and r.recorded == "valid" and r.program.startswith(statement.prompt)
    )
    proof = row.program[len(statement.prompt) :]
    cases: list[tuple[str, str, str, str | None, Any]] = [  # (name, kind, completion, reason expected, statement)
        (name, "exploit", completion, code, statement)
        for name, (completion, code) in redteam.exploits(statement, proof).items()
    ]
    cases += [(name, "exploit", completion, None, statement) for name, completion in redteam.NO_CODE.items()]
    # exploits only Lean can stop, as the rl and lean tests build them: a weaker statement of the
    # target's name (test_rl_redteam), the proof against a changed trusted statement, the target in a
    # namespace beside a section variable of its name (test_lean_verifier)
    changed = replace(statement, statement=statement.statement.replace("v = 65", "v = 66"))
    cases += [
        (
            "weaker statement in a code block",
            "exploit",
            f"```lean4\ntheorem {FIXTURE_THEOREM} (v : ℝ) : True := by\n  trivial\n```",
            None,
            statement,
        ),
        ("proof of another statement (v = 66)", "exploit", proof, None, changed),
        (
            "target in a namespace, a section variable of its name",
            "exploit",
            redteam.block(statement, proof, before="namespace Decoy\n\n").replace(
                "\n```\n",
                f"\nsection Inner\nvariable ({FIXTURE_THEOREM} : ∀ b h v : ℝ, False)\nend Inner\nend Decoy\n```\n",
            ),
            None,
            statement,
        ),
    ]
    # benign: the honest proof as the tests write it (continuation, CRLF, chat code block), and the
    # recorded accepted proofs of a few other statements
    cases += [
        ("honest proof (recorded valid)", "benign", proof, None, statement),
        ("honest proof, CRLF line ends", "benign", proof.replace("\n", "\r\n"), None, statement),
        ("honest proof in a lean code block", "benign", redteam.block(statement, proof), None, statement),
    ]
    others: dict[str, Sampled] = {}
    for other in recorded:
        trusted = statements.get(other.name or "")
        if (
            other.recorded == "valid"
            and trusted is not None
            and other.name != FIXTURE_THEOREM
            and other.name not in others
            and other.program.startswith(trusted.prompt)
        ):
            others[other.name] = other  # type: ignore[index]
        if len(others) == 3:
            break
    cases += [
        (
            f"recorded accepted proof of {name}",
            "benign",
            other.program[len(statements[name].prompt) :],
            None,
            statements[name],
        )
        for name, other in others.items()
    ]
    harness = RewardHarness("rl")
    candidates = [harness.build(problem, completion) for _, _, completion, _, problem in cases]
    ready = [c for c in candidates if c.stage is Stage.READY]
    backend = target.candidate_backend(["rl_lean"], "rl")
    verifier = target.config.lean.verifier(backend, target.config.lean.policy("rl"))
    try:
        outcomes = iter(verifier.check_sync([c.request for c in ready]))
    finally:
        asyncio.run(backend.aclose())
    results, wrong = [], []
    for (name, kind, _, expected, _), candidate in zip(cases, candidates):
        if candidate.stage is Stage.NO_CODE:
            layer, verdict, why = "extraction", "rejected", candidate.reason
        elif candidate.stage is Stage.PRECHECK:
            codes = sorted({R.code_of(r) for r in candidate.precheck_reasons})
            layer, verdict, why = "precheck", "rejected", ", ".join(codes)
        else:
            outcome = next(outcomes)
            layer = "lean"
            verdict = {True: "accepted", False: "rejected", None: "no answer"}[outcome.label]
            why = outcome.category.value + (f": {R.code_of(outcome.reasons[0])}" if outcome.reasons else "")
        ok = (verdict == "rejected") if kind == "exploit" else (verdict == "accepted")
        if kind == "exploit" and expected is not None and layer == "precheck" and expected not in why:
            ok = False  # stopped, but not by the layer the tests expect
        status = "ok" if ok else ("not checked" if verdict == "no answer" else "WRONG")
        results.append({"name": name, "kind": kind, "layer": layer, "verdict": verdict, "why": why, "status": status})
        if status == "WRONG" or (target.real and status == "not checked"):
            wrong.append(name)
    exploits = [r for r in results if r["kind"] == "exploit"]
    benign = [r for r in results if r["kind"] == "benign"]
    summary = (
        f"{sum(r['verdict'] == 'rejected' for r in exploits)}/{len(exploits)} exploits rejected, "
        f"{sum(r['verdict'] == 'no answer' for r in exploits)} without an answer "
        f"(precheck {sum(r['layer'] == 'precheck' for r in exploits)}, extraction "
        f"{sum(r['layer'] == 'extraction' for r in exploits)}, lean {sum(r['layer'] == 'lean' for r in exploits)}); "
        f"{sum(r['verdict'] == 'accepted' for r in benign)}/{len(benign)} benign programs accepted "
        f"({sum(r['verdict'] == 'no answer' for r in benign)} without an answer)"
    )
    detail = {"fixtures": results, "summary": summary}
    if wrong:
        raise Failed(summary + f"; wrong: {', '.join(wrong)}", detail)
    return detail


# -- item 8: the token table ---------------------------------------------------------------------


def _changes_lexing(token: str) -> bool:
    """Does ``token`` hold, after its first character, one that would otherwise start or continue
    an identifier, a number or a literal (so a table without it reads the text differently)?"""
    return any(c.isalnum() or c in "_'\"«" for c in token[1:])


def check_tokens(target: Target) -> dict[str, Any]:
    from leanloop.lean.acceptance import BENCHMARK_HEADER
    from leanloop.lean.acceptance.tokens import shipped

    table = shipped()
    live = LocalBackend(target.local_config(workers=1)).token_table(BENCHMARK_HEADER)
    if live is None:
        if target.real:
            raise Failed("the header environment reported no token table", {"shipped": table.manifest()})
        return {
            "shipped": table.manifest(),
            "summary": f"shipped table: {len(table.tokens)} tokens "
            f"(sha256 {table.sha256[:12]}); no live table here (the stand-in has no recording of it)",
        }
    missing = sorted(live.tokens - table.tokens)
    matters = [t for t in missing if _changes_lexing(t)]
    detail = {
        "shipped": table.manifest(),
        "live": live.manifest(),
        "missing": missing,
        "missing_that_matter": matters,
        "extra": sorted(table.tokens - live.tokens),
        "summary": f"live {len(live.tokens)} tokens, shipped {len(table.tokens)}: {len(missing)} missing, "
        f"{len(matters)} of them change lexing" + (f" (e.g. {matters[:5]})" if matters else ""),
    }
    if matters:
        raise Failed(detail["summary"], detail)
    return detail
