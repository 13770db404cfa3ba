"""The program text the annotator writes around, and where Lean's positions land in it.

Before annotating, the program is normalized (seed App. C): old feedback blocks are removed, and a
declaration whose proof starts inline (``theorem t : P := by simp``) gets its first tactic moved
to its own indented line, so the proof state before that tactic has a line to sit on. Lean's
positions refer to the text Lean compiled, so every edit keeps a map from old to new offsets.
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass

from leanloop.traces.parse import ERROR_RE, feedback_spans, strip_eos, strip_feedback

_DECLARATION = re.compile(
    r"^[ \t]*(?:@\[[^\]\n]*\][ \t]*)*"
    r"(?:(?:private|protected|noncomputable|nonrec|partial|unsafe|scoped|local)[ \t]+)*"
    r"(?:theorem|lemma|example|def|instance|abbrev)\b",
    re.MULTILINE,
)
_OPENERS = "([{⟨⦃"
_BRACKET_OR_DEFINE = re.compile(r"[(\[{⟨⦃)\]}⟩⦄]|:=")
_INDENT = re.compile(r"[ \t]*")
_INLINE_BY = re.compile(r":=[ \t]*by([ \t]+)(?=\S)")


_LEXEME = re.compile(r'--|/-|"')
_BLOCK_COMMENT_DELIMITER = re.compile(r"/-|-/")
_STRING_END = re.compile(r'\\.|"', re.DOTALL)


def non_code_spans(text: str) -> list[tuple[int, int]]:
    """Sorted spans of comments (``--`` to the end of the line, nested ``/- -/``) and string
    literals: the places where ``:=`` or ``by`` are not code."""
    spans: list[tuple[int, int]] = []
    i = 0
    while (match := _LEXEME.search(text, i)) is not None:
        start, token = match.start(), match.group(0)
        if token == "--":
            end = text.find("\n", start)
            end = len(text) if end < 0 else end
        elif token == "/-":
            depth, end = 1, match.end()
            while depth and (delimiter := _BLOCK_COMMENT_DELIMITER.search(text, end)) is not None:
                depth += 1 if delimiter.group(0) == "/-" else -1
                end = delimiter.end()
            end = end if not depth else len(text)
        else:
            end = match.end()
            while (close := _STRING_END.search(text, end)) is not None and close.group(0) != '"':
                end = close.end()
            end = close.end() if close is not None else len(text)
        spans.append((start, end))
        i = end
    return spans


class _CodeMask:
    """``mask[i]`` is True when offset ``i`` is code."""

    def __init__(self, text: str):
        self._spans = non_code_spans(text)
        self._starts = [start for start, _ in self._spans]

    def __getitem__(self, offset: int) -> bool:
        k = bisect.bisect_right(self._starts, offset) - 1
        return k < 0 or offset >= self._spans[k][1]


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    text: str


class _EditMap:
    """Applies non-overlapping edits and maps old offsets to new ones. An offset inside a replaced
    span maps to where the replacement starts; an offset at the end of a span maps past it."""

    def __init__(self, original: str, edits: list[_Edit]):
        edits = sorted(edits, key=lambda e: e.start)
        pieces, cursor = [], 0
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._new_starts: list[int] = []
        self._shift_after: list[int] = []
        shift = 0
        for edit in edits:
            pieces.append(original[cursor : edit.start])
            self._starts.append(edit.start)
            self._ends.append(edit.end)
            self._new_starts.append(edit.start + shift)
            pieces.append(edit.text)
            shift += len(edit.text) - (edit.end - edit.start)
            self._shift_after.append(shift)
            cursor = edit.end
        pieces.append(original[cursor:])
        self.text = "".join(pieces)

    def __call__(self, offset: int) -> int:
        k = bisect.bisect_right(self._starts, offset) - 1
        if k < 0:
            return offset
        if offset < self._ends[k]:
            return self._new_starts[k]
        return offset + self._shift_after[k]


def _block_removals(text: str) -> list[_Edit]:
    return [_Edit(start, end, "") for start, end in feedback_spans(text)]


def _inline_proof_splits(text: str) -> list[_Edit]:
    """For each declaration whose body is ``:= by <tactic>`` on one line, replace the blanks
    between ``by`` and the tactic with a newline and the line's indentation plus two spaces."""
    mask = _CodeMask(text)
    edits: list[_Edit] = []
    for decl in _DECLARATION.finditer(text):
        if not mask[decl.end() - 1]:
            continue
        # The body's ``:=`` is the first one at bracket depth 0 after the keyword.
        next_decl = _DECLARATION.search(text, decl.end())
        limit = next_decl.start() if next_decl else len(text)
        depth, body = 0, None
        for token in _BRACKET_OR_DEFINE.finditer(text, decl.end(), limit):
            if not mask[token.start()]:
                continue
            if token.group(0) == ":=":
                if depth == 0:
                    body = token.start()
                    break
            elif token.group(0) in _OPENERS:
                depth += 1
            else:
                depth = max(0, depth - 1)
        if body is None:
            continue
        after = _INLINE_BY.match(text, body)
        if not after:
            continue
        tactic_start = after.end()
        if not mask[tactic_start]:  # ``:= by -- comment``: the proof already starts below
            continue
        line_start = text.rfind("\n", 0, body) + 1
        indent = _INDENT.match(text, line_start).group(0)
        edits.append(_Edit(after.start(1), tactic_start, "\n" + indent + "  "))
    return edits


@dataclass
class NormalizedProgram:
    """The normalized text plus the map from Lean positions in the original to (line, column) in
    it. Lines are 0-based here; Lean's lines are 1-based, columns 0-based codepoints."""

    original: str
    text: str
    _stages: tuple[_EditMap, ...]

    def __post_init__(self) -> None:
        self._original_line_starts = _line_starts(self.original)
        self._line_starts = _line_starts(self.text)

    @property
    def lines(self) -> list[str]:
        return self.text.split("\n")

    def has_line(self, line: int) -> bool:
        """Whether a 1-based Lean line exists in the original program."""
        return 1 <= line <= len(self._original_line_starts)

    def offset(self, line: int, column: int) -> int:
        """Original text offset of a Lean position, clamped into the text."""
        if line < 1:
            return 0
        if line > len(self._original_line_starts):
            return len(self.original)
        start = self._original_line_starts[line - 1]
        next_start = (
            self._original_line_starts[line] - 1 if line < len(self._original_line_starts) else len(self.original)
        )
        return start + min(max(column, 0), next_start - start)

    def locate(self, line: int, column: int) -> tuple[int, int]:
        """(0-based line, column) in the normalized text of a Lean position in the original."""
        offset = self.offset(line, column)
        for stage in self._stages:
            offset = stage(offset)
        offset = min(offset, len(self.text))
        row = bisect.bisect_right(self._line_starts, offset) - 1
        return row, offset - self._line_starts[row]


def _line_starts(text: str) -> list[int]:
    return [0, *itertools.accumulate(len(line) + 1 for line in text.split("\n")[:-1])]


def normalize_program(program: str) -> NormalizedProgram:
    stripped = _EditMap(program, _block_removals(program))
    split = _EditMap(stripped.text, _inline_proof_splits(stripped.text))
    return NormalizedProgram(program, split.text, (stripped, split))


def _comparable_lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def source_preservation(trace: str, program: str) -> str:
    """How the trace's source (feedback removed) relates to the input program:

    - ``full``: the same program;
    - ``prefix``: a proper prefix of it, ending where the trace predicts an error (the annotator
      stops after the first error-bearing block);
    - ``changed``: anything else.

    Both sides go through the annotator's normalization (old blocks removed, inline ``:= by tac``
    split) and are compared line by line, ignoring trailing whitespace.
    """
    predicted = _comparable_lines(normalize_program(strip_feedback(strip_eos(trace))).text)
    reference = _comparable_lines(normalize_program(program).text)
    if predicted == reference:
        return "full"
    if ERROR_RE.search(trace) and len(predicted) < len(reference) and reference[: len(predicted)] == predicted:
        return "prefix"
    return "changed"
