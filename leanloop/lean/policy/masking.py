"""Blank out Lean comments and string/char literals so that text rules only see code.

The masked text has exactly the length and the line structure of the input (every masked
character becomes a space, newlines stay), so a match offset or line number in the masked text is
the same offset or line in the program. One left-to-right pass: a single regex jumps to the next
place where a comment or literal could start; only nested block comments need a small loop over
their delimiters. Pure-Python per-character scanning was ~20x slower and would dominate the
precheck budget (see ``make bench-data``).

Lean 4 lexical facts this relies on:
- block comments ``/- ... -/`` nest (doc comments ``/-- -/`` and ``/-! -/`` are block comments too);
- ``--`` starts a line comment, except inside a comment or literal;
- strings ``"..."`` have backslash escapes and may span lines; raw strings ``r"..."`` /
  ``r#"..."#`` have none;
- char literals ``'a'`` / ``'\\n'`` exist, but ``'`` is also an identifier character (``h'``,
  ``f''``), so a quote directly after an identifier character is never a literal;
- ``«...»`` quotes an identifier that may contain ``--`` or ``"``: skipped, not masked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Where something that is not plain code may start. `'` is checked further below.
_START = re.compile(r'/-|--|r#*"|"|\'|«')
_BLOCK_DELIMS = re.compile(r"/-|-/")
_STRING_BODY = re.compile(r'(?:[^"\\]|\\.)*"', re.S)
_CHAR_LIT = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|.)|[^\\'\n])'")
_NOT_NEWLINE = re.compile(r"[^\n]")
_IDENT_CHAR = re.compile(r"[\w'!?.₀-₉]")


@dataclass(frozen=True)
class Masked:
    text: str  # same length and newlines as the program; comments and literals are spaces
    unterminated: str | None  # "block comment" / "string literal" when one runs to the end


def _blank(segment: str) -> str:
    if "\n" not in segment:
        return " " * len(segment)
    return _NOT_NEWLINE.sub(" ", segment)


def mask(program: str) -> Masked:
    """Mask comments, string and char literals of a Lean program (see the module docstring)."""
    pieces: list[str] = []
    keep_from = 0  # start of the code run not yet copied
    pos = 0
    n = len(program)
    unterminated: str | None = None
    while pos < n:
        m = _START.search(program, pos)
        if m is None:
            break
        start = m.start()
        token = m.group()
        if token == "/-":
            depth, scan = 1, m.end()
            while depth:
                d = _BLOCK_DELIMS.search(program, scan)
                if d is None:
                    scan, unterminated = n, "block comment"
                    break
                depth += 1 if d.group() == "/-" else -1
                scan = d.end()
            end = scan
        elif token == "--":
            newline = program.find("\n", start)
            end = n if newline < 0 else newline
        elif token == '"':
            s = _STRING_BODY.match(program, m.end())
            if s is None:
                end, unterminated = n, "string literal"
            else:
                end = s.end()
        elif token[0] == "r":  # raw string r"..." / r#"..."#; `r` must not end an identifier
            if start > 0 and _IDENT_CHAR.match(program, start - 1):
                pos = start + 1
                continue
            closing = '"' + "#" * (len(token) - 2)
            close = program.find(closing, m.end())
            if close < 0:
                end, unterminated = n, "string literal"
            else:
                end = close + len(closing)
        elif token == "'":
            if start > 0 and _IDENT_CHAR.match(program, start - 1):
                pos = start + 1  # a prime in an identifier such as h' or f''
                continue
            c = _CHAR_LIT.match(program, start)
            if c is None:
                pos = start + 1
                continue
            end = c.end()
        else:  # «quoted identifier»: skip it whole so `--` or `"` inside is not misread
            close = program.find("»", m.end())
            pos = n if close < 0 else close + 1
            continue
        pieces.append(program[keep_from:start])
        pieces.append(_blank(program[start:end]))
        keep_from = pos = end
    pieces.append(program[keep_from:])
    return Masked("".join(pieces), unterminated)
