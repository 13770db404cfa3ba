"""Turn a prover's raw output into a Lean program, or say why it cannot.

Two output styles exist in the wild and both are handled:
- reasoning / chat provers (Kimina-Prover, Goedel-Prover-V2) end with a fenced ```lean4 block holding
  the whole program: the LAST complete lean block is taken (earlier blocks are drafts; ```tactics
  and other languages are ignored);
- completion provers (DeepSeek-Prover-V1.5 and its RL-Lean descendants) continue the statement: the
  program is the prompt followed by the continuation, cut at a stray closing fence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A complete block: an opening fence tagged lean/lean4 at a line start, a body, a closing fence.
_BLOCK = re.compile(r"^[ \t]*```[ \t]*lean4?[ \t]*\n(.*?)^[ \t]*```", re.M | re.S)
_OPEN_LEAN = re.compile(r"^[ \t]*```[ \t]*lean4?[ \t]*$", re.M)
_FENCE = re.compile(r"^[ \t]*```", re.M)
_IMPORT = re.compile(r"^import\s", re.M)


@dataclass(frozen=True)
class Extraction:
    program: str | None
    method: str | None  # "code_block" | "continuation" | None when nothing was extracted
    reason: str | None = None  # why nothing (or something odd) was extracted

    @property
    def ok(self) -> bool:
        return self.program is not None


def declares(program: str, theorem: str) -> bool:
    """Whether ``program`` contains a top-level declaration of ``theorem``."""
    pattern = (
        r"^(?:@\[[^\]]*\]\s*)?(?:(?:private|protected|noncomputable)\s+)*"
        r"(?:theorem|lemma|def|abbrev|instance)\s+" + re.escape(theorem) + r"(?=[\s(:{\[⦃])"
    )
    return re.search(pattern, program, re.M) is not None


def last_lean_block(text: str) -> str | None:
    blocks = _BLOCK.findall(text)
    return blocks[-1] if blocks else None


def extract_program(
    completion: str, prompt: str, header: str, theorem: str, allow_continuation: bool = True
) -> Extraction:
    """The program a completion proposes for the statement whose program prefix is ``prompt``.

    ``prompt`` is header + context + statement (ending in ``by``); ``header`` is prepended to a code
    block that omits its imports, because the harness fixes the header anyway. Without a lean block,
    the completion is read as the proof continuing ``prompt`` only if ``allow_continuation`` (raw
    prompts); a chat answer without a block has no program.
    """
    block = last_lean_block(completion)
    if block is not None:
        if not declares(block, theorem):
            return Extraction(None, None, f"last lean code block does not declare '{theorem}'")
        program = block.rstrip()
        if not _IMPORT.search(program):
            program = header + program  # the harness fixes the header; blocks may omit it
        return Extraction(program, "code_block")
    if _OPEN_LEAN.search(completion):
        return Extraction(None, None, "lean code block opened but never closed (output cut at the token limit?)")
    if not allow_continuation:
        return Extraction(None, None, "no complete lean code block in the answer")
    fence = _FENCE.search(completion)
    continuation = completion[: fence.start()] if fence else completion
    if not continuation.strip():
        return Extraction(
            None,
            None,
            "empty completion"
            if not completion.strip()
            else "no lean code block and no proof text before the first fence",
        )
    return Extraction(prompt + continuation.rstrip(), "continuation")
