"""System A and the repair loop: compiler feedback (and "Did you mean") back into the prompt."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from autoformalizer.mathlib_index import MathlibIndex
from autoformalizer.prompts import SYSTEM_PROMPT, chat, extract_statement, formalize_prompt
from autoformalizer.statements import well_formed
from autoformalizer.typecheck import ERROR_CHARS, CheckStatus, StatementCheck

MAX_TURNS = 5

_UNKNOWN = re.compile(
    r"\b[Uu]nknown (?P<what>identifier|constant|declaration|namespace) "
    r"(?:'(?P<q>[^\n]+?)'(?=\s|$|[,.;:)])|`(?P<b>[^`\n]+)`)"
)
# hypothesis-like names (h, h₁, hx', IH, a, n) are local variables the model mistyped, not library
# names: looking them up in Mathlib only finds unrelated structure fields
_LOCAL_LIKE = re.compile(r"[A-Za-z][₀-₉0-9']*|h[A-Za-z]?[₀-₉0-9']*|IH|ih|this")


def unknown_identifiers(messages_or_text) -> list[str]:
    """Names Lean reported as unknown identifiers/constants, in order, without repeats."""
    if isinstance(messages_or_text, str):
        texts = [messages_or_text]
    else:
        texts = [m.data for m in messages_or_text if getattr(m, "severity", "error") == "error"]
    names: list[str] = []
    for text in texts:
        for match in _UNKNOWN.finditer(text):
            name = match.group("q") or match.group("b")
            if name and name not in names:
                names.append(name)
    return names


@dataclass
class Suggestion:
    unknown: str
    candidates: list[str]
    local_like: bool = False


def did_you_mean(unknown: list[str], index: MathlibIndex | None, k: int = 5) -> list[Suggestion]:
    suggestions = []
    for name in unknown:
        if _LOCAL_LIKE.fullmatch(name):
            suggestions.append(Suggestion(name, [], local_like=True))
            continue
        found = [cand for cand, _ in index.fuzzy(name, k=k)] if index is not None else []
        suggestions.append(Suggestion(name, found))
    return suggestions


def format_suggestions(suggestions: list[Suggestion]) -> str:
    lines = []
    for s in suggestions:
        if s.local_like:
            lines.append(f"`{s.unknown}` is not in scope; it looks like a hypothesis name: bind it in the statement.")
        elif s.candidates:
            lines.append(f"Unknown `{s.unknown}`. Did you mean: " + ", ".join(f"`{c}`" for c in s.candidates) + "?")
        else:
            lines.append(f"Unknown `{s.unknown}`: no close Mathlib name found.")
    return "\n".join(lines)


def repair_prompt(
    informal: str,
    attempt: str,
    feedback: str,
    suggestions: str = "",
    premises: str = "",
    error_chars: int = ERROR_CHARS,
) -> str:
    feedback = feedback if len(feedback) <= error_chars else feedback[: error_chars - 1] + "…"
    parts = [premises.strip()] if premises else []
    parts += [
        f"Informal statement:\n{informal.strip()}",
        f"Your previous attempt:\n```lean\n{attempt.strip()}\n```",
        f"Lean reported:\n{feedback}",
    ]
    if suggestions:
        parts.append(suggestions)
    parts.append("Write a corrected Lean 4 statement ending in `:= by sorry`.")
    return chat(SYSTEM_PROMPT, "\n\n".join(parts))


@dataclass
class Turn:
    prompt: str
    completion: str
    statement: str
    check: StatementCheck | None  # None when the statement was not well-formed (Lean not asked)
    feedback: str


@dataclass
class RepairResult:
    turns: list[Turn] = field(default_factory=list)
    solved: bool | None = False  # None: stopped without a Lean verdict
    stop_reason: str = ""

    @property
    def iterations(self) -> int:
        return len(self.turns)

    @property
    def final(self) -> str | None:
        return self.turns[-1].statement if self.turns else None

    def statuses(self) -> list[str]:
        """Per turn: "passed" / "failed" / "malformed" / "unavailable" / "timeout" / "infra_error"."""
        return ["malformed" if t.check is None else t.check.status.value for t in self.turns]


def repair_loop(
    informal: str,
    generate: Callable[[str], str],
    check: Callable[[str], StatementCheck],
    *,
    index: MathlibIndex | None = None,
    premises: str = "",
    max_turns: int = MAX_TURNS,
    error_chars: int = ERROR_CHARS,
) -> RepairResult:
    if max_turns < 1:
        raise ValueError("max_turns must be at least 1")
    result = RepairResult()
    prompt = formalize_prompt(informal, premises)
    for _ in range(max_turns):
        completion = generate(prompt)
        statement = extract_statement(completion)
        form = well_formed(statement)
        if not form.ok:
            feedback = "The output is not a well-formed Lean theorem: " + "; ".join(form.reasons)
            result.turns.append(Turn(prompt, completion, statement, None, feedback))
            prompt = repair_prompt(informal, statement, feedback, premises=premises, error_chars=error_chars)
            continue
        outcome = check(statement)
        feedback = outcome.feedback(error_chars)
        result.turns.append(Turn(prompt, completion, statement, outcome, feedback))
        if outcome.status is CheckStatus.PASSED:
            result.solved, result.stop_reason = True, "type-checks"
            return result
        if outcome.status is not CheckStatus.FAILED:
            result.solved, result.stop_reason = None, f"no Lean verdict ({outcome.status.value}: {outcome.detail})"
            return result
        hints = format_suggestions(did_you_mean(unknown_identifiers(outcome.messages), index))
        prompt = repair_prompt(informal, statement, feedback, hints, premises, error_chars)
    result.stop_reason = f"no statement type-checked in {max_turns} turns"
    return result
