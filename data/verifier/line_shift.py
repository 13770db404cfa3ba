"""Body-relative Lean positions -> positions in the whole program.

Kimina-style servers elaborate a program's import header once and the rest (the *body*) in that
environment, so their line numbers count from the body. Where the body starts is not the same
for every server, and the reply does not say, so the shift is DETECTED from where the reported
spans fit rather than fixed. Evidence from the shipped recordings (``../shared/data``), all of the
same ``import Mathlib\\nimport Aesop\\n\\nset_option ...`` shape, pinned by
``tests/data/test_data_line_shift.py``:

- ``kimina_match_pairs.jsonl`` (kimina-lean-server ``tests/match``, Jul 2025): every reply with
  messages needs 3 lines (imports *and* the blank line after them), as ``app/split.py`` of that
  server puts leading blank lines into the header;
- the Kimina demo notebook (same repository, ``examples/demo.ipynb``): its ``linarith failed``
  error lands on the program's ``nlinarith`` line with 2 (imports only); with 3 it would point past
  the end of the file;
- RL-Lean ``compilation_result`` records (the 2024 server): 2 for every row with messages.

So one server project answered with both shifts across versions, and a live server's version is
unknown to a client: a fixed 3 would misplace the demo's and RL-Lean's positions, a fixed 2 the
match replies'. The candidates are few (0, the import lines, imports plus the blank lines after
them), a wrong one puts spans on blank lines or mid-token, and a tie (no evidence, e.g. no
messages) only happens when nothing would move differently enough to tell; it goes to the
producer's documented split.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable

from data.verifier.types import LeanMessage, LeanResponse, Position, TacticRecord

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


def _fits(lines: list[str], start: Position | None, end: Position | None, tactic: str | None, shift: int) -> int:
    """How well one span lands on code under ``shift``: a tactic record's text starting at its
    position counts 2; a message span on non-blank text with no blank edges counts 1."""
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
                       preferred: str = HEADER) -> int:
    """Lines to add to a body-relative position to land in ``program``: among 0, the import lines
    and the import-plus-blank lines, the one under which most spans fit (see :func:`_fits`); ties
    go to ``preferred`` (``"imports"``, ``"header"`` or ``"none"``)."""
    imports, header = header_line_counts(program)
    orders = {IMPORTS: [imports, header, 0], HEADER: [header, imports, 0], NONE: [0, imports, header]}
    if preferred not in orders:
        raise ValueError(f"preferred must be one of {sorted(orders)}, got {preferred!r}")
    candidates = list(dict.fromkeys(orders[preferred]))
    lines = program.split("\n")
    messages, tactics = list(messages), list(tactics)

    def score(shift: int) -> int:
        return (sum(_fits(lines, m.pos, m.end_pos, None, shift) for m in messages)
                + sum(_fits(lines, t.pos, t.end_pos, t.tactic, shift) for t in tactics))

    scores = [score(shift) for shift in candidates]
    return candidates[scores.index(max(scores))]


def _moved(position: Position | None, lines: int) -> Position | None:
    return position if position is None or not lines else Position(position.line + lines, position.column)


def shift_messages(messages: Iterable[LeanMessage], lines: int) -> list[LeanMessage]:
    return [LeanMessage(m.severity, m.data, _moved(m.pos, lines), _moved(m.end_pos, lines)) for m in messages]


def shift_tactics(tactics: Iterable[TacticRecord], lines: int) -> list[TacticRecord]:
    return [TacticRecord(t.tactic, t.goals, _moved(t.pos, lines), _moved(t.end_pos, lines))  # type: ignore[arg-type]
            for t in tactics]


def shift_response(response: LeanResponse, lines: int) -> LeanResponse:
    """``response`` with every position moved down ``lines`` lines."""
    if not lines:
        return response
    return replace(response, messages=shift_messages(response.messages, lines),
                   tactics=shift_tactics(response.tactics, lines))


def with_detected_offset(response: LeanResponse, program: str | None, preferred: str,
                         line_offset: int | None = None) -> LeanResponse:
    """A body-relative ``response`` moved into ``program`` coordinates: by ``line_offset`` when
    given, else by the detected shift. Without the program nothing can be detected: unchanged."""
    if line_offset is None:
        line_offset = 0 if program is None else detect_line_offset(program, response.messages, response.tactics,
                                                                   preferred)
    return shift_response(response, line_offset)
