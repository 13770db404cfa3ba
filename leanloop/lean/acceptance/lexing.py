"""Lean 4's identifier character classes, per Lean version, and the notation tokens the masker knows."""

from __future__ import annotations

import re
from dataclasses import dataclass

_ASCII_FIRST = "A-Za-z_"
_ASCII_REST = "A-Za-z0-9_'!?"

_LETTER_LIKE_CLASSIC = (
    "\u03b1-\u03ba\u03bc-\u03c9"  # lower Greek but λ
    "\u0391-\u039f\u03a1\u03a2\u03a4-\u03a9"  # upper Greek but Π and Σ
    "\u03ca-\u03fb"  # Coptic
    "\u1f00-\u1ffe"  # polytonic Greek
    "\u2100-\u214f"  # letterlike block
    "\U0001d49c-\U0001d59f"
)  # script, double-struck, Fraktur
_LETTER_LIKE_LATIN = "\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u00ff\u0100-\u017f"  # Latin-1 letters, Latin Extended-A
_SUBSCRIPT_CLASSIC = "\u2080-\u2089\u2090-\u209c\u1d62-\u1d6a"
_SUBSCRIPT_LATIN = "\u2c7c"


@dataclass(frozen=True)
class IdentTable:
    """One Lean version's identifier classes as regex character classes (C-speed matching)."""

    name: str
    first: str  # the body of a [...] class: Lean's isIdFirst
    rest: str  # Lean's isIdRest
    disputed: str = ""  # TRANSITION only: characters whose class the version does not pin

    def __post_init__(self) -> None:
        object.__setattr__(self, "_first", re.compile(f"[{self.first}]"))
        object.__setattr__(self, "_rest", re.compile(f"[{self.rest}]"))
        object.__setattr__(self, "_disputed", re.compile(f"[{self.disputed}]") if self.disputed else None)

    def is_id_first(self, c: str) -> bool:
        return bool(self._first.match(c))  # type: ignore[attr-defined]

    def is_id_rest(self, c: str) -> bool:
        return bool(self._rest.match(c))  # type: ignore[attr-defined]

    def is_disputed(self, c: str) -> bool:
        pattern = self._disputed  # type: ignore[attr-defined]
        return bool(pattern is not None and pattern.match(c))

    def rest_class(self) -> re.Pattern:
        return self._rest  # type: ignore[attr-defined]


CLASSIC = IdentTable(
    "classic", _ASCII_FIRST + _LETTER_LIKE_CLASSIC, _ASCII_REST + _LETTER_LIKE_CLASSIC + _SUBSCRIPT_CLASSIC
)
LATIN = IdentTable(
    "latin",
    _ASCII_FIRST + _LETTER_LIKE_CLASSIC + _LETTER_LIKE_LATIN,
    _ASCII_REST + _LETTER_LIKE_CLASSIC + _LETTER_LIKE_LATIN + _SUBSCRIPT_CLASSIC + _SUBSCRIPT_LATIN,
)
# only what both tables agree on counts as identifier; the rest of LATIN's additions are disputed
TRANSITION = IdentTable("transition", CLASSIC.first, CLASSIC.rest, _LETTER_LIKE_LATIN + _SUBSCRIPT_LATIN)
TABLES = {t.name: t for t in (CLASSIC, LATIN, TRANSITION)}

_VERSION = re.compile(r"v?(\d+)\.(\d+)")


def table_for(lean_version: str | None) -> IdentTable:
    """The identifier table of ``lean_version`` (``v4.15.0``, ``leanprover/lean4:v4.9.0-rc1``);
    None or an unpinned version: ``TRANSITION`` (see the module docstring)."""
    if not lean_version:
        return TRANSITION
    m = _VERSION.search(lean_version.rsplit(":", 1)[-1])
    if m is None:
        return TRANSITION
    major, minor = int(m.group(1)), int(m.group(2))
    if major != 4:
        return TRANSITION
    if minor <= 16:
        return CLASSIC
    if minor >= 23:
        return LATIN
    return TRANSITION
