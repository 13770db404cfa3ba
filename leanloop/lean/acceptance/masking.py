"""Blank out Lean comments and string/char literals so that text rules only see code."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations

from leanloop.lean.acceptance.lexing import CLASSIC, TRANSITION, IdentTable, table_for
from leanloop.lean.acceptance.tokens import TokenTable, chunk_start, shipped, token_start

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
_INTERPOLATED_BEFORE = re.compile(
    r"(?:!|\]|"
    f"(?<![{CLASSIC.rest}.])"
    r"(?:dbg_trace|throwError|throwErrorAt|"
    r"throwNamedError))[ \t]*\Z"
)

IDENT, LITERAL, AMBIGUOUS = "ident", "literal", "ambiguous"


@dataclass(frozen=True)
class Masked:
    text: str  # same length and newlines as the program; comments and literals are spaces
    unterminated: str | None  # "block comment" / "string literal" when one runs to the end
    # where the masker cannot be sure what Lean reads (a literal glued to a `#word` token, a quote
    # after a symbol Lean's token table may extend, a raw string, ...): the first such place
    ambiguous: str | None = None


def _hash_word(program: str, floor: int, pos: int) -> bool:
    """A ``#word`` in the run before ``pos``: the ``#`` commands are many and spread over every
    library, so where one ends is not left to the shipped table."""
    at = program.find("#", floor, pos)
    while at >= 0:
        if at + 1 < pos and (program[at + 1].isalpha() or program[at + 1] == "_"):
            return True
        at = program.find("#", at + 1, pos)
    return False


def reading_at(
    program: str, pos: int, table: IdentTable = TRANSITION, tokens: TokenTable | None = None, lo: int = 0
) -> str:
    """How Lean reads the ``'``, ``"`` or the ``r`` of ``r"`` at ``pos``: ``IDENT`` (it is inside the
    identifier or table token before it), ``LITERAL`` (a token starts there: it opens a literal) or
    ``AMBIGUOUS`` (the token table or the version cannot settle it). Lexes the whitespace-free run
    up to ``pos`` from its start (not before ``lo``, the end of the last comment or literal) with
    maximal munch over ``tokens`` (``tokens.token_start``)."""
    floor = chunk_start(program, pos, lo)
    if _hash_word(program, floor, pos):
        return AMBIGUOUS
    start = token_start(program, pos, floor, table, tokens or shipped())
    return AMBIGUOUS if start is None else LITERAL if start else IDENT


def continues_identifier(
    program: str, pos: int, table: IdentTable = TRANSITION, tokens: TokenTable | None = None, lo: int = 0
) -> bool | None:
    """Is the ``'`` or ``r`` at ``pos`` part of the token before it? None: the masker cannot know
    (see ``reading_at``)."""
    reading = reading_at(program, pos, table, tokens, lo)
    return None if reading == AMBIGUOUS else reading == IDENT


def _string_end(
    program: str,
    i: int,
    keep: bool,
    spans: list[tuple[int, int]],
    table: IdentTable = TRANSITION,
    tokens: TokenTable | None = None,
) -> int | None:
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
                    end = _string_end(
                        program, k + 1, bool(_INTERPOLATED_BEFORE.search(program, 0, k)), [], table, tokens
                    )
                    if end is None:
                        return None
                    k = end
                    continue
                if ch == "'" and not continues_identifier(program, k, table, tokens, i + 1):
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


def mask(
    program: str, keep_interpolations: bool = False, lean_version: str | None = None, tokens: TokenTable | None = None
) -> Masked:
    """Mask comments, string and char literals of a Lean program (see the module docstring).
    ``keep_interpolations``: leave the code inside interpolated strings' ``{...}`` unmasked.
    ``lean_version`` selects Lean's identifier table (``lexing.table_for``); ``tokens`` Lean's token
    table (default: the shipped one, ``tokens.shipped``).

    A scoped notation's tokens exist only where its namespace is open (``[MOD`` after ``open Nat``),
    which no table can say: where the program holds such a token (``TokenTable.scope_sensitive``)
    it is also read without it, and a character blanked in one reading but code in another is
    refused (``ambiguous``), as is one the masker cannot settle; a reading that leaves a literal
    unterminated is a parse error in Lean, so it pays nothing and is not compared."""
    table = table_for(lean_version)
    tokens = tokens or shipped()
    masked = _mask(program, keep_interpolations, table, tokens)
    if masked.ambiguous or masked.unterminated:
        return masked
    present = sorted(t for t in tokens.scope_sensitive if t in program)
    absent_sets = (
        [set(c) for k in range(1, len(present) + 1) for c in combinations(present, k)]
        if len(present) <= 3
        else [{t} for t in present] + [set(present)]
    )
    for absent in absent_sets:
        other = _mask(program, keep_interpolations, table, _without(tokens, frozenset(absent)))
        if other.unterminated:
            continue
        where = ", ".join(f"`{t}`" for t in sorted(absent))
        if other.ambiguous:
            return Masked(masked.text, None, f"{other.ambiguous} where {where} is not open (a scoped notation token)")
        for at, (seen, there) in enumerate(zip(masked.text, other.text)):
            if seen != there and not program[at].isspace():
                return Masked(
                    masked.text,
                    None,
                    f"text Lean reads otherwise where {where} is not open (a scoped "
                    f"notation token) at line {_line_of(program, at)}",
                )
    return masked


@lru_cache(maxsize=64)
def _without(tokens: TokenTable, absent: frozenset[str]) -> TokenTable:
    """The table less ``absent``, built once per pair: many programs hold the same scoped tokens."""
    return tokens.without(absent)


def _mask(program: str, keep_interpolations: bool, table: IdentTable, tokens: TokenTable) -> Masked:
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
            if program[scan : scan + 1] in ("-", "!"):  # `/--` and `/-!`: the body starts after them
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
            if reading_at(program, start, table, tokens, keep_from) != LITERAL:
                unsure(f"a string literal right after `{program[start - 1]}` (a token Lean's table may extend)", start)
            interpolated = keep_interpolations and bool(_INTERPOLATED_BEFORE.search(program, max(0, start - 40), start))
            if interpolated:
                close = _string_end(program, m.end(), True, spans, table, tokens)
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
            reading = reading_at(program, start, table, tokens, keep_from)
            if reading == IDENT:
                pos = start + 1
                continue
            # raw strings exist only in newer Lean (older ones read `r`, a string, `#`s) and no
            # honest proof needs one
            unsure('a raw string literal (`r"` / `r#"`)', start)
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
            reading = reading_at(program, start, table, tokens, keep_from)
            if reading == IDENT:
                pos = start + 1
                continue
            if reading == AMBIGUOUS:
                before = program[chunk_start(program, start, keep_from) : start]
                unsure(
                    f"a char literal after `{before}`: Lean's token table or version decides where the token "
                    "before it ends",
                    start,
                )
            end = c.end()
            if "\\" in program[start:end] and _BAD_ESCAPE.search(program, start, end):
                unsure("a char escape some Lean versions reject (Lean then lexes on inside the literal)", start)
        else:  # «quoted identifier»: skip it whole so `--` or `"` inside is not misread
            close = program.find("»", m.end())
            if close < 0 or any(x in program[m.end() : close] for x in ('"', "'", "--", "/-", "-/", "\n", "«")):
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
