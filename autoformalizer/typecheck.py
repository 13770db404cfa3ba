"""Does a formal statement type-check against Mathlib? Compile it with ``sorry`` through the Verifier."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Literal, Sequence

from leanloop.lean.acceptance.policy import PROFILES
from leanloop.lean.acceptance.policy import is_sorry_warning
from leanloop.lean.types import Category, LeanBackend, LeanMessage, Outcome, VerifyRequest
from leanloop.lean.check import LeanConfig

from autoformalizer.statements import find_declaration, mask

# The header the shipped miniF2F statements were written against (DeepSeek-Prover-V1.5 / Goedel).
DEFAULT_HEADER = (
    "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\nopen BigOperators Real Nat Topology Rat\n\n"
)
ERROR_CHARS = 800  # the repair prompt's cap on compiler feedback


class CheckStatus(str, Enum):
    PASSED = "passed"
    FAILED = "failed"  # Lean reported an error (or a warning other than sorry: the statement profile)
    REJECTED = "rejected"  # deterministic precheck rejection (e.g. native_decide, a forbidden option)
    UNAVAILABLE = "unavailable"
    TIMEOUT = "timeout"
    INFRA_ERROR = "infra_error"
    INPUT_ERROR = "input_error"


@dataclass
class StatementCheck:
    status: CheckStatus
    program: str
    messages: list[LeanMessage] = field(default_factory=list)
    detail: str = ""
    goal: str | None = None  # the elaborated goal before ``sorry``, when the backend reports tactics

    reasons: list[str] = field(default_factory=list)  # the policy's reasons

    @property
    def passed(self) -> bool | None:
        """True / False when there is a verdict (Lean's, or a precheck's); None otherwise."""
        if self.status is CheckStatus.PASSED:
            return True
        if self.status in (CheckStatus.FAILED, CheckStatus.REJECTED):
            return False
        return None

    @property
    def errors(self) -> list[LeanMessage]:
        return [m for m in self.messages if m.severity == "error"]

    def feedback(self, limit: int = ERROR_CHARS) -> str:
        """Compiler errors as the repair prompt shows them, cut to ``limit`` characters."""
        parts = []
        for m in self.messages:
            if m.severity == "error" or (m.severity == "warning" and not is_sorry_warning(m)):
                where = f"line {m.pos.line}, col {m.pos.column}: " if m.pos else ""
                parts.append(f"{m.severity}: {where}{m.data}")
        text = "\n".join(parts) or self.detail
        return text if len(text) <= limit else text[: limit - 1] + "…"


_SORRY_BODY = re.compile(r"^\s*(?:by\s+)?sorry\s*$")


def statement_program(statement: str, header: str = DEFAULT_HEADER) -> str:
    """header + the first declaration with its proof replaced by ``by sorry``."""
    decl = find_declaration(statement)
    if decl is None:
        raise ValueError("no theorem/lemma declaration in the statement; gate it with well_formed() first")
    body = decl.body
    if body is not None and _SORRY_BODY.match(mask(body)):
        code = statement[decl.start :].rstrip()
    elif body is not None:
        code = statement[decl.start : len(statement) - len(body)].rstrip() + " by sorry"
    else:
        code = statement[decl.start :].rstrip() + " := by sorry"
    return header + code


_STATUS = {
    Category.TIMEOUT: CheckStatus.TIMEOUT,
    Category.INFRA_ERROR: CheckStatus.INFRA_ERROR,
    Category.UNAVAILABLE: CheckStatus.UNAVAILABLE,
    Category.INPUT_ERROR: CheckStatus.INPUT_ERROR,
    Category.PRECHECK_REJECTED: CheckStatus.REJECTED,
    Category.INVALID: CheckStatus.FAILED,
}


def interpret(program: str, outcome: Outcome) -> StatementCheck:
    """The statement check of one Verifier outcome (``statement`` profile)."""
    goal = next((t.goals for t in outcome.tactics if t.tactic.strip() == "sorry"), None)
    base = dict(program=program, messages=list(outcome.messages), goal=goal, reasons=list(outcome.reasons))
    if outcome.category is Category.VALID:
        return StatementCheck(CheckStatus.PASSED, detail="type-checks (no error)", **base)
    detail = outcome.first_error or "; ".join(outcome.reasons) or outcome.category.value
    return StatementCheck(_STATUS[outcome.category], detail=detail, **base)


class StatementChecker:
    """Type-checks statements with the Verifier (any backend: replay, lean-interact, Kimina) under
    the acceptance policy's ``statement`` profile."""

    def __init__(
        self,
        lean: LeanConfig,
        header: str = DEFAULT_HEADER,
        warnings: Literal["allowed", "only_sorry"] = "allowed",
        backend: LeanBackend | None = None,
    ):
        """``lean``: the backend, heartbeats, concurrency and timeout of the checks (its profile is
        not read: statements are always checked under ``statement``). ``warnings``: ``allowed`` (the
        design's rule: type-checks iff Lean reports no error) or ``only_sorry`` (any warning other
        than sorry's fails the statement). ``backend``: one to use instead of ``lean``'s."""
        if warnings not in ("allowed", "only_sorry"):
            raise ValueError(f"warnings must be 'allowed' or 'only_sorry', got {warnings!r}")
        self.header = header
        profile = replace(PROFILES["statement"], only_sorry_warning=warnings == "only_sorry")
        self.verifier = lean.verifier(backend, policy=lean.policy(profile, header=header))

    async def acheck_many(
        self, statements: Sequence[str], headers: Sequence[str | None] | None = None
    ) -> list[StatementCheck]:
        """``headers``: per statement, the header it was written against (ProofNet and miniF2F open
        different namespaces); None (or a None entry) uses the checker's header."""
        headers = list(headers) if headers is not None else [None] * len(statements)
        if len(headers) != len(statements):
            raise ValueError(f"{len(statements)} statements but {len(headers)} headers")
        headers = [self.header if h is None else h for h in headers]
        programs = [statement_program(s, h) for s, h in zip(statements, headers)]
        names = [find_declaration(s).name for s in statements]  # type: ignore[union-attr]
        outcomes = await self.verifier.check(
            [VerifyRequest(program=p, name=n, header=h) for p, n, h in zip(programs, names, headers)]
        )
        return [interpret(p, o) for p, o in zip(programs, outcomes)]

    def check_many(
        self, statements: Sequence[str], headers: Sequence[str | None] | None = None
    ) -> list[StatementCheck]:
        """Synchronous form (not from inside a running event loop: await ``acheck_many`` there)."""
        return asyncio.run(self.acheck_many(statements, headers))

    def check(self, statement: str) -> StatementCheck:
        return self.check_many([statement])[0]
