"""Body-relative Lean positions -> positions in the whole program."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Iterable

from leanloop.lean.types import LeanMessage, LeanResponse, Position, TacticRecord

# Tie-breakers: which candidate a producer's own split documents.
IMPORTS, HEADER, NONE = "imports", "header", "none"


def header_line_counts(program: str) -> tuple[int, int]:
    """(lines up to the last leading ``import``, leading lines that are imports or blank): where an
    imports-only split and an imports-and-blank-lines split start the body. (0, 0) with no imports."""
    lines = program.split("\n")
    header = imports = 0
    while header < len(lines) and (not lines[header].strip() or lines[header].strip().startswith("import ")):
        header += 1
        if lines[header - 1].strip():
            imports = header
    return (imports, header) if imports else (0, 0)


# Lean quotes the token a message is about, and the message's span starts there: unused variable
# `h₁`, 'norm_num at hx ⊢' tactic does nothing, `div_le_div_iff` has been deprecated, unknown
# identifier 'x'. (A quote must not follow a letter: "don't" is no quote.)
_QUOTED = re.compile(r"`([^`\n]+)`|(?<!\w)'([^'\n]+)'")


def _named_token(data: str) -> str | None:
    """The first word of the first thing a message's first line quotes, if any."""
    found = _QUOTED.search(data.split("\n", 1)[0])
    words = (found.group(1) or found.group(2)).split() if found else []
    return words[0] if words else None


def _inside_word(line: str, column: int) -> bool:
    """Whether ``column`` splits an identifier or number (Lean spans start and end between tokens)."""

    def word(ch: str) -> bool:
        return ch.isalnum() or ch in "_'"

    return 0 < column < len(line) and word(line[column - 1]) and word(line[column])


def _starts_code(line: str, column: int) -> bool:
    """A span may start here: on a non-blank character, at a token boundary, not in (or at) a ``--``
    comment."""
    return bool(line[column : column + 1].strip()) and not _inside_word(line, column) and "--" not in line[: column + 2]


def _span_fits(lines: list[str], start: Position, end: Position | None, shift: int) -> bool:
    """Whether a message span lands on code under ``shift``: it starts on code and ends inside the
    file at a token boundary."""
    row = start.line - 1 + shift
    if not 0 <= row < len(lines) or start.column > len(lines[row]) or not _starts_code(lines[row], start.column):
        return False
    if end is None:
        return True
    end_row = end.line - 1 + shift
    if not row <= end_row < len(lines) or end.column > len(lines[end_row]):
        return False
    return not (lines[end_row][end.column - 1 : end.column].isspace() or _inside_word(lines[end_row], end.column))


def _text_at(lines: list[str], start: Position, shift: int) -> str:
    row = start.line - 1 + shift
    return lines[row][start.column :] if 0 <= row < len(lines) else ""


def _names_span(data: str, text: str) -> bool:
    """Whether a message names the code its span starts at: the token it quotes, or else the tactic
    its first word is (``linarith failed`` on ``nlinarith``, ``simp made no progress`` on
    ``field_simp``, ``omega could not prove the goal`` on ``omega``)."""
    token = _named_token(data)
    if token:
        return text.startswith(token)
    words, code = data.split(maxsplit=1), text.split(maxsplit=1)
    tactic = words[0] if words else ""
    return bool(code) and len(tactic) >= 4 and tactic.isidentifier() and tactic.islower() and tactic in code[0]


def _message_score(lines: list[str], message: LeanMessage, shift: int) -> int:
    """1 for a span on code, 2 more when the message names what the span starts at."""
    if message.pos is None or not _span_fits(lines, message.pos, message.end_pos, shift):
        return 0
    return 3 if _names_span(message.data, _text_at(lines, message.pos, shift)) else 1


def _tactic_score(lines: list[str], tactic: TacticRecord, shift: int) -> int:
    """2 when the record's text starts at its position."""
    first = tactic.tactic.strip().split("\n")[0].strip()
    return 2 if first and _text_at(lines, tactic.pos, shift).startswith(first) else 0


def detect_line_offset(
    program: str, messages: Iterable[LeanMessage], tactics: Iterable[TacticRecord], preferred: str = HEADER
) -> int:
    """Lines to add to a body-relative position to land in ``program``: among 0, the import lines
    and the import-plus-blank lines, the one under which the spans fit best (message spans on code,
    at what the message names; tactic texts at their positions); ties go to ``preferred``
    (``"imports"``, ``"header"`` or ``"none"``)."""
    imports, header = header_line_counts(program)
    orders = {IMPORTS: [imports, header, 0], HEADER: [header, imports, 0], NONE: [0, imports, header]}
    if preferred not in orders:
        raise ValueError(f"preferred must be one of {sorted(orders)}, got {preferred!r}")
    candidates = list(dict.fromkeys(orders[preferred]))
    lines = program.split("\n")
    messages, tactics = list(messages), list(tactics)

    def score(shift: int) -> int:
        return sum(_message_score(lines, m, shift) for m in messages) + sum(
            _tactic_score(lines, t, shift) for t in tactics if t.pos is not None
        )

    scores = [score(shift) for shift in candidates]
    return candidates[scores.index(max(scores))]


def _moved(position: Position | None, lines: int) -> Position | None:
    return position if position is None or not lines else Position(position.line + lines, position.column)


def shift_messages(messages: Iterable[LeanMessage], lines: int) -> list[LeanMessage]:
    return [LeanMessage(m.severity, m.data, _moved(m.pos, lines), _moved(m.end_pos, lines)) for m in messages]


def shift_tactics(tactics: Iterable[TacticRecord], lines: int) -> list[TacticRecord]:
    return [
        TacticRecord(t.tactic, t.goals, _moved(t.pos, lines), _moved(t.end_pos, lines))  # type: ignore[arg-type]
        for t in tactics
    ]


def shift_response(response: LeanResponse, lines: int) -> LeanResponse:
    """``response`` with every position moved down ``lines`` lines."""
    if not lines:
        return response
    return replace(
        response, messages=shift_messages(response.messages, lines), tactics=shift_tactics(response.tactics, lines)
    )


def with_detected_offset(
    response: LeanResponse, program: str | None, preferred: str, line_offset: int | None = None
) -> LeanResponse:
    """A body-relative ``response`` moved into ``program`` coordinates: by ``line_offset`` when
    given, else by the detected shift. Without the program nothing can be detected: unchanged."""
    if line_offset is None:
        line_offset = (
            0 if program is None else detect_line_offset(program, response.messages, response.tactics, preferred)
        )
    return shift_response(response, line_offset)
