"""Lean statement text: masking, well-formedness, the signature/body split, canonical forms.

Text-only (no Lean): comments and string literals are masked first (with ``leanloop.lean.acceptance``'s masker),
so a ``:=`` or a bracket inside a docstring or a ``--`` comment never counts.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from leanloop.lean.acceptance.masking import mask as _policy_mask

OPENERS = {"(": ")", "[": "]", "{": "}", "⟨": "⟩", "⦃": "⦄", "⟦": "⟧", "⌊": "⌋", "⌈": "⌉"}
CLOSERS = {v: k for k, v in OPENERS.items()}
DECL_KEYWORDS = ("theorem", "lemma")
_MODIFIERS = r"(?:(?:private|protected|noncomputable|nonrec)\s+)*"
DECL_RE = re.compile(rf"(?m)^[ \t]*(?:@\[[^\]\n]*\]\s*)?{_MODIFIERS}(theorem|lemma)\s+([^\s(\[{{:⦃]+)")
_HEADER_LINE = re.compile(r"^\s*(import|open|set_option|namespace|end|section|universe|variable)\b.*$", re.M)


def mask(text: str) -> str:
    """``text`` with comments and string/char literals blanked (same length and lines): the
    acceptance policy's masker, so statements and proofs are read the same way."""
    return _policy_mask(text).text


def delimiter_problems(masked: str) -> list[str]:
    stack: list[tuple[str, int]] = []
    problems = []
    for pos, ch in enumerate(masked):
        if ch in OPENERS:
            stack.append((ch, pos))
        elif ch in CLOSERS:
            if not stack:
                problems.append(f"unmatched '{ch}' at offset {pos}")
            elif stack[-1][0] != CLOSERS[ch]:
                problems.append(f"'{stack[-1][0]}' at offset {stack[-1][1]} closed by '{ch}' at offset {pos}")
                stack.pop()
            else:
                stack.pop()
    problems += [f"unclosed '{ch}' at offset {pos}" for ch, pos in stack]
    return problems


def _top_level(masked: str, start: int, token: str) -> int:
    """Offset of the first ``token`` at bracket depth 0 at or after ``start``, or -1."""
    depth = 0
    i = start
    while i < len(masked):
        ch = masked[i]
        if ch in OPENERS:
            depth += 1
        elif ch in CLOSERS:
            depth = max(depth - 1, 0)
        elif depth == 0 and masked.startswith(token, i):
            if token != ":" or not masked.startswith(":=", i):
                return i
        i += 1
    return -1


@dataclass
class Declaration:
    """The first ``theorem``/``lemma`` of a text, split into its parts (offsets into the text)."""

    keyword: str
    name: str
    start: int  # the keyword (or its attribute/modifier prefix)
    binders: str  # text between the name and the type's colon
    type: str  # text after the colon up to ``:=`` (or the end)
    body: str | None  # text after ``:=`` (None when there is no ``:=``)

    @property
    def signature(self) -> str:
        return f"{self.binders} : {self.type}".strip()


def find_declaration(text: str) -> Declaration | None:
    masked = mask(text)
    match = DECL_RE.search(masked)
    if not match:
        return None
    after_name = match.end(2)
    assign = _top_level(masked, after_name, ":=")
    end = assign if assign >= 0 else len(masked)
    colon = _top_level(masked[:end], after_name, ":")
    if colon < 0:
        return Declaration(
            match.group(1),
            text[match.start(2) : match.end(2)],
            match.start(),
            binders=text[after_name:end].strip(),
            type="",
            body=None if assign < 0 else text[assign + 2 :],
        )
    return Declaration(
        keyword=match.group(1),
        name=text[match.start(2) : match.end(2)],
        start=match.start(),
        binders=text[after_name:colon].strip(),
        type=text[colon + 1 : end].strip(),
        body=None if assign < 0 else text[assign + 2 :],
    )


@dataclass
class WellFormedness:
    ok: bool
    reasons: list[str] = field(default_factory=list)


def well_formed(text: str) -> WellFormedness:
    """The reward's first gate: balanced delimiters, a theorem declaration, a type signature."""
    if not text or not text.strip():
        return WellFormedness(False, ["empty output"])
    masked = _policy_mask(text)
    reasons = delimiter_problems(masked.text)
    if masked.unterminated:
        reasons.append(f"unterminated {masked.unterminated}")
    decl = find_declaration(text)
    if decl is None:
        reasons.append("no theorem/lemma declaration")
    elif not mask(decl.type).strip():
        reasons.append(f"'{decl.name}' has no type signature (no ': <type>' before ':=')")
    return WellFormedness(not reasons, reasons)


def canonicalize(text: str) -> str:
    """The statement with comments, header lines, the theorem's name and its proof body removed and
    whitespace collapsed: what faithfulness compares. Text with no declaration is compared whole."""
    decl = find_declaration(text)
    if decl is None:
        body = _HEADER_LINE.sub(" ", mask(text))
        return " ".join(body.split())
    return " ".join(mask(decl.signature).split())


def faithfulness(candidate: str, reference: str) -> float:
    """difflib ratio (0..1) of the canonical forms; 1.0 for statements equal up to name, proof,
    comments and whitespace."""
    return difflib.SequenceMatcher(None, canonicalize(candidate), canonicalize(reference), autojunk=False).ratio()
