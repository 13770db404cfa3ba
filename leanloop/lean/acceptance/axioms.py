"""Read Lean's reply to ``#print axioms NAME``."""

from __future__ import annotations

import re
from dataclasses import dataclass

ALLOWED_AXIOMS = frozenset({"propext", "Classical.choice", "Quot.sound"})

_DEPENDS = re.compile(r"\A'(?P<name>.+)' depends on axioms: \[(?P<axioms>.*)\]\s*\Z", re.S)
_NONE = re.compile(r"\A'(?P<name>.+)' does not depend on any axioms\s*\Z", re.S)


@dataclass(frozen=True)
class AxiomReply:
    name: str
    axioms: tuple[str, ...]

    @property
    def disallowed(self) -> tuple[str, ...]:
        return tuple(a for a in self.axioms if a not in ALLOWED_AXIOMS)


def parse_axioms_reply(text: str) -> AxiomReply | None:
    """The parsed reply, or None when ``text`` is not a ``#print axioms`` reply."""
    text = text.strip()
    m = _DEPENDS.match(text)
    if m:
        axioms = tuple(a.strip() for a in m.group("axioms").split(",") if a.strip())
        return AxiomReply(m.group("name"), axioms)
    m = _NONE.match(text)
    if m:
        return AxiomReply(m.group("name"), ())
    return None


def describe_axiom(axiom: str) -> str:
    """Why an axiom outside the allow-list is refused."""
    if axiom == "sorryAx":
        return "sorryAx: the proof contains sorry (written or from an elaboration error)"
    if axiom in ("Lean.ofReduceBool", "Lean.ofReduceNat", "Lean.trustCompiler") or "._native." in axiom:
        return f"{axiom}: trusts compiled code instead of the kernel (native_decide / bv_decide)"
    return f"{axiom}: an axiom outside propext / Classical.choice / Quot.sound"
