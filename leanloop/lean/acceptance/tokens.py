"""Lean's token table, and where a token starts in a run of text with no whitespace."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from leanloop.lean.acceptance.lexing import IdentTable

SHIPPED_PATH = Path(__file__).with_name("token_table.json")
_WS = " \t\r\n"


@dataclass(frozen=True)
class TokenTable:
    """A set of tokens with maximal-munch lookup, and where they came from."""

    tokens: frozenset[str]
    origin: str = "shipped"  # shipped / live / a test's name
    parts: tuple[dict, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        by_first: dict[str, list[str]] = {}
        for token in self.tokens:
            if token and not any(c in _WS for c in token):
                by_first.setdefault(token[0], []).append(token)
        object.__setattr__(
            self, "_by_first", {c: tuple(sorted(ts, key=len, reverse=True)) for c, ts in by_first.items()}
        )
        sensitive = frozenset(
            t
            for t in self.tokens
            if len(t) > 1 and not (t[0].isalpha() or t[0] in "_«") and any(c.isalnum() or c in "'\"!?_" for c in t[1:])
        )
        object.__setattr__(self, "_scope_sensitive", sensitive)

    def longest(self, text: str, i: int) -> str:
        """The longest token of the table that ``text`` has at ``i`` ("" when none)."""
        for token in self._by_first.get(text[i], ()):  # type: ignore[attr-defined]
            if text.startswith(token, i):
                return token
        return ""

    @property
    def scope_sensitive(self) -> frozenset[str]:
        """Tokens whose absence changes where a literal starts: a symbol first, then a letter, digit,
        quote, ``!``, ``?`` or ``_`` (``[MOD``, ``∑'``). Lean adds a ``scoped`` notation's tokens only
        where its namespace is open, and the table cannot say where that is, so the masker reads a
        program that holds one both with and without it (``masking.mask``). Computed once per table:
        the masker asks for every program."""
        return self._scope_sensitive  # type: ignore[attr-defined]

    def without(self, tokens) -> "TokenTable":
        """This table less ``tokens`` (Lean's table where their scopes are not open)."""
        return TokenTable(self.tokens - frozenset(tokens), origin=f"{self.origin} less scoped", parts=self.parts)

    @property
    def sha256(self) -> str:
        return hashlib.sha256("\n".join(sorted(self.tokens)).encode("utf-8")).hexdigest()

    def manifest(self) -> dict:
        """What a run manifest records: where the table came from, its size and hash."""
        return {
            "origin": self.origin,
            "tokens": len(self.tokens),
            "sha256": self.sha256,
            "sources": [{k: v for k, v in p.items() if k != "tokens"} for p in self.parts],
        }

    @classmethod
    def live(cls, tokens) -> "TokenTable":
        """The table a header environment reports (``Lean.Parser.getTokenTable``), read by the harness."""
        return cls(frozenset(t.strip() for t in tokens if t.strip()), origin="live")


@lru_cache(maxsize=1)
def shipped() -> TokenTable:
    data = json.loads(SHIPPED_PATH.read_text(encoding="utf-8"))
    parts = tuple(data["parts"])
    return TokenTable(frozenset(t for p in parts for t in p["tokens"]), origin="shipped", parts=parts)


# -- extraction from Lean sources ----------------------------------------------------------------
_DECLARING = re.compile(
    r"^[ \t]*(?:@\[[^\]]*\][ \t]*)?(?:(?:local|scoped|private)[ \t]+)*"
    r"(?:notation3?|infixl?|infixr|prefix|postfix|syntax|macro|elab|binder_predicate)\b"
    r"(.*(?:\n[ \t]+.*)*)",
    re.M,
)
_ATOM = re.compile(r'(&?)"((?:[^"\\\n]|\\.)*)"')


def extract_atoms(source: str) -> set[str]:
    """Every token a Lean source declares through ``notation`` / ``infix`` / ``prefix`` /
    ``postfix`` / ``syntax`` / ``macro`` / ``elab`` atoms (``&"x"`` atoms are non-reserved
    keywords, not tokens; an atom's surrounding spaces are pretty-printing hints)."""
    atoms: set[str] = set()
    for declaration in _DECLARING.finditer(source):
        head = declaration.group(1).split("=>", 1)[0]
        for amp, body in _ATOM.findall(head):
            atom = body.replace("\\\\", "\\").replace('\\"', '"').strip()
            if atom and not amp and not any(c in _WS for c in atom):
                atoms.add(atom)
    return atoms


# -- where tokens start --------------------------------------------------------------------------
@lru_cache(maxsize=8)
def _identifier(ident: IdentTable) -> re.Pattern:
    """Lean's identFn as one regex: parts (``isIdFirst isIdRest*`` or «quoted») joined by ``.``."""
    part = f"(?:«[^»]*»|[{ident.first}][{ident.rest}]*)"
    return re.compile(f"{part}(?:\\.{part})*")


def token_start(text: str, pos: int, floor: int, ident: IdentTable, table: TokenTable) -> bool | None:
    """Does a token start at ``pos``, lexing from ``floor`` (a known token start: after whitespace,
    a comment or a literal) as Lean does with ``table``? False: ``pos`` is inside a token (an
    identifier or a table token); None: the table cannot settle it (no token starts with a symbol
    on the way, a letter whose class the version does not pin, a numeral Lean versions read
    differently)."""
    i = floor
    while i < pos:
        c = text[i]
        if c in _WS:
            i += 1
            continue
        if ident.is_disputed(c):
            return None
        if "0" <= c <= "9":
            j = i + 1
            while j < pos and "0" <= text[j] <= "9":
                j += 1
            if j < len(text) and (ident.is_id_rest(text[j]) or text[j] == "."):
                # `0x1f`, `2e5`, `1.5`, `1_000`: where the numeral ends depends on the version
                k = j
                while k < len(text) and (ident.is_id_rest(text[k]) or text[k] in ".+-"):
                    k += 1
                if pos <= k:
                    return None
                j = k
            i = j
            continue
        if c in "'\"":
            return None  # a literal inside the run: the masker's caller has already passed it
        if c == "`" and i + 1 < len(text) and (ident.is_id_first(text[i + 1]) or text[i + 1] == "«"):
            i += 1  # a name literal: the identifier follows
            continue
        token = table.longest(text, i)
        if c == "«" or ident.is_id_first(c):
            name = _identifier(ident).match(text, i)
            if name is None:
                return None  # an unterminated «
            end = name.end()
            if token and len(token) >= end - i:  # mkIdResult: a keyword as long as the identifier wins
                end = i + len(token)
        elif token:
            end = i + len(token)
        else:
            return None  # no token of the table starts here: Lean's reading is not known
        if pos < end:
            return False
        i = end
    return True


def chunk_start(text: str, pos: int, lo: int = 0) -> int:
    """The start of the whitespace-free run that holds ``pos`` (not before ``lo``): tokens never
    hold whitespace, so Lean starts a token there (a «quoted name» with a space restarts at ``lo``)."""
    start = (
        max(text.rfind(" ", lo, pos), text.rfind("\n", lo, pos), text.rfind("\t", lo, pos), text.rfind("\r", lo, pos))
        + 1
    )
    start = max(start, lo)
    close = text.rfind("»", start, pos)
    if close >= 0 and text.rfind("«", start, close) < 0:
        line = text.rfind("\n", lo, start) + 1
        return max(line, lo)
    return start


def main(argv: list[str] | None = None) -> int:
    """``python -m leanloop.lean.acceptance.tokens extract ROOT...``: the atoms of every ``.lean`` file
    under the roots, one per line (a part of ``token_table.json`` is made from such a list)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "extract" or len(args) < 2:
        print("usage: python -m leanloop.lean.acceptance.tokens extract ROOT...", file=sys.stderr)
        return 2
    atoms: set[str] = set()
    for root in args[1:]:
        for path in sorted(Path(root).rglob("*.lean")):
            atoms |= extract_atoms(path.read_text(encoding="utf-8", errors="replace"))
    print("\n".join(sorted(atoms)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
