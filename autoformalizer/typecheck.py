"""Does a formal statement type-check against Mathlib? Compile it with ``sorry`` through a Lean backend.

The program Lean sees is the harness's header (imports and opens, never the model's) followed by
the candidate's first declaration with its body replaced by ``by sorry`` (a body that already is
``sorry`` is kept verbatim, so recorded programs replay). It passes when Lean answered, reported no
error, and its only warnings are "declaration uses 'sorry'" (both the v4.9 ``'sorry'`` and the HEAD
```sorry``` wording, recognised by the acceptance policy's own matcher). A backend with no answer
(replay without a recording, a timeout, a crash) gives no verdict.

The acceptance policy (``data.policy``) judges *proofs* and rejects ``sorry`` outright, so statement
checks call the backend directly and only borrow the policy's sorry-warning matcher.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Sequence

from data.policy.policy import is_sorry_warning
from data.verifier.types import LeanBackend, LeanMessage, LeanResponse, ResponseStatus

from autoformalizer.statements import find_declaration, mask

# The header the shipped miniF2F statements were written against (DeepSeek-Prover-V1.5 / Goedel).
DEFAULT_HEADER = ("import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\n"
                  "open BigOperators Real Nat Topology Rat\n\n")
ERROR_CHARS = 800  # the repair prompt's cap on compiler feedback


class CheckStatus(str, Enum):
    PASSED = "passed"
    FAILED = "failed"
    UNAVAILABLE = "unavailable"
    TIMEOUT = "timeout"
    INFRA_ERROR = "infra_error"


@dataclass
class StatementCheck:
    status: CheckStatus
    program: str
    messages: list[LeanMessage] = field(default_factory=list)
    detail: str = ""
    goal: str | None = None  # the elaborated goal before ``sorry``, when the backend reports tactics
    lean_version: str | None = None

    @property
    def passed(self) -> bool | None:
        """True / False when Lean answered; None when there is no verdict."""
        if self.status is CheckStatus.PASSED:
            return True
        if self.status is CheckStatus.FAILED:
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
        code = statement[decl.start:].rstrip()
    elif body is not None:
        code = statement[decl.start:len(statement) - len(body)].rstrip() + " by sorry"
    else:
        code = statement[decl.start:].rstrip() + " := by sorry"
    return header + code


def interpret(program: str, response: LeanResponse) -> StatementCheck:
    base = dict(program=program, messages=list(response.messages), lean_version=response.lean_version)
    if response.status is ResponseStatus.UNAVAILABLE:
        return StatementCheck(CheckStatus.UNAVAILABLE, detail=response.detail or "no Lean answer", **base)
    if response.status is ResponseStatus.TIMEOUT:
        return StatementCheck(CheckStatus.TIMEOUT, detail=response.detail or "Lean timed out", **base)
    if response.status is ResponseStatus.INFRA_ERROR:
        return StatementCheck(CheckStatus.INFRA_ERROR, detail=response.detail or "backend failure", **base)
    goal = next((t.goals for t in response.tactics if t.tactic.strip() == "sorry"), None)
    errors = [m for m in response.messages if m.severity == "error"]
    if errors:
        return StatementCheck(CheckStatus.FAILED, detail=errors[0].data, goal=goal, **base)
    others = [m for m in response.messages if m.severity == "warning" and not is_sorry_warning(m)]
    if others:
        return StatementCheck(CheckStatus.FAILED, detail=f"warning other than sorry: {others[0].data}",
                              goal=goal, **base)
    return StatementCheck(CheckStatus.PASSED, detail="type-checks (only the sorry warning)", goal=goal, **base)


class StatementChecker:
    """Type-checks statements with any ``LeanBackend`` (replay, lean-interact pool, Kimina)."""

    def __init__(self, backend: LeanBackend, header: str = DEFAULT_HEADER, timeout: float | None = 60.0,
                 concurrency: int = 8):
        self.backend = backend
        self.header = header
        self.timeout = timeout
        self.concurrency = concurrency

    async def acheck_many(self, statements: Sequence[str]) -> list[StatementCheck]:
        programs = [statement_program(s, self.header) for s in statements]
        responses = await self.backend.run_many(programs, timeout=self.timeout, concurrency=self.concurrency)
        return [interpret(p, r) for p, r in zip(programs, responses)]

    def check_many(self, statements: Sequence[str]) -> list[StatementCheck]:
        """Synchronous form (not from inside a running event loop: await ``acheck_many`` there)."""
        return asyncio.run(self.acheck_many(statements))

    def check(self, statement: str) -> StatementCheck:
        return self.check_many([statement])[0]
