"""A second, independent reading of Lean 4's lexer, for testing the masker only.

Written from Lean's parser rules (``Lean.Parser.Basic``: ``whitespace``, ``finishCommentBlock``,
``tokenFnAux``, ``strLitFnAux``, ``quotedCharCoreFn``, ``charLitFnAux``, ``rawStrLitFnAux``,
``numberFnAux``, ``identFnAux`` / ``mkIdResult``) as a character-by-character state machine with
an explicit token table, so it shares no code and no regex with ``leanloop.lean.acceptance.masking``.
It reports which offsets Lean reads as comment or literal text, and where (if anywhere) Lean's
lexer stops with an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from leanloop.lean.acceptance.lexing import IdentTable

_WS = " \t\r\n"
_HEX = "0123456789abcdefABCDEF"


@dataclass
class Lexed:
    hidden: set[int] = field(default_factory=set)  # offsets inside comments and literals
    error: int | None = None  # where Lean's lexer fails (what follows is error recovery)


def _ascii_digit(c: str) -> bool:
    return "0" <= c <= "9"


def _escape_end(text: str, j: int) -> int | None:
    """``text[j]`` is a backslash: the offset after Lean's quotedCharCoreFn escape, None: an error."""
    nxt = text[j + 1 : j + 2]
    if nxt and nxt in "\\\"'nt":
        return j + 2
    if nxt == "x" and len(text) >= j + 4 and all(c in _HEX for c in text[j + 2 : j + 4]):
        return j + 4
    if nxt == "u" and len(text) >= j + 6 and all(c in _HEX for c in text[j + 2 : j + 6]):
        return j + 6
    return None


def _ident_end(text: str, i: int, table: IdentTable) -> int | None:
    n = len(text)
    while True:
        if i < n and text[i] == "«":
            close = text.find("»", i + 1)
            if close < 0:
                return None
            i = close + 1
        elif i < n and table.is_id_first(text[i]):
            i += 1
            while i < n and table.is_id_rest(text[i]):
                i += 1
        else:
            return i
        if i + 1 < n and text[i] == "." and (table.is_id_first(text[i + 1]) or text[i + 1] == "«"):
            i += 1
            continue
        return i


def _number_end(text: str, i: int) -> int:
    n = len(text)
    if text[i] == "0" and i + 1 < n and text[i + 1] in "xXbBoO":
        digits = {"x": _HEX, "b": "01", "o": "01234567"}[text[i + 1].lower()]
        j = i + 2
        while j < n and text[j] in digits:
            j += 1
        return j
    j = i
    while j < n and _ascii_digit(text[j]):
        j += 1
    if j + 1 < n and text[j] == "." and _ascii_digit(text[j + 1]):
        j += 1
        while j < n and _ascii_digit(text[j]):
            j += 1
    if j < n and text[j] in "eE":
        k = j + 1
        if k < n and text[k] in "+-":
            k += 1
        if k < n and _ascii_digit(text[k]):
            while k < n and _ascii_digit(text[k]):
                k += 1
            j = k
    return j


def lex(text: str, table: IdentTable, tokens: frozenset[str], raw_strings: bool = True) -> Lexed:
    out = Lexed()
    n = len(text)
    i = 0

    def hide(lo: int, hi: int) -> None:
        out.hidden.update(range(lo, hi))

    while i < n:
        c = text[i]
        if c in _WS:
            i += 1
            continue
        if text.startswith("--", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            hide(i, end)
            i = end
            continue
        if text.startswith("/-", i):
            j = i + 3 if text[i + 2 : i + 3] in ("-", "!") and i + 2 < n else i + 2
            depth = 1
            while j < n and depth:
                if text[j] == "-" and text[j + 1 : j + 2] == "/":
                    depth -= 1
                    j += 2
                elif text[j] == "/" and text[j + 1 : j + 2] == "-":
                    depth += 1
                    j += 2
                else:
                    j += 1
            if depth:
                out.error = i
                return out
            hide(i, j)
            i = j
            continue
        if c == '"':
            j = i + 1
            while True:
                if j >= n:
                    out.error = i
                    return out
                if text[j] == "\\":
                    nxt = _escape_end(text, j)
                    if nxt is None:
                        out.error = j
                        return out
                    j = nxt
                elif text[j] == '"':
                    break
                else:
                    j += 1
            hide(i, j + 1)
            i = j + 1
            continue
        if raw_strings and c == "r" and i + 1 < n and text[i + 1] in '"#':
            k = i + 1
            while k < n and text[k] == "#":
                k += 1
            if k < n and text[k] == '"':
                closing = '"' + "#" * (k - i - 1)
                close = text.find(closing, k + 1)
                if close < 0:
                    out.error = i
                    return out
                hide(i, close + len(closing))
                i = close + len(closing)
                continue
        if _ascii_digit(c):
            i = _number_end(text, i)
            continue
        if c == "'" and text[i + 1 : i + 2] != "'":
            j = i + 1
            if j >= n:
                out.error = i
                return out
            if text[j] == "\\":
                nxt = _escape_end(text, j)
                if nxt is None:
                    out.error = j
                    return out
                j = nxt
            else:
                j += 1
            if text[j : j + 1] != "'":
                out.error = i
                return out
            hide(i, j + 1)
            i = j + 1
            continue
        if c == "`" and i + 1 < n and (table.is_id_first(text[i + 1]) or text[i + 1] == "«"):
            end = _ident_end(text, i + 1, table)
            if end is None:
                out.error = i
                return out
            i = end
            continue
        token = max((t for t in tokens if text.startswith(t, i)), key=len, default="")
        if c == "«" or table.is_id_first(c):
            end = _ident_end(text, i, table)
            if end is None:
                out.error = i
                return out
            i = i + len(token) if token and len(token) >= end - i else end  # mkIdResult: a token as long wins
            continue
        i += len(token) if token else 1
    return out
