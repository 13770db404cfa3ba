"""Blank out Lean comments and string/char literals so that text rules only see code.

The masked text has exactly the length and the line structure of the input (every masked
character becomes a space, newlines stay), so a match offset or line number in the masked text is
the same offset or line in the program. One left-to-right pass: a single regex jumps to the next
place where a comment or literal could start; only nested block comments need a small loop over
their delimiters. Pure-Python per-character scanning was ~20x slower and would dominate the
precheck budget (see ``make bench-data``).

Lean 4 lexical facts this relies on (``Lean.Parser.Basic``: whitespace, tokenFn, identFn,
strLitFn, charLitFnAux; identifier classes from ``Init/Meta.lean``, per version, in ``lexing``):
- block comments ``/- ... -/`` nest; doc comments ``/-- -/`` and ``/-! -/`` are block comments
  whose body starts after the third character, so ``/--/`` does NOT close itself;
- ``--`` starts a line comment, except inside a comment or literal;
- strings ``"..."`` have backslash escapes and may span lines; interpolated strings (``s!"..."``,
  ``m!``, ``f!``, ``dbg_trace``, ``throwError``, ``trace[...]``) contain code in ``{...}``: with
  ``keep_interpolations`` that code stays visible to the text rules;
- at a token start Lean reads ``'`` not followed by ``'`` as a char literal (one character, a line
  break included, or one escape, then ``'``); ``'`` is also an identifier character (``h'``,
  ``f''``): a quote continues an identifier only when one *started* before it, i.e. the run of
  Lean's ``isIdRest`` characters before it begins with an ``isIdFirst`` one. Lean's classes are
  not Python's ``\w``: Cyrillic or modifier letters (Mathlib's postfix ``ᶜ``) are symbols to Lean.
  ``!`` and ``?`` continue identifiers (``get!``) but never start one; a digit starts a number.
  A name goes on over a ``.`` into ``r`` (``x.r``), never into ``'``, and ends after a «quoted»
  part.

Failing closed (``Masked.ambiguous``, refused by the rl profile as ``ambiguous_lexing``): wherever
the reading depends on something the masker does not know — Lean's token table (a literal glued
to a ``#word``, to a backslash, or to a non-ASCII symbol that may begin a longer notation token,
outside the known quote-ending tokens ``lexing.QUOTE_TOKENS``), the version (a letter whose class
changed between Lean versions when the version is not pinned, numerals such as ``0x1f'``, raw
strings ``r"..."`` that older Lean reads as ``r`` then a string, string escapes that not every
version accepts), or a «quoted» name holding a quote or comment opener — the masked text takes
one reading and ``ambiguous`` says where.
CRLF line endings are text like any other here (the policy normalizes them before it masks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from leanloop.lean.acceptance.lexing import CLASSIC, QUOTE_TOKENS, TRANSITION, IdentTable, table_for

# Where something that is not plain code may start. `'` is checked further below.
_START = re.compile(r'/-|--|r#*"|"|\'|«')
_BLOCK_DELIMS = re.compile(r"/-|-/")
_STRING_BODY = re.compile(r'(?:[^"\\]|\\.)*"', re.S)
# Lean's charLitFnAux: a quote, one character (any, a newline included) or one escape, a quote
_CHAR_LIT = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|.)|[^\\'])'", re.S)
# escapes every supported Lean reads the same way (quotedCharCoreFn); any other backslash in a
# string is a parse error in some version, after which Lean resumes lexing INSIDE what the masker
# blanked as the string
_BAD_ESCAPE = re.compile(r"\\(?![\\\"'nt]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4})")
_NOT_NEWLINE = re.compile(r"[^\n]")
_INTERPOLATED_BEFORE = re.compile(r"(?:!|\]|" f"(?<![{CLASSIC.rest}.])" r"(?:dbg_trace|throwError|throwErrorAt|"
                                  r"throwNamedError))[ \t]*\Z")
_DIGITS = re.compile(r"[0-9]+\Z")

IDENT, LITERAL, AMBIGUOUS = "ident", "literal", "ambiguous"


@dataclass(frozen=True)
class Masked:
    text: str  # same length and newlines as the program; comments and literals are spaces
    unterminated: str | None  # "block comment" / "string literal" when one runs to the end
    # where the masker cannot be sure what Lean reads (a literal glued to a `#word` token, a quote
    # after a symbol Lean's token table may extend, a raw string, ...): the first such place
    ambiguous: str | None = None


def _run_start(program: str, pos: int, table: IdentTable) -> int:
    start = pos
    rest = table.rest_class()
    while start > 0 and rest.match(program, start - 1):
        start -= 1
    return start


def _unsure_token_before(program: str, start: int, table: IdentTable) -> bool:
    """Is the character before ``start`` one whose token Lean's table may extend over ``start``
    (``#check``, a backslash, a non-ASCII symbol, a letter whose class the version does not pin)?"""
    if start == 0:
        return False
    before = program[start - 1]
    return (before == "#" or before == "\\" or table.is_disputed(before)
            or (ord(before) > 127 and before != "»"))


def _name_ends_at(program: str, end: int, table: IdentTable) -> str:
    """Does an identifier end just before ``end`` (a «quoted» part, or a run of ``isIdRest``
    characters that Lean's identFn reads as one identifier from its first character)?
    ``IDENT`` / ``LITERAL`` (no) / ``AMBIGUOUS`` (the run follows a token the masker cannot bound)."""
    if end == 0:
        return LITERAL
    if program[end - 1] == "»":
        return IDENT
    start = _run_start(program, end, table)
    if start < end and _unsure_token_before(program, start, table):
        return AMBIGUOUS
    return IDENT if start < end and table.is_id_first(program[start]) else LITERAL


def reading_at(program: str, pos: int, table: IdentTable = TRANSITION) -> str:
    """How Lean reads the ``'`` or the ``r`` of ``r"`` at ``pos``: ``IDENT`` (it continues the
    identifier or symbol token before it), ``LITERAL`` (it opens a char literal / raw string) or
    ``AMBIGUOUS`` (it depends on a token table or a version the masker does not know).

    Lean's tokenFn at a token start: ``"`` a string, ``r"`` / ``r#"`` a raw string, a digit a
    number, ``'`` not followed by ``'`` a char literal, an ``isIdFirst`` character or ``«`` an
    identifier (identFn goes on over ``isIdRest`` and over ``.`` followed by ``isIdFirst`` / ``«``),
    anything else the longest token of the token table."""
    quote = program[pos] == "'"
    if quote:
        for token in QUOTE_TOKENS:
            if program.startswith(token, pos + 1 - len(token)):
                return IDENT  # the quote is the end of a known notation token (`f ⁻¹' s`, `∑' n`)
    start = _run_start(program, pos, table)
    if _unsure_token_before(program, start, table):
        # `#check'"'`: `#check` is one token and where it ends is up to the token table; a
        # non-ASCII symbol (`ᶜ`, `→`) may be the start of a longer notation token
        return AMBIGUOUS
    if start == pos:
        if not quote and start > 0 and program[start - 1] == ".":
            # `x.r"`: the name `x.r` then a string; after a lone `.` the `r` starts a token
            return _name_ends_at(program, pos - 1, table)
        return LITERAL  # `'` cannot start or continue a name after `.` / `»` / a symbol
    first = program[start]
    if table.is_id_first(first):
        return IDENT
    if first.isdigit() and first.isascii():
        # a number (`2`) ends where its digits do; `0x1f'` / `2e'` / `1_000'` depend on the
        # version's numeral syntax
        return LITERAL if _DIGITS.match(program, start, pos) else AMBIGUOUS
    if first in "!?" and start + 1 < pos and table.is_id_first(program[start + 1]):
        return IDENT  # `!b'`, `?x'`: the token `!` / `?`, then an identifier
    return AMBIGUOUS


def continues_identifier(program: str, pos: int, table: IdentTable = TRANSITION) -> bool | None:
    """Is the ``'`` or ``r`` at ``pos`` part of the token before it? None: the masker cannot know
    (see ``reading_at``)."""
    reading = reading_at(program, pos, table)
    return None if reading == AMBIGUOUS else reading == IDENT


def _string_end(program: str, i: int, keep: bool, spans: list[tuple[int, int]],
                table: IdentTable = TRANSITION) -> int | None:
    """Offset just after the string literal whose body starts at ``i`` (None: unterminated).
    ``keep``: the string is interpolated; the offsets of its ``{...}`` code go to ``spans``."""
    n = len(program)
    while i < n:
        c = program[i]
        if c == "\\":
            i += 2
        elif c == '"':
            return i + 1
        elif c == "{" and keep:
            depth, k = 1, i + 1
            while k < n and depth:
                ch = program[k]
                if ch == '"':
                    end = _string_end(program, k + 1, bool(_INTERPOLATED_BEFORE.search(program, 0, k)), [], table)
                    if end is None:
                        return None
                    k = end
                    continue
                if ch == "'" and not continues_identifier(program, k, table):
                    lit = _CHAR_LIT.match(program, k)
                    if lit:
                        k = lit.end()
                        continue
                depth += 1 if ch == "{" else -1 if ch == "}" else 0
                k += 1
            if depth:
                return None
            spans.append((i + 1, k - 1))
            i = k
        else:
            i += 1
    return None


def _blank(segment: str) -> str:
    if "\n" not in segment:
        return " " * len(segment)
    return _NOT_NEWLINE.sub(" ", segment)


def _line_of(program: str, offset: int) -> int:
    return program.count("\n", 0, offset) + 1


def _unsure_before(program: str, pos: int, table: IdentTable) -> bool:
    """A ``"`` at ``pos`` right after a character whose token the masker cannot bound: a backslash,
    a non-ASCII symbol (the start of a notation token that might go on) or a disputed letter."""
    if pos == 0:
        return False
    before = program[pos - 1]
    if before == "\\" or table.is_disputed(before):
        return True
    return ord(before) > 127 and before != "»" and not table.is_id_rest(before)


def mask(program: str, keep_interpolations: bool = False, lean_version: str | None = None) -> Masked:
    """Mask comments, string and char literals of a Lean program (see the module docstring).
    ``keep_interpolations``: leave the code inside interpolated strings' ``{...}`` unmasked.
    ``lean_version`` selects Lean's identifier table (``lexing.table_for``)."""
    table = table_for(lean_version)
    pieces: list[str] = []
    keep_from = 0  # start of the code run not yet copied
    pos = 0
    n = len(program)
    unterminated: str | None = None
    ambiguous: str | None = None

    def unsure(what: str, at: int) -> None:
        nonlocal ambiguous
        if ambiguous is None:
            ambiguous = f"{what} at line {_line_of(program, at)}"

    while pos < n:
        m = _START.search(program, pos)
        if m is None:
            break
        start = m.start()
        token = m.group()
        spans: list[tuple[int, int]] = []
        if token == "/-":
            depth, scan = 1, m.end()
            if program[scan:scan + 1] in ("-", "!"):  # `/--` and `/-!`: the body starts after them
                scan += 1
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
            if _unsure_before(program, start, table):
                unsure(f"a string literal right after `{program[start - 1]}` (a token Lean's table may extend)", start)
            interpolated = keep_interpolations and bool(_INTERPOLATED_BEFORE.search(program, max(0, start - 40), start))
            if interpolated:
                close = _string_end(program, m.end(), True, spans, table)
            else:
                body = _STRING_BODY.match(program, m.end())
                close = body.end() if body else None
            if close is None:
                end, unterminated = n, "string literal"
            else:
                end = close
                if "\\" in program[start:end] and _BAD_ESCAPE.search(program, start, end):
                    unsure("a string escape some Lean versions reject (Lean then lexes on inside the string)", start)
        elif token[0] == "r":  # raw string r"..." / r#"..."#, unless the `r` continues an identifier
            reading = reading_at(program, start, table)
            if reading == IDENT:
                pos = start + 1
                continue
            # raw strings exist only in newer Lean (older ones read `r`, a string, `#`s) and no
            # honest proof needs one
            unsure("a raw string literal (`r\"` / `r#\"`)", start)
            closing = '"' + "#" * (len(token) - 2)
            close = program.find(closing, m.end())
            if close < 0:
                end, unterminated = n, "string literal"
            else:
                end = close + len(closing)
        elif token == "'":
            c = _CHAR_LIT.match(program, start)
            if c is None:
                pos = start + 1  # a prime in an identifier such as h' or f'', or `f '' s`
                continue
            reading = reading_at(program, start, table)
            if reading == IDENT:
                pos = start + 1
                continue
            if reading == AMBIGUOUS:
                run = _run_start(program, start, table)
                before = program[max(0, run - 1):start]
                unsure(f"a char literal after `{before}`: where Lean's token ends there depends on its token table "
                       "or version", start)
            end = c.end()
            if "\\" in program[start:end] and _BAD_ESCAPE.search(program, start, end):
                unsure("a char escape some Lean versions reject (Lean then lexes on inside the literal)", start)
        else:  # «quoted identifier»: skip it whole so `--` or `"` inside is not misread
            close = program.find("»", m.end())
            if close < 0 or any(x in program[m.end():close] for x in ('"', "'", "--", "/-", "-/", "\n", "«")):
                unsure("a «quoted» name holding a quote, a comment opener or a line break", start)
            pos = n if close < 0 else close + 1
            continue
        pieces.append(program[keep_from:start])
        cursor = start
        for lo, hi in spans:  # interpolated code stays visible
            pieces.append(_blank(program[cursor:lo]))
            pieces.append(program[lo:hi])
            cursor = hi
        pieces.append(_blank(program[cursor:end]))
        keep_from = pos = end
    pieces.append(program[keep_from:])
    return Masked("".join(pieces), unterminated, ambiguous)
