"""Paired proofs: every step is one sentence of prose plus the Lean tactic that carries it out."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from leanloop.prover.prompt import CHATML_TEMPLATE

# rejection reasons (stable codes: counted in manifests and reports)
NO_STEPS = "no_steps"
TEXT_OUTSIDE_STEP = "text_outside_step"
STEP_ORDER = "step_order"
MISSING_PROSE = "missing_prose"
MISSING_TACTIC = "missing_tactic"
SEVERAL_TACTICS = "several_tactic_blocks"
EMPTY_TACTIC = "empty_tactic"
UNCLOSED_BLOCK = "unclosed_block"
PROSE_AFTER_TACTIC = "prose_after_tactic"
REJECTIONS = (
    NO_STEPS,
    TEXT_OUTSIDE_STEP,
    STEP_ORDER,
    MISSING_PROSE,
    MISSING_TACTIC,
    SEVERAL_TACTICS,
    EMPTY_TACTIC,
    UNCLOSED_BLOCK,
    PROSE_AFTER_TACTIC,
)

INSTRUCTION = (
    "Prove the following Lean 4 theorem step by step. Write each step as `Step N:` followed by one "
    "sentence saying what the step does mathematically, then a ```lean4 block holding the tactic that "
    "does it. The tactics, in order, must form the proof that follows `:= by`."
)

_STEP = re.compile(r"^Step\s+(\d+)\s*[:.]\s?(.*)$")
_FENCE_OPEN = re.compile(r"^```\s*(lean4?|)\s*$")
_FENCE_CLOSE = "```"


class PairedFormatError(ValueError):
    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class PairedStep:
    prose: str
    tactic: str


def render_paired(steps: Sequence[PairedStep]) -> str:
    """The text a generator is trained / asked to produce for these steps."""
    return "\n".join(f"Step {i}: {s.prose}\n```lean4\n{s.tactic}\n```" for i, s in enumerate(steps, 1))


def parse_paired(text: str) -> list[PairedStep]:
    """The steps of a paired completion, or :class:`PairedFormatError` saying what is wrong."""
    steps: list[PairedStep] = []
    prose: list[str] | None = None  # the current step's prose lines (None: no step open)
    tactics: list[str] = []
    code: list[str] | None = None  # inside a fence
    number = 0

    def close_step() -> None:
        if prose is None:
            return
        sentence = " ".join(p.strip() for p in prose if p.strip())
        if not sentence:
            raise PairedFormatError(MISSING_PROSE, f"step {number} has a tactic but no sentence")
        if not tactics:
            raise PairedFormatError(MISSING_TACTIC, f"step {number} ({sentence[:60]!r}) has no ```lean4 block")
        if len(tactics) > 1:
            raise PairedFormatError(SEVERAL_TACTICS, f"step {number} has {len(tactics)} code blocks; one per step")
        steps.append(PairedStep(sentence, tactics[0]))

    for line_number, line in enumerate(text.replace("\r\n", "\n").split("\n"), 1):
        if code is not None:
            if line.strip() == _FENCE_CLOSE:
                tactic = "\n".join(code).strip("\n")
                if not tactic.strip():
                    raise PairedFormatError(EMPTY_TACTIC, f"step {number}'s code block is empty")
                tactics.append(_dedent(tactic))
                code = None
            else:
                code.append(line)
            continue
        header = _STEP.match(line.strip())
        if header:
            close_step()
            if int(header.group(1)) != number + 1:
                raise PairedFormatError(STEP_ORDER, f"line {line_number}: step {header.group(1)} follows step {number}")
            number += 1
            prose, tactics = [header.group(2)], []
            continue
        if _FENCE_OPEN.match(line.strip()):
            if prose is None:
                raise PairedFormatError(TEXT_OUTSIDE_STEP, f"line {line_number}: a code block before any `Step N:`")
            code = []
            continue
        if not line.strip():
            continue
        if prose is None:
            raise PairedFormatError(TEXT_OUTSIDE_STEP, f"line {line_number}: {line.strip()[:60]!r} is not in a step")
        if tactics:
            raise PairedFormatError(PROSE_AFTER_TACTIC, f"line {line_number}: text after step {number}'s tactic")
        prose.append(line)
    if code is not None:
        raise PairedFormatError(UNCLOSED_BLOCK, f"step {number}'s code block is never closed")
    close_step()
    if not steps:
        raise PairedFormatError(NO_STEPS, "no `Step N:` found")
    return steps


def _dedent(block: str) -> str:
    lines = block.split("\n")
    indent = min((len(l) - len(l.lstrip()) for l in lines if l.strip()), default=0)
    return "\n".join(l[indent:] for l in lines)


def assemble_program(
    header: str, statement: str, tactics: Sequence[str], *, context: str = "", indent: str = "  "
) -> str:
    """Trusted header (+ context) + trusted statement ending in ``:= by`` + the tactics in order,
    each (all its lines) indented under the ``by``."""
    if not statement.rstrip().endswith("by"):
        raise ValueError(f"the statement must end with ':= by' to take tactics; got ...{statement.rstrip()[-40:]!r}")
    body = "\n".join(indent + line if line.strip() else line for t in tactics for line in t.split("\n"))
    parts = [p.rstrip("\n") for p in (header, context) if p and p.strip()]
    parts.append(statement.rstrip() + ("\n" + body if body else ""))
    return "\n\n".join(parts)


def render_paired_prompt(
    formal_statement: str, tokenizer: Any, informal: str | None = None, system: str | None = None
) -> str:
    """The generator's chat prompt for one statement (the tokenizer's chat template, or ChatML when it
    has none, as :func:`leanloop.prover.prompt.render_prompt` does)."""
    problem = f"{informal.strip()}\n\n" if informal else ""
    messages = [{"role": "system", "content": system}] if system else []
    messages.append(
        {"role": "user", "content": f"{INSTRUCTION}\n\n{problem}```lean4\n{formal_statement.rstrip()}\n```"}
    )
    template = None if getattr(tokenizer, "chat_template", None) else CHATML_TEMPLATE
    return tokenizer.apply_chat_template(messages, chat_template=template, tokenize=False, add_generation_prompt=True)
