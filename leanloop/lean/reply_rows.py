"""One row of a Lean reply (a message, a tactic record, an infotree node) -> a Verifier type."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from leanloop.lean.types import LeanMessage, Position, TacticRecord

# Syntax that wraps tactics rather than being one (the REPL's own ``tactics`` list leaves them out
# too): keeping ``by`` would put the declaration's first state before the declaration line.
STRUCTURAL_TACTIC_KINDS = {
    "null",
    "by",
    "Lean.Parser.Term.byTactic",
    "Lean.Parser.Tactic.tacticSeq",
    "Lean.Parser.Tactic.tacticSeq1Indented",
    "Lean.Parser.Tactic.tacticSeqBracketed",
    "Lean.cdot",
    "Lean.cdotTk",
    "Lean.Parser.Tactic.paren",
}


def json_position(value: Any) -> Position | None:
    """``{"line": 3, "column": 2}`` -> Position; anything else (null, Kimina's bare ints) -> None."""
    if not isinstance(value, Mapping) or "line" not in value:
        return None
    return Position(int(value["line"]), int(value.get("column", 0)))


def goals_text(value: Any) -> str:
    """Goals as one string: the REPL's ``goals`` already is one; ``goalsBefore`` lists are joined
    with a blank line, as the REPL itself separates goals."""
    if isinstance(value, list):
        return "\n\n".join(str(goal) for goal in value)
    return "" if value is None else str(value)


def message_from_json(row: Mapping[str, Any]) -> LeanMessage:
    severity = str(row.get("severity") or "error").lower()
    return LeanMessage(
        severity="info" if severity == "information" else severity,  # Lean's LSP spelling
        data=str(row.get("data", "")),
        pos=json_position(row.get("pos", row.get("start_pos"))),
        end_pos=json_position(row.get("endPos", row.get("end_pos"))),
    )


def messages_from_json(rows: Iterable[Mapping[str, Any]] | None) -> list[LeanMessage]:
    return [message_from_json(row) for row in rows or []]


def tactics_from_json(rows: Iterable[Mapping[str, Any]] | None) -> list[TacticRecord]:
    """REPL ``tactics`` rows; rows without a usable start position are skipped, never guessed."""
    out = []
    for row in rows or []:
        pos = json_position(row.get("pos", row.get("start_pos")))
        if pos is not None:
            out.append(
                TacticRecord(
                    tactic=str(row.get("tactic", "")),
                    goals=goals_text(row.get("goals", row.get("goalsBefore"))),
                    pos=pos,
                    end_pos=json_position(row.get("endPos", row.get("end_pos"))),
                )
            )
    return out


def infotree_tactics(nodes: Iterable[Any] | None) -> list[TacticRecord]:
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
        start = json_position(span.get("start"))
        if (
            item.get("kind") == "TacticInfo"
            and not span.get("synthetic")
            and start is not None
            and kind not in STRUCTURAL_TACTIC_KINDS
        ):
            goals = node.get("goalsBefore", node.get("goals_before"))
            out.append(
                TacticRecord(
                    tactic=str(stx.get("pp", "")),
                    goals=goals_text(goals),
                    pos=start,
                    end_pos=json_position(span.get("finish")),
                )
            )
        stack.extend(reversed(list(item.get("children") or [])))
    return out
