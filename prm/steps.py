"""A whole Lean program's proof cut into top-level tactic steps, with the prover's own comments.

Used for the embedded default (recorded RL-Lean programs, no paired prose): the proof of the target
theorem is the tactic block after its ``:= by``; a step is one top-level tactic (the lines at the
block's indentation) together with its continuation lines (deeper indentation, and ``<;>`` lines at
the same indentation, which chain onto the tactic above). A ``--`` or ``/- -/`` comment at the top
level right above a tactic is that step's prose; otherwise the prose is the tactic text itself
(``prose_source`` says which). Positions are 1-based lines of the full program, as Lean reports them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from leanloop.lean.types import LeanMessage, Position


class ProofShapeError(ValueError):
    """The program has no top-level tactic proof of the named theorem that can be cut into steps."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclass(frozen=True)
class TacticStep:
    tactic: str  # dedented text, continuation lines included
    prose: str
    prose_source: str  # "comment" | "tactic"
    start: Position  # first character of the tactic
    end_line: int  # last line of the tactic (inclusive)
    by_line: int = 0  # line of the proof's `:= by` (where Lean puts the goals left open at the end)


def _declaration_line(lines: list[str], theorem: str | None) -> int:
    pattern = re.compile(r"^\s*(?:@\[[^\]]*\]\s*)?(?:private\s+|protected\s+)?(?:theorem|lemma)\s+(\S+)")
    for number, line in enumerate(lines):
        found = pattern.match(line)
        if found and (theorem is None or found.group(1) == theorem):
            return number
    raise ProofShapeError("no_theorem", f"no `theorem {theorem or ''}` declaration")


def _proof_start(lines: list[str], start: int) -> tuple[int, int]:
    """(line index, column) just after the ``by`` that opens the declaration's tactic proof."""
    for number in range(start, len(lines)):
        found = re.search(r":=\s*by\b", lines[number])
        if found:
            return number, found.end()
        if number > start and lines[number] and not lines[number][0].isspace():
            break  # the next top-level declaration: this one was not proved by tactics
    raise ProofShapeError("not_tactic_proof", "the theorem is not proved by a `:= by` tactic block")


def split_steps(program: str, theorem: str | None = None) -> list[TacticStep]:
    """The top-level tactic steps of ``theorem``'s proof in ``program`` (see the module docstring)."""
    lines = program.replace("\r\n", "\n").split("\n")
    decl = _declaration_line(lines, theorem)
    by_line, by_column = _proof_start(lines, decl)
    if lines[by_line][by_column:].strip() and not lines[by_line][by_column:].strip().startswith("--"):
        raise ProofShapeError("one_line_proof", "tactics on the `:= by` line itself are not split into steps")
    body = []
    for number in range(by_line + 1, len(lines)):
        line = lines[number]
        if line.strip() and not line[0].isspace():
            break  # next top-level command
        body.append(number)
    indents = [len(lines[n]) - len(lines[n].lstrip()) for n in body if lines[n].strip()]
    if not indents:
        raise ProofShapeError("empty_proof", "the tactic block is empty")
    top = min(indents)
    steps: list[TacticStep] = []
    comment: list[str] = []
    in_block_comment = False
    current: list[int] = []

    def flush() -> None:
        nonlocal comment
        if not current:
            return
        text = "\n".join(lines[n][top:] for n in current).rstrip()
        prose = " ".join(comment).strip()
        steps.append(
            TacticStep(
                text,
                prose or text,
                "comment" if prose else "tactic",
                Position(current[0] + 1, top),
                current[-1] + 1,
                by_line + 1,
            )
        )
        comment = []

    for number in body:
        line = lines[number]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if in_block_comment:
            comment.append(stripped.replace("-/", "").strip())
            in_block_comment = "-/" not in stripped
            continue
        if not stripped:
            continue
        if indent == top and (stripped.startswith("--") or stripped.startswith("/-")):
            flush()
            current = []
            if stripped.startswith("--"):
                comment.append(stripped.lstrip("-").strip())
            else:
                comment.append(stripped.lstrip("/-").replace("-/", "").strip())
                in_block_comment = "-/" not in stripped[2:]
            continue
        if indent == top and not stripped.startswith("<;>"):
            flush()
            current = [number]
        elif current:
            current.append(number)
        else:
            raise ProofShapeError("bad_indentation", f"line {number + 1} continues no tactic")
    flush()
    if not steps:
        raise ProofShapeError("empty_proof", "the tactic block has only comments")
    return steps


def step_of_position(steps: list[TacticStep], position: Position) -> int | None:
    """Index of the step whose lines hold ``position``; None when it lies before the first step
    (the ``by`` block itself: Lean puts "unsolved goals" of the whole proof there)."""
    for index in reversed(range(len(steps))):
        if (position.line, position.column) >= (steps[index].start.line, 0):
            return index
    return None


def first_failing_step(steps: list[TacticStep], errors: list[LeanMessage]) -> tuple[int | None, LeanMessage] | None:
    """The earliest step holding an error, with that error. An error positioned on the proof's
    ``by`` (no step holds it: the goals left open when the block ends) falls to the last step,
    which claimed to finish the proof. Any other error outside every step (no position, the
    header or statement) blames no step: ``(None, error)``. None when there are no errors."""
    located = [(step_of_position(steps, e.pos), e) for e in errors if e.pos is not None]
    inside = [(i, e) for i, e in located if i is not None]
    if inside:
        return min(inside, key=lambda pair: (pair[0], pair[1].pos.line, pair[1].pos.column))
    on_by = [e for e in errors if e.pos is not None and steps and e.pos.line == steps[0].by_line]
    if on_by:
        return len(steps) - 1, on_by[0]
    if errors:
        return None, errors[0]
    return None
