"""Raw Lean replies (REPL, Kimina Lean Server, RL-Lean ``compilation_result``) to the Verifier types.

The recorded replies drift between Lean/REPL versions and servers (see ``../shared/data/README.md``):

- REPL v4.9 / v4.15 / HEAD: ``messages`` and ``tactics`` (``goals`` a string; ``usedConstants``
  from v4.15; ``proofStatus`` at HEAD only); ``endPos`` may be null; some replies carry only an
  ``infotree`` (``TacticInfo`` nodes with ``goalsBefore`` lists and ``stx.range``); a fork answers
  ``{"results": [{"source", "messages", ...}]}``; a REPL-level failure is ``{"message": ...}``.
- Kimina: ``{"results": [{"custom_id", "error", "response": {"messages", "time", ...}}]}``; a
  timeout is ``error: "Lean process timed out"`` with ``response: null``.
- RL-Lean (kimina-lean-server of the v4.9 era): ``errors`` / ``warnings`` / ``infos`` lists,
  ``system_errors`` / ``system_messages`` for crashes and timeouts, ``verify_time``.

Kimina-style servers compile the import header once and the rest (the *body*) in that
environment, so their positions count lines from the body, not from the program. The body starts
after the import lines (older server, RL-Lean records: 2 lines for ``import Mathlib\\nimport
Aesop``) or after the imports and the blank lines that follow (the server that recorded
``kimina_match_pairs.jsonl``: 3 lines). :func:`detect_line_offset` picks, among those candidates,
the shift under which the reported spans and tactic texts fit the program best, and
:func:`parse_response` returns positions in program coordinates.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from data.verifier.types import LeanMessage, LeanResponse, Position, ResponseStatus, TacticRecord

REPL, KIMINA, RL_LEAN = "repl", "kimina", "rl_lean"
_REPL_KEYS = {"messages", "tactics", "sorries", "env", "proofState", "goals", "infotree", "proofStatus", "message"}


def reply_format(reply: Mapping[str, Any]) -> str:
    """Which producer wrote this reply: ``repl``, ``kimina`` or ``rl_lean``."""
    if not isinstance(reply, Mapping):
        raise ValueError(f"a Lean reply must be a JSON object, got {type(reply).__name__}")
    if "compilation_result" in reply or {"errors", "system_errors"} & reply.keys():
        return RL_LEAN
    results = reply.get("results")
    if isinstance(results, list) and results and isinstance(results[0], Mapping) and "response" in results[0]:
        return KIMINA
    # A bare Kimina response: the REPL itself never reports a ``time``.
    if {"custom_id", "response"} <= reply.keys() or "time" in reply:
        return KIMINA
    if _REPL_KEYS & reply.keys() or isinstance(results, list):
        return REPL
    raise ValueError(
        "unrecognised Lean reply: expected a REPL reply (messages/tactics/env), a Kimina reply "
        "(results[].response) or an RL-Lean compilation_result (errors/warnings/infos); got keys "
        f"{sorted(reply)}"
    )


def _severity(value: Any) -> str:
    text = str(value or "error").lower()
    return "info" if text == "information" else text


def _position(value: Any) -> Position | None:
    if not isinstance(value, Mapping) or "line" not in value:
        return None
    return Position(int(value["line"]), int(value.get("column", 0)))


def _message(row: Mapping[str, Any]) -> LeanMessage:
    return LeanMessage(
        severity=_severity(row.get("severity")),
        data=str(row.get("data", "")),
        pos=_position(row.get("pos", row.get("start_pos"))),  # start_pos: lean-interact's model_dump()
        end_pos=_position(row.get("endPos", row.get("end_pos"))),
    )


def _goals_text(value: Any) -> str:
    if isinstance(value, list):
        return "\n\n".join(str(goal) for goal in value)
    return "" if value is None else str(value)


def _tactic(row: Mapping[str, Any]) -> TacticRecord | None:
    pos = _position(row.get("pos", row.get("start_pos")))
    if pos is None:
        return None
    goals = row.get("goals", row.get("goalsBefore"))
    return TacticRecord(tactic=str(row.get("tactic", "")), goals=_goals_text(goals), pos=pos,
                        end_pos=_position(row.get("endPos", row.get("end_pos"))))


# Syntax that wraps tactics rather than being one (the REPL's own ``tactics`` list leaves them out
# too): keeping ``by`` would put the declaration's first state before the declaration line.
_STRUCTURAL_TACTIC_KINDS = {
    "null", "by", "Lean.Parser.Term.byTactic", "Lean.Parser.Tactic.tacticSeq",
    "Lean.Parser.Tactic.tacticSeq1Indented", "Lean.Parser.Tactic.tacticSeqBracketed",
    "Lean.cdot", "Lean.cdotTk", "Lean.Parser.Tactic.paren",
}


def _infotree_tactics(nodes: Iterable[Any]) -> list[TacticRecord]:
    """``TacticInfo`` nodes of an infotree, in pre-order, as tactic records (goals before)."""
    out: list[TacticRecord] = []
    stack = list(reversed(list(nodes or [])))
    while stack:
        item = stack.pop()
        if not isinstance(item, Mapping):
            continue
        node = item.get("node") or {}
        stx = node.get("stx") or {}
        span = stx.get("range") or {}
        kind = str(stx.get("kind") or node.get("name") or "")
        if (item.get("kind") == "TacticInfo" and not span.get("synthetic") and _position(span.get("start"))
                and kind not in _STRUCTURAL_TACTIC_KINDS):
            goals = node.get("goalsBefore", node.get("goals_before"))  # goals_before: lean-interact's model_dump()
            out.append(TacticRecord(tactic=str(stx.get("pp", "")), goals=_goals_text(goals),
                                    pos=_position(span.get("start")),  # type: ignore[arg-type]
                                    end_pos=_position(span.get("finish"))))
        stack.extend(reversed(list(item.get("children") or [])))
    return out


def _repl_parts(reply: Mapping[str, Any]) -> tuple[list[LeanMessage], list[TacticRecord]]:
    messages = [_message(m) for m in reply.get("messages") or []]
    if reply.get("tactics"):
        tactics = [t for t in (_tactic(row) for row in reply["tactics"]) if t is not None]
    else:
        tactics = _infotree_tactics(reply.get("infotree") or [])
    return messages, tactics


def results_program(reply: Mapping[str, Any]) -> str | None:
    """The text a REPL ``results`` reply's positions refer to: its entries' ``source`` joined by
    newlines (the fork re-prints each command it elaborated), or None for other replies."""
    results = reply.get("results")
    if not isinstance(results, list) or not results:
        return None
    if not all(isinstance(r, Mapping) and isinstance(r.get("source"), str) for r in results):
        return None
    return "\n".join(r["source"] for r in results)


def _no_answer(text: str) -> ResponseStatus:
    return ResponseStatus.TIMEOUT if re.search(r"timed? ?out|timeout", text, re.IGNORECASE) else ResponseStatus.INFRA_ERROR


def header_line_counts(program: str) -> tuple[int, int]:
    """(lines up to the last leading ``import``, leading lines that are imports or blank) at the top
    of the program: where the older and the newer Kimina server start the body."""
    lines = program.split("\n")
    header = imports = 0
    while header < len(lines) and (not lines[header].strip() or lines[header].strip().startswith("import ")):
        header += 1
        if lines[header - 1].strip():
            imports = header
    return (imports, header) if imports else (0, 0)


def _fits(lines: list[str], start: Position | None, end: Position | None, tactic: str | None, shift: int) -> int:
    if start is None:
        return 0
    row = start.line - 1 + shift
    if not 0 <= row < len(lines) or start.column > len(lines[row]):
        return 0
    if tactic:
        first = tactic.strip().split("\n")[0].strip()
        return 2 if first and lines[row][start.column:].startswith(first) else 0
    if end is None:
        return 1 if lines[row][start.column:start.column + 1].strip() else 0
    end_row = end.line - 1 + shift
    if not row <= end_row < len(lines) or end.column > len(lines[end_row]):
        return 0
    if end_row == row:
        span = lines[row][start.column:end.column]
        return 1 if span.strip() and span == span.strip() else 0
    return 1 if lines[row][start.column:start.column + 1].strip() else 0


def detect_line_offset(program: str, messages: Iterable[LeanMessage], tactics: Iterable[TacticRecord],
                       preferred: str = "header") -> int:
    """How many lines to add to a body-relative position to land in ``program``.

    Candidates: 0, the number of import lines, and that plus the following blank lines. Each is
    scored by how many message spans land on code (non-blank, within the line) and how many tactic
    texts start at their reported position; ties go to ``preferred`` (``"imports"``,
    ``"header"`` or ``"none"``)."""
    imports, header = header_line_counts(program)
    order = {"imports": [imports, header, 0], "header": [header, imports, 0], "none": [0, imports, header]}[preferred]
    candidates = list(dict.fromkeys(order))
    lines = program.split("\n")
    messages, tactics = list(messages), list(tactics)

    def score(shift: int) -> int:
        return (sum(_fits(lines, m.pos, m.end_pos, None, shift) for m in messages)
                + sum(_fits(lines, t.pos, t.end_pos, t.tactic, shift) for t in tactics))

    scores = [score(shift) for shift in candidates]
    return candidates[scores.index(max(scores))]


def _shift(position: Position | None, lines: int) -> Position | None:
    return None if position is None else Position(position.line + lines, position.column)


def shift_lines(messages: list[LeanMessage], tactics: list[TacticRecord], lines: int
                ) -> tuple[list[LeanMessage], list[TacticRecord]]:
    if not lines:
        return messages, tactics
    return ([LeanMessage(m.severity, m.data, _shift(m.pos, lines), _shift(m.end_pos, lines)) for m in messages],
            [TacticRecord(t.tactic, t.goals, _shift(t.pos, lines), _shift(t.end_pos, lines))  # type: ignore[arg-type]
             for t in tactics])


def parse_response(reply: Mapping[str, Any], program: str | None = None, *, result_index: int = 0,
                   line_offset: int | None = None) -> LeanResponse:
    """One raw reply to a :class:`LeanResponse` whose positions refer to ``program``.

    ``program`` is needed for Kimina and RL-Lean replies (their positions are body-relative; see
    the module docstring); an RL-Lean row that still has its ``code`` supplies it itself.
    ``line_offset`` overrides the detected shift. A reply in which Lean gave no answer (timeout,
    crash, REPL-level error) comes back with that status and no messages.
    """
    kind = reply_format(reply)
    time_s = 0.0
    lean_version = None
    if kind == RL_LEAN:
        row = reply
        if "compilation_result" in reply:
            program = program if program is not None else reply.get("code")
            lean_version = reply.get("lean_version")
            row = reply["compilation_result"] or {}
        failure = row.get("system_errors") or row.get("system_messages")
        if failure:
            return LeanResponse(_no_answer(str(row.get("system_messages") or failure)),
                                detail=str(row.get("system_messages") or failure)[:2000], lean_version=lean_version)
        messages = [_message(m) for key in ("errors", "warnings", "infos") for m in row.get(key) or []]
        tactics = [t for t in (_tactic(r) for r in row.get("tactics") or []) if t is not None]
        time_s = float(row.get("verify_time") or 0.0)
        preferred = "imports"
    elif kind == KIMINA:
        results = reply.get("results")
        if isinstance(results, list):
            if not results:
                raise ValueError("Kimina reply has an empty 'results' list: nothing to read")
            if result_index >= len(results):
                raise ValueError(f"Kimina reply has {len(results)} results; result_index={result_index} is out of range")
            result = results[result_index]
        else:
            result = reply
        body = result.get("response") if "response" in result or "custom_id" in result else result
        if result.get("error") or body is None:
            detail = str(result.get("error") or "Kimina reply has no response")
            return LeanResponse(_no_answer(detail), detail=detail)
        messages, tactics = _repl_parts(body)
        time_s = float(body.get("time") or 0.0)
        preferred = "header"
    else:
        if "message" in reply and not reply.keys() & {"messages", "tactics", "env", "sorries", "results"}:
            return LeanResponse(ResponseStatus.INFRA_ERROR, detail=str(reply["message"]))
        messages, tactics = _repl_parts(reply)
        # A REPL fork answers one entry per command of the input, with positions in the text of
        # all entries' ``source`` joined by newlines (see :func:`results_program`).
        for result in reply.get("results") or []:
            if isinstance(result, Mapping):
                more_messages, more_tactics = _repl_parts(result)
                messages, tactics = messages + more_messages, tactics + more_tactics
        preferred = "none"
    if line_offset is None:
        # The REPL reports positions in the command it was given: no shift.
        line_offset = 0 if kind == REPL or program is None else detect_line_offset(program, messages, tactics, preferred)
    messages, tactics = shift_lines(messages, tactics, line_offset)
    return LeanResponse(ResponseStatus.OK, messages=messages, tactics=tactics, time_s=time_s, lean_version=lean_version)
