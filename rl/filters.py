"""Statement filters (RL-environment guide), each result recorded per statement."""

from __future__ import annotations

import asyncio
import importlib
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

from leanloop.lean.acceptance import AcceptancePolicy, StatementError, mask, parse_statement
from leanloop.lean.types import Category, LeanBackend, Outcome, VerifyRequest
from leanloop.lean.check import LeanConfig
from rl.reward_harness import trusted_prefix
from leanloop.prover.statements import Statement

CHECKS = ("compile", "hypotheses", "negation", "triviality")


@dataclass
class FilterConfig:
    enabled: bool = True
    checks: list[str] = field(default_factory=lambda: list(CHECKS))
    heartbeats: int = 40_000
    """Small budget for the automation proofs (the reward harness gives candidates 800,000)."""
    timeout: float = 20.0
    """Per-check Lean timeout in seconds."""
    hypotheses_tactic: str = "first | simp_all | linarith | nlinarith | omega | aesop"
    negation_tactic: str = "first | norm_num | simp | decide | (push_neg; norm_num)"
    triviality_tactic: str = "first | rfl | norm_num | simp | decide | omega"
    drop_flags: list[str] = field(default_factory=list)
    """Flags that drop a statement outright."""
    review_flags: list[str] = field(default_factory=lambda: ["nat_subtraction", "nat_division"])
    """High-risk flags that route a statement out of training to expert review (RL environments guide:
    ``uses_nat_subtraction_or_division(formal)`` -> ``"expert_review"``); [] keeps them in training, flagged."""
    trivial: Literal["keep", "retire", "drop"] = "retire"
    judge: str | None = None
    """LLM fidelity judge: ``module:function`` taking a Statement, returning a dict with ``faithful``."""

    def __post_init__(self) -> None:
        unknown = set(self.checks) - set(CHECKS)
        if unknown:
            raise ValueError(f"unknown filter checks {sorted(unknown)}; choose from {CHECKS}")


@dataclass
class Binder:
    names: list[str]
    type: str
    kind: str  # "(", "{", "[", "⦃"


_CLOSING = {"(": ")", "{": "}", "[": "]", "⦃": "⦄"}


def split_binders(binders: str) -> list[Binder]:
    """``(a b : ℝ) (h₀ : 0 < a) [Fintype α]`` -> Binder groups (top-level brackets only)."""
    masked = mask(binders).text
    out, depth, start, opener = [], 0, None, None
    for i, ch in enumerate(masked):
        if depth == 0 and ch in _CLOSING:
            depth, start, opener = 1, i, ch
        elif depth and ch == opener:
            depth += 1
        elif depth and ch == _CLOSING[opener]:
            depth -= 1
            if depth == 0:
                inner = binders[start + 1 : i]
                names, _, type_ = inner.partition(":") if ":" in mask(inner).text else ("", "", inner)
                out.append(Binder(names.split(), " ".join(type_.split()), opener))
    return out


def _norm(text: str) -> str:
    return " ".join(text.replace("(", " ( ").replace(")", " ) ").split())


_NAT = re.compile(r"ℕ|\bNat\b")
_SUB = re.compile(r"(?<![-<>←↔])-(?![->])")  # a minus that is not an arrow or a comment delimiter
_DIV = re.compile(r"/(?!-)|%")


def risk_flags(statement: Statement) -> dict[str, bool]:
    """Text flags: natural-number subtraction / division (a ℕ in the statement and a `-` / `/` / `%`
    in it) and the answer in a hypothesis (a hypothesis states the goal, or its equation reversed).
    Heuristics: they flag for review, they do not prove anything."""
    try:
        sig = parse_statement(statement.statement, statement.theorem)
    except StatementError:
        return {"nat_subtraction": False, "nat_division": False, "answer_in_hypothesis": False}
    text = mask(f"{sig.binders} : {sig.type}").text
    nat = bool(_NAT.search(text))
    goal = _norm(sig.type)
    sides = [s.strip() for s in goal.split(" = ")] if goal.count(" = ") == 1 else None
    hyps = [_norm(b.type) for b in split_binders(sig.binders)]
    answer = goal in hyps or (sides is not None and f"{sides[1]} = {sides[0]}" in hyps)
    return {
        "nat_subtraction": nat and bool(_SUB.search(text)),
        "nat_division": nat and bool(_DIV.search(text)),
        "answer_in_hypothesis": answer,
    }


@dataclass
class FilterProgram:
    check: str
    request: VerifyRequest | None
    profile: str
    note: str | None = None  # why the check does not apply


def filter_programs(statement: Statement, config: FilterConfig) -> list[FilterProgram]:
    """The Lean programs of each configured check for one statement."""
    out = []
    head = statement.header + statement.context
    try:
        sig = parse_statement(statement.statement, statement.theorem)
    except StatementError as error:
        return [FilterProgram(c, None, "", f"statement does not parse: {error}") for c in config.checks]
    base = statement.theorem.split(".")[-1]
    for check in config.checks:
        if check == "compile":
            program = head + statement.statement.rstrip() + "\n  sorry\n"
            out.append(
                FilterProgram(
                    check, VerifyRequest(program, name=statement.theorem, header=statement.header), "statement"
                )
            )
            continue
        if check == "hypotheses":
            if not sig.binders:
                out.append(FilterProgram(check, None, "rl", "no hypotheses"))
                continue
            name, decl, tactic = f"{base}_hypotheses_false", f"{sig.binders} : False", config.hypotheses_tactic
        elif check == "negation":
            claim = f"∀ {sig.binders}, {sig.type}" if sig.binders else sig.type
            name, decl, tactic = f"{base}_negation", f": ¬ ({claim})", config.negation_tactic
        else:
            name, decl, tactic = f"{base}_trivial", f"{sig.binders} : {sig.type}", config.triviality_tactic
        trusted = f"theorem {name} {decl} := by"
        program = head + trusted + f"\n  {tactic}\n"
        # the harness elaborates the trusted claim after the statement's own context (its opens,
        # variables and definitions), as for the reward (rl.reward_harness.trusted_prefix)
        out.append(
            FilterProgram(
                check, VerifyRequest(program, name=name, statement=trusted, header=trusted_prefix(statement)), "rl"
            )
        )
    return out


def _record(outcome: Outcome | None, note: str | None = None) -> dict[str, Any]:
    if outcome is None:
        return {"category": "not_applicable", "note": note}
    return {
        "category": outcome.category.value,
        "label": outcome.label,
        "first_error": outcome.first_error,
        "reasons": list(outcome.reasons),
        "backend": outcome.backend,
    }


def load_judge(path: str | None) -> Callable[[Statement], dict] | None:
    if not path:
        return None
    module, _, name = path.partition(":")
    if not name:
        raise ValueError(f"filters.judge must be 'module:function', got {path!r}")
    return getattr(importlib.import_module(module), name)


def decide(record: dict, config: FilterConfig) -> tuple[str, list[str]]:
    checks, reasons = record["checks"], []
    if checks.get("compile", {}).get("category") == Category.INVALID.value:
        reasons.append("compile_error")
    if checks.get("hypotheses", {}).get("category") == Category.VALID.value:
        reasons.append("hypotheses_inconsistent")
    if checks.get("negation", {}).get("category") == Category.VALID.value:
        reasons.append("negation_proved")
    reasons += [f"flag:{f}" for f, raised in record["flags"].items() if raised and f in config.drop_flags]
    judge = record.get("judge") or {}
    if judge.get("faithful") is False:
        reasons.append("judge_unfaithful")
    trivial = checks.get("triviality", {}).get("category") == Category.VALID.value
    if reasons or (trivial and config.trivial == "drop"):
        return "drop", reasons + (["trivial"] if trivial else [])
    review = [f"flag:{f}" for f, raised in record["flags"].items() if raised and f in config.review_flags]
    if review:
        return "review", review
    if trivial and config.trivial == "retire":
        return "retire", ["trivial"]
    return "keep", []


class StatementFilters:
    def __init__(self, lean: LeanConfig, config: FilterConfig | None = None, backend: LeanBackend | None = None):
        """``lean``: the backend and the concurrency of the checks (``backend``: one to use instead of
        ``lean``'s); their heartbeats and timeout are the filters' own (``config``)."""
        self.config = config or FilterConfig()
        c = self.config
        backend = backend if backend is not None else lean.backend_instance()  # one pool for both
        self.verifiers = {
            "statement": lean.verifier(backend, AcceptancePolicy("statement"), c.timeout),
            "rl": lean.verifier(backend, AcceptancePolicy("rl", heartbeats=c.heartbeats), c.timeout),
        }
        self.judge = load_judge(c.judge)

    async def arun(self, statements: Sequence[Statement]) -> list[dict]:
        plans = [(s, filter_programs(s, self.config)) for s in statements]
        jobs = [(si, p) for si, (_, programs) in enumerate(plans) for p in programs if p.request is not None]
        outcomes = await asyncio.gather(*(self.verifiers[p.profile].check_one(p.request) for _, p in jobs))
        by_job = {(si, p.check): o for (si, p), o in zip(jobs, outcomes)}
        records = []
        for si, (statement, programs) in enumerate(plans):
            record = {
                "name": statement.name,
                "theorem": statement.theorem,
                "checks": {p.check: _record(by_job.get((si, p.check)), p.note) for p in programs},
                "flags": risk_flags(statement),
            }
            if self.judge is not None:
                verdict = self.judge(statement)
                if not isinstance(verdict, dict) or "faithful" not in verdict:
                    raise ValueError(f"filters.judge {self.config.judge} must return a dict with 'faithful'")
                record["judge"] = verdict
            else:
                record["judge"] = {"faithful": None, "status": "not_configured"}
            record["decision"], record["decision_reasons"] = decide(record, self.config)
            records.append(record)
        return records

    def run(self, statements: Sequence[Statement]) -> list[dict]:
        return asyncio.run(self.arun(statements))


def summarize(records: list[dict]) -> dict[str, Any]:
    """Counts for the manifest: per check and category, flags raised, decisions."""
    out: dict[str, Any] = {"statements": len(records), "decision": {}, "flags": {}, "checks": {}}
    for r in records:
        out["decision"][r["decision"]] = out["decision"].get(r["decision"], 0) + 1
        for flag, raised in r["flags"].items():
            out["flags"][flag] = out["flags"].get(flag, 0) + int(bool(raised))
        for check, result in r["checks"].items():
            per = out["checks"].setdefault(check, {})
            per[result["category"]] = per.get(result["category"], 0) + 1
    return out
