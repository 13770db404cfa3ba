"""Types shared by every Lean backend, the acceptance policy and their users.

Two layers:
- a ``LeanBackend`` compiles one program and returns Lean's raw answer (``LeanResponse``):
  messages, tactic records, and whether Lean answered at all (timeout, crash, no recording);
- the acceptance policy (``leanloop.lean.acceptance``) turns a request plus that answer into an ``Outcome``
  with one of the seven categories. Labels exist only for ``valid`` / ``invalid`` /
  ``precheck_rejected``; the other categories stay in every output with no label.
"""

from __future__ import annotations

import abc
import asyncio
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Sequence


class Category(str, Enum):
    VALID = "valid"
    INVALID = "invalid"
    PRECHECK_REJECTED = "precheck_rejected"
    TIMEOUT = "timeout"
    INFRA_ERROR = "infra_error"
    UNAVAILABLE = "unavailable"
    INPUT_ERROR = "input_error"

    @property
    def label(self) -> bool | None:
        """True/False for a verdict Lean (or a deterministic precheck) gave; None otherwise."""
        if self is Category.VALID:
            return True
        if self in (Category.INVALID, Category.PRECHECK_REJECTED):
            return False
        return None


class ResponseStatus(str, Enum):
    """Whether the backend got an answer from Lean for this program."""

    OK = "ok"  # Lean elaborated the program; messages say how it went
    TIMEOUT = "timeout"
    INFRA_ERROR = "infra_error"  # crash, out of memory, server unreachable, malformed reply
    UNAVAILABLE = "unavailable"  # replay backend: no recorded answer for this program
    # The Lean process died, hung up or answered something that is not the reply to this request
    # AFTER the program was sent: the program's own doing as far as anyone can tell (code that runs
    # at elaboration time can exit the process or write to its stdout). The acceptance policy's
    # hardened profiles score it INVALID; failures before the program was sent stay INFRA_ERROR.
    CANDIDATE_FAILURE = "candidate_failure"


@dataclass(frozen=True)
class Position:
    line: int  # 1-based, as Lean reports it
    column: int  # 0-based, as Lean reports it


@dataclass(frozen=True)
class LeanMessage:
    severity: str  # "error" | "warning" | "info"
    data: str
    pos: Position | None = None
    end_pos: Position | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> "LeanMessage":
        """Accept both this type's dict and Lean REPL / Kimina JSON (``endPos``, ``pos: {line,column}``)."""

        def position(value: Any) -> Position | None:
            if not value:
                return None
            return Position(int(value["line"]), int(value["column"]))

        return cls(
            severity=str(row.get("severity", "error")),
            data=str(row.get("data", "")),
            pos=position(row.get("pos")),
            end_pos=position(row.get("end_pos", row.get("endPos"))),
        )


@dataclass(frozen=True)
class TacticRecord:
    """One REPL ``tactics`` entry (``allTactics: true``): the goals before the tactic ran."""

    tactic: str
    goals: str
    pos: Position
    end_pos: Position | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> "TacticRecord":
        message = LeanMessage.from_dict({"pos": row["pos"], "endPos": row.get("end_pos", row.get("endPos"))})
        return cls(tactic=str(row["tactic"]), goals=str(row.get("goals", "")), pos=message.pos, end_pos=message.end_pos)  # type: ignore[arg-type]


@dataclass
class LeanResponse:
    """A backend's answer for one program."""

    status: ResponseStatus
    messages: list[LeanMessage] = field(default_factory=list)
    tactics: list[TacticRecord] = field(default_factory=list)
    time_s: float = 0.0
    detail: str = ""  # why there is no answer (timeout, crash, no recording)
    lean_version: str | None = None

    @property
    def errors(self) -> list[LeanMessage]:
        return [m for m in self.messages if m.severity == "error"]


@dataclass(frozen=True)
class VerifyRequest:
    """One program to check. ``statement`` and ``header`` are trusted (from the dataset), never
    taken from a completion; ``name`` is the theorem the program must prove."""

    program: str
    name: str | None = None
    statement: str | None = None
    header: str | None = None
    id: str | None = None


def _position(pos: Position | None) -> dict[str, int] | None:
    return None if pos is None else {"line": pos.line, "column": pos.column}


@dataclass
class Outcome:
    category: Category
    messages: list[LeanMessage] = field(default_factory=list)
    tactics: list[TacticRecord] = field(default_factory=list)
    first_error: str | None = None
    reasons: list[str] = field(default_factory=list)  # precheck / policy reasons, input errors
    time_s: float = 0.0
    backend: str = ""

    @property
    def label(self) -> bool | None:
        return self.category.label

    def to_dict(self) -> dict[str, Any]:
        return {
            "category": self.category.value,
            "label": self.label,
            "first_error": self.first_error,
            "reasons": list(self.reasons),
            # by hand, not dataclasses.asdict (~10x slower on message lists; a corpus build
            # serializes every outcome twice); the same keys and shapes as the types' own to_dict
            "messages": [
                {"severity": m.severity, "data": m.data, "pos": _position(m.pos), "end_pos": _position(m.end_pos)}
                for m in self.messages
            ],
            "tactics": [
                {"tactic": t.tactic, "goals": t.goals, "pos": _position(t.pos), "end_pos": _position(t.end_pos)}
                for t in self.tactics
            ],
            "time_s": self.time_s,
            "backend": self.backend,
        }


class LeanBackend(abc.ABC):
    """Compiles programs. Async so the RL stage can race it against model inference; every call is
    cancellable (``asyncio.Task.cancel``) and bounded by a per-item timeout."""

    name: str = "backend"

    @abc.abstractmethod
    async def run(self, program: str, timeout: float | None = None) -> LeanResponse:
        """Compile one full program (header included). Never raises for Lean-side failures:
        they come back as a status."""

    async def run_many(
        self, programs: Sequence[str], timeout: float | None = None, concurrency: int = 8
    ) -> list[LeanResponse]:
        """Batch in, one response per program out, at most ``concurrency`` in flight."""
        gate = asyncio.Semaphore(concurrency)

        async def one(program: str) -> LeanResponse:
            async with gate:
                return await self.run(program, timeout)

        return list(await asyncio.gather(*(one(p) for p in programs)))

    async def aclose(self) -> None:
        """Release workers / sessions."""

    async def __aenter__(self) -> "LeanBackend":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
