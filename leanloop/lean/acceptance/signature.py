"""Signatures compared the way Lean's pretty-printer prints them (LLF App. B's statement check, offline).

Two spellings of one signature print alike: the printer groups consecutive binders of one kind and
type (``(x : ℕ) (y : ℕ)`` prints as ``(x y : ℕ)``), spaces every token (``x+x`` as ``x + x``), drops
parentheses the operators' precedences make redundant (``(6 * x) % m`` as ``6 * x % m``) and writes
``∑ x ∈ s, f`` and ``fun x ↦ e``. ``compare`` normalises both sides so; what still differs is decided
only where the printed texts must differ too (the binder names, which the printer keeps as written);
anything else, e.g. ``|x|`` against ``abs x``, needs Lean's own printed signature: ``undecided``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from leanloop.lean.acceptance.masking import mask

SAME, DIFFERENT, UNDECIDED = "same", "different", "undecided"
Verdict = Literal["same", "different", "undecided"]

_CLOSING = {"(": ")", "{": "}", "[": "]", "⦃": "⦄", "⟨": "⟩"}
# Lean 4 / Mathlib infix operators: (precedence, associativity); a parenthesis next to one of these is
# redundant when the operators inside bind tighter (Lean's `infixl:65 " + "` and friends)
INFIX = {
    "↔": (20, "n"),
    "→": (25, "r"),
    "∨": (30, "r"),
    "∧": (35, "r"),
    "=": (50, "n"),
    "≠": (50, "n"),
    "<": (50, "n"),
    ">": (50, "n"),
    "≤": (50, "n"),
    "≥": (50, "n"),
    "∣": (50, "n"),
    "∈": (50, "n"),
    "∉": (50, "n"),
    "⊆": (50, "n"),
    "==": (50, "n"),
    "+": (65, "l"),
    "-": (65, "l"),
    "*": (70, "l"),
    "/": (70, "l"),
    "%": (70, "l"),
    "^": (75, "r"),
}
APPLICATION = 1024  # `f x`: binds tighter than every infix operator
# Tokens that open a construct extending as far right as it can (binders, lambdas, big operators):
# a parenthesis around one is never dropped here.
_BINDING = {"∀", "∃", "∃!", "fun", "λ", "∑", "∏", "⋃", "⋂", "Π", "Σ", "if", "let", "have", "show"}
_SPELLINGS = {"λ": "fun", "=>": "↦", "<=": "≤", ">=": "≥", "!=": "≠", "->": "→", "<->": "↔", "\\and": "∧"}
_TOKEN = re.compile(
    r"\s+|(?P<tok>[A-Za-z_\u00c0-\u024f\u0370-\u03ba\u03bc-\u03ff\u1f00-\u1fff𝒜-𝔷ℕℤℚℝℂ][\w'!?.\u2080-\u209c\u1d62-\u1d6a]*"
    r"|\d+(?:\.\d+)?|<->|->|<=|>=|!=|=>|:=|==|∃!|.)"
)


def tokens(text: str) -> list[str]:
    """Lean-ish tokens of masked code: names, numerals, the few multi-character operators, any other
    character alone; spelling variants the printer unifies are mapped to its spelling."""
    out = [m.group("tok") for m in _TOKEN.finditer(mask(text).text) if m.group("tok")]
    return [_SPELLINGS.get(t, t) for t in out]


def _groups(toks: list[str]) -> list[tuple[int, int]]:
    """(open, close) index pairs of the bracket groups, matched."""
    stack, pairs = [], []
    for i, t in enumerate(toks):
        if t in _CLOSING:
            stack.append(i)
        elif t in _CLOSING.values() and stack and _CLOSING[toks[stack[-1]]] == t:
            pairs.append((stack.pop(), i))
    return pairs


def _top_level(toks: list[str]) -> list[int]:
    """Indices of the tokens outside every bracket group."""
    depth, top = 0, []
    for i, t in enumerate(toks):
        if t in _CLOSING:
            depth += 1
        elif t in _CLOSING.values():
            depth -= 1
        elif depth == 0:
            top.append(i)
    return top


def _weakest(inner: list[str]) -> int | None:
    """The loosest-binding operator at the top level of ``inner`` (APPLICATION when none; None when
    it holds something this table cannot place: a binder, a type ascription, an unknown symbol)."""
    top = _top_level(inner)
    if not inner:
        return None
    weakest = APPLICATION
    for i in top:
        t = inner[i]
        if t in _BINDING or t in (",", ":", ":=", "|", "·", "¬", "↑", "-") and not (t == "-" and i > 0):
            return None
        if t in INFIX:
            weakest = min(weakest, INFIX[t][0])
        elif not re.match(r"[\w\d]", t):
            return None
    if len(inner) > 1 and weakest == APPLICATION and len(top) == 1 and inner[0] in _CLOSING:
        return APPLICATION + 1  # a group inside: an atom
    if len(inner) == 1:
        return APPLICATION + 1
    return weakest


# how tightly a binder's body is parsed: Mathlib's big operators take `term:67` (`∑ k ∈ s, 2 * k + 1` is
# `(∑ k ∈ s, 2 * k) + 1`); ∀, ∃ and fun reach as far right as they can
_BODY = {"∑": 67, "∏": 67}


def _binder_of(toks: list[str], comma: int) -> str | None:
    """The binding token a `,` / `↦` at ``comma`` closes (None: a separator, e.g. in a tuple)."""
    depth = 0
    for i in range(comma - 1, -1, -1):
        t = toks[i]
        if t in _CLOSING.values():
            depth += 1
        elif t in _CLOSING:
            if depth == 0:
                return None
            depth -= 1
        elif depth == 0 and t in _BINDING:
            return t
        elif depth == 0 and t in (",", "↦"):
            return None
    return None


def _prefix(toks: list[str], at: int) -> bool:
    """Is the operator at ``at`` used as a prefix (nothing it could be infix to on its left)?"""
    return at == 0 or toks[at - 1] in INFIX or toks[at - 1] in _CLOSING or toks[at - 1] in (",", ":", "↦", "¬")


def _redundant(toks: list[str], start: int, end: int) -> bool:
    inner = toks[start + 1 : end]
    weakest = _weakest(inner)
    if weakest is None:
        return False
    left = toks[start - 1] if start > 0 else None
    right = toks[end + 1] if end + 1 < len(toks) else None

    def fits(op: str | None, side: str, at: int) -> bool:
        if op is None or (side == "left" and op in _CLOSING) or (side == "right" and op in _CLOSING.values()):
            return True  # the group fills a bracket on that side; a bracket facing away is an application
        if op in (",", "↦") and side == "left":  # the body of a binder: how far it reaches depends on the binder
            owner = _binder_of(toks, at)
            return owner is None or weakest >= _BODY.get(owner, 0)
        if op == "-" and side == "left" and _prefix(toks, at):
            return weakest > APPLICATION  # unary minus: only an atom
        if op in INFIX:
            prec, assoc = INFIX[op]
            # same precedence: redundant only on the side the operator associates to
            return weakest > prec or (weakest == prec and assoc == ("r" if side == "left" else "l"))
        return weakest > APPLICATION  # beside a name or a group (application): only an atom

    return fits(left, "left", start - 1) and fits(right, "right", end + 1)


def strip_parentheses(toks: list[str]) -> list[str]:
    """``toks`` without the parentheses the precedence table makes redundant (innermost first, repeated)."""
    changed = True
    while changed:
        changed = False
        for start, end in sorted(_groups(toks), key=lambda p: p[1] - p[0]):
            if toks[start] == "(" and _redundant(toks, start, end):
                toks = toks[:start] + toks[start + 1 : end] + toks[end + 1 :]
                changed = True
                break
    return toks


def _big_operator_in(toks: list[str]) -> list[str]:
    """``∑ x in s, f`` -> ``∑ x ∈ s, f`` (the printer's spelling)."""
    out = list(toks)
    for i, t in enumerate(out):
        if t == "in" and any(out[j] in ("∑", "∏") for j in range(max(0, i - 3), i)):
            out[i] = "∈"
    return out


def term(text: str) -> tuple[str, ...]:
    return tuple(strip_parentheses(_big_operator_in(tokens(text))))


@dataclass(frozen=True)
class Binder:
    names: tuple[str, ...]
    kind: str  # "(", "{", "[", "⦃"
    type: tuple[str, ...]


def split_binders(binders: str) -> list[Binder]:
    """``(a b : ℝ) (h₀ : 0 < a) [Fintype α]`` -> Binder groups (top-level brackets only)."""
    toks = tokens(binders)
    out = []
    for start, end in sorted(_groups(toks)):
        if any(s < start and end < e for s, e in _groups(toks)):
            continue
        inner = toks[start + 1 : end]
        colon = next((i for i in _top_level(inner) if inner[i] == ":"), None)
        names = tuple(inner[:colon]) if colon is not None else ()
        type_ = inner[colon + 1 :] if colon is not None else inner
        out.append(Binder(names, toks[start], tuple(strip_parentheses(_big_operator_in(type_)))))
    return out


def printed(binders: str, type_: str) -> tuple[tuple[tuple[str, str, tuple[str, ...]], ...], tuple[str, ...]]:
    """The signature as the printer lays it out, binder by binder (grouping undone) and the type."""
    flat = tuple((name, b.kind, b.type) for b in split_binders(binders) for name in (b.names or ("_",)))
    return flat, term(type_)


def compare(want: tuple[str, str], got: tuple[str, str]) -> Verdict:
    """``same`` when the two (binders, type) print alike after normalisation, ``different`` when their
    printed signatures must differ (binder names or count), else ``undecided`` (Lean's printer decides)."""
    a, b = printed(*want), printed(*got)
    if a == b:
        return SAME
    if [(n, k) for n, k, _ in a[0]] != [(n, k) for n, k, _ in b[0]]:
        return DIFFERENT
    return UNDECIDED
