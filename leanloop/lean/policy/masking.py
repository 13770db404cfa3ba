"""Blank out Lean comments and string/char literals so that text rules only see code.

The masked text has exactly the length and the line structure of the input (every masked
character becomes a space, newlines stay), so a match offset or line number in the masked text is
the same offset or line in the program. One left-to-right pass: a single regex jumps to the next
place where a comment or literal could start; only nested block comments need a small loop over
their delimiters. Pure-Python per-character scanning was ~20x slower and would dominate the
precheck budget (see ``make bench-data``).

Lean 4 lexical facts this relies on (``Lean.Parser.Basic``: whitespace, identFn, strLitFn, ...):
- block comments ``/- ... -/`` nest; doc comments ``/-- -/`` and ``/-! -/`` are block comments
  whose body starts after the third character, so ``/--/`` does NOT close itself;
- ``--`` starts a line comment, except inside a comment or literal;
- strings ``"..."`` have backslash escapes and may span lines; raw strings ``r"..."`` /
  ``r#"..."#`` have none; interpolated strings (``s!"..."``, ``m!``, ``f!``, ``dbg_trace``,
  ``throwError``, ``trace[...]``) contain code in ``{...}``: with ``keep_interpolations`` that
  code stays visible to the text rules;
- char literals ``'a'`` / ``'\\n'`` exist, and ``'`` is also an identifier character (``h'``,
  ``f''``): a quote (or an ``r`` before ``"``) continues an identifier only when an identifier
  *started* before it, i.e. the run of identifier characters before it begins with a letter or
  ``_``. ``!`` and ``?`` continue identifiers (``get!``) but never start one, so in ``!r"\\"`` and
  ``!'"'`` Lean reads the token ``!`` and then a raw string / char literal. ``#`` does not start
  an identifier either: ``#check`` / ``#reduce`` / any ``#word`` is one symbol token (the longest
  entry of Lean's token table it starts with), and the next character starts a new token, so in
  ``#check'"'`` Lean reads a char literal and in ``#checkr"\\"`` a raw string. Where that token ends
  depends on the token table (``#check_failurefoo'`` is ``#check_failure`` then the identifier
  ``foo'``), which the masker does not know: it masks as if the whole ``#word`` were the token and
  reports the literal as ``ambiguous``. A name goes on over a ``.`` into ``r`` (``x.r``), never
  into ``'``, and ends after a «quoted» part (``x.'"'`` and ``«x»'"'``: a name, then a literal);
- ``«...»`` quotes an identifier that may contain ``--`` or ``"``: skipped, not masked.
CRLF line endings are text like any other here (the policy normalizes them before it masks).
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
_ID_REST = re.compile(r"[\w'!?₀-₉ₐ-ₜᵢ-ᵪⱼ]")  # Lean's isIdRest (\w covers letter-like Unicode)
_INTERPOLATED_BEFORE = re.compile(r"(?:!|\]|(?<![\w'.])(?:dbg_trace|throwError|throwErrorAt|throwNamedError))[ \t]*\Z")


@dataclass(frozen=True)
class Masked:
    text: str  # same length and newlines as the program; comments and literals are spaces
    unterminated: str | None  # "block comment" / "string literal" when one runs to the end
    # a literal glued to a `#word` token: whether Lean reads a literal there depends on its token
    # table (see the module docstring); the masked text takes the whole `#word` as the token
    ambiguous: str | None = None


def _name_ends_at(program: str, end: int) -> bool | None:
    """Does a name end just before ``end`` (a run of ``isIdRest`` characters in which an identifier
    starts at a letter or ``_``, or a «quoted» part)? None: the run follows a ``#``, so ``#word``
    (or a prefix of it, per Lean's token table) is one token and the name may not exist."""
    if end == 0:
        return False
    if program[end - 1] == "»":
        return True
    start = end
    while start > 0 and _ID_REST.match(program, start - 1):
        start -= 1
    for i in range(start, end):  # left to right, as the lexer reads the run
        c = program[i]
        if c == "_" or (c.isalpha() and not ("₀" <= c <= "ₜ")):
            return None if start > 0 and program[start - 1] == "#" else True
    return False


def continues_identifier(program: str, pos: int) -> bool | None:
    """Is the ``'`` or ``r`` at ``pos`` part of an identifier that started before it (Lean's
    ``identFn``: an identifier starts at a letter or ``_`` and goes on over ``isIdRest``
    characters; after a «quoted» part or a run it goes on only over a ``.`` followed by a letter,
    ``_`` or ``«``)? None: it follows a ``#word``, where Lean's token table decides (falsy: the
    masker reads a new token here, as Lean does after ``#check``)."""
    if pos == 0:
        return False
    before = program[pos - 1]
    if before == "»":
        return False  # `«x»'"'`: the name ends, a char literal starts
    if before == ".":
        # `x.r"` is the name `x.r` then a string; `'` cannot start a name part: `x.'"'` is `x`, `.`,
        # a char literal
        return False if program[pos] == "'" else _name_ends_at(program, pos - 1)
    return _name_ends_at(program, pos)


def _string_end(program: str, i: int, keep: bool, spans: list[tuple[int, int]]) -> int | None:
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
                    end = _string_end(program, k + 1, bool(_INTERPOLATED_BEFORE.search(program, 0, k)), [])
                    if end is None:
                        return None
                    k = end
                    continue
                if ch == "'" and not continues_identifier(program, k):
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


def mask(program: str, keep_interpolations: bool = False) -> Masked:
    """Mask comments, string and char literals of a Lean program (see the module docstring).
    ``keep_interpolations``: leave the code inside interpolated strings' ``{...}`` unmasked."""
    pieces: list[str] = []
    keep_from = 0  # start of the code run not yet copied
    pos = 0
    n = len(program)
    unterminated: str | None = None
    ambiguous: str | None = None
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
            interpolated = keep_interpolations and bool(_INTERPOLATED_BEFORE.search(program, max(0, start - 40), start))
            if interpolated:
                close = _string_end(program, m.end(), True, spans)
            else:
                body = _STRING_BODY.match(program, m.end())
                close = body.end() if body else None
            if close is None:
                end, unterminated = n, "string literal"
            else:
                end = close
        elif token[0] == "r":  # raw string r"..." / r#"..."#, unless the `r` continues an identifier
            continues = continues_identifier(program, start)
            if continues:
                pos = start + 1
                continue
            if continues is None:
                ambiguous = f"raw string glued to a `#word` token at line {program.count(chr(10), 0, start) + 1}"
            closing = '"' + "#" * (len(token) - 2)
            close = program.find(closing, m.end())
            if close < 0:
                end, unterminated = n, "string literal"
            else:
                end = close + len(closing)
        elif token == "'":
            continues = continues_identifier(program, start)
            if continues:
                pos = start + 1  # a prime in an identifier such as h' or f''
                continue
            c = _CHAR_LIT.match(program, start)
            if c is None:
                pos = start + 1
                continue
            if continues is None:
                ambiguous = f"char literal glued to a `#word` token at line {program.count(chr(10), 0, start) + 1}"
            end = c.end()
        else:  # «quoted identifier»: skip it whole so `--` or `"` inside is not misread
            close = program.find("»", m.end())
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
