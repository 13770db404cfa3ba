"""SFT pairs from proofs: split a program into its statement prefix (ending in ``by``) and its proof.

The split is done on the program itself, so the prompt is exactly the text the proof was written
against (header, docstring, auxiliary declarations), in the same shape sampling uses
(:attr:`leanloop.prover.statements.Statement.prompt`). Comments and strings are masked first, so a ``:=`` in a
docstring cannot be mistaken for the statement's end.
"""

from __future__ import annotations

import re

from leanloop.lean.acceptance.masking import mask

_OPEN, _CLOSE = "([{⦃⟨", ")]}⦄⟩"
_BY = re.compile(r"\s*by\b")
_ANY_DECLARATION = re.compile(
    r"^(?:@\[[^\]]*\]\s*)?(?:(?:private|protected|noncomputable)\s+)*(?:theorem|lemma)\s+"
    r"([^\s(:{\[⦃]+)",
    re.M,
)


class SplitError(ValueError):
    """The program has no ``theorem NAME ... := by`` to split at. ``kind`` names the case
    (``no_declaration``, ``term_mode``, ``no_assignment``) for counting."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


def _declaration(masked: str, theorem: str) -> re.Match:
    pattern = re.compile(
        r"^(?:@\[[^\]]*\]\s*)?(?:(?:private|protected|noncomputable)\s+)*"
        r"(?:theorem|lemma|def|abbrev|instance)\s+" + re.escape(theorem) + r"(?=[\s(:{\[⦃])",
        re.M,
    )
    matches = list(pattern.finditer(masked))
    if not matches:
        raise SplitError(f"program does not declare '{theorem}'", "no_declaration")
    return matches[-1]


def target_theorem(program: str, name: str) -> str:
    """The declaration a corpus row proves: ``name`` when the program declares it, else the last
    theorem (MOBench-style rows whose problem id differs from the theorem's name)."""
    masked = mask(program).text
    try:
        _declaration(masked, name)
        return name
    except SplitError:
        found = _ANY_DECLARATION.findall(masked)
        if not found:
            raise SplitError(f"program for '{name}' declares no theorem", "no_declaration") from None
        return found[-1]


def split_program(program: str, theorem: str) -> tuple[str, str]:
    """(statement prefix ending in ``by``, proof) for the declaration of ``theorem``."""
    masked = mask(program).text
    start = _declaration(masked, theorem).end()
    depth = 0
    for index in range(start, len(masked) - 1):
        char = masked[index]
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth -= 1
        elif depth == 0 and masked.startswith(":=", index):
            by = _BY.match(masked, index + 2)
            if by is None:
                raise SplitError(
                    f"'{theorem}' has a term-mode proof (':=' not followed by 'by'); SFT prompts end in ':= by'",
                    "term_mode",
                )
            return program[: by.end()], program[by.end() :]
    raise SplitError(f"no top-level ':=' after the signature of '{theorem}'", "no_assignment")
