"""Search problems whose found proofs the Verifier can answer: recorded programs that Lean accepted,
with the goals before each of their tactics.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from leanloop.lean.acceptance import AcceptancePolicy
from leanloop.lean.acceptance.submission import verbatim
from leanloop.lean.recordings import Recording, RecordingIndex
from leanloop.lean.types import Category, TacticRecord, VerifyRequest
from leanloop.prover.statements import Statement, StatementError, split_statement
from search.env import ReplayEnv
from search.goals import NO_GOALS
from search.trees import Transition, TreeNode, build_tree

# REPL session recordings: the sources whose replies carry per-tactic goals (``allTactics``)
REPL_SOURCES: tuple[str, ...] = ("repl_io", "repl_all_versions")
_COLLECTION = AcceptancePolicy("collection", header=None)


@dataclass
class RecordedProblem:
    """A theorem of a recorded program: ``statement.name`` is unique across problems (the declared
    name is ``statement.theorem``), ``program`` is the recorded program it came from."""

    statement: Statement
    program: str
    tree: TreeNode
    transitions: list[Transition] = field(default_factory=list)


def accepted(recording: Recording) -> bool:
    """Lean's recorded answer passes the collection rule (an answer, no error, no ``sorry``
    warning), so every tactic block of the program closed its goals."""
    request = VerifyRequest(program=recording.program)
    return _COLLECTION.judge(request, verbatim(recording.program), recording.response).category is Category.VALID


def _offset(lines: list[str], line: int, column: int) -> int:
    """A Lean position (1-based line, 0-based codepoint column) as an index into the text."""
    return sum(len(l) + 1 for l in lines[: line - 1]) + column


def top_level_tactics(records: Sequence[TacticRecord]) -> list[TacticRecord]:
    """The records in text order without those inside an earlier record's span."""
    ordered = sorted(records, key=lambda r: (r.pos.line, r.pos.column))
    out: list[TacticRecord] = []
    for record in ordered:
        start = (record.pos.line, record.pos.column)
        if any(
            r.end_pos is not None and (r.pos.line, r.pos.column) <= start < (r.end_pos.line, r.end_pos.column)
            for r in out
        ):
            continue
        out.append(record)
    return out


def problems_from_recording(recording: Recording) -> tuple[list[RecordedProblem], Counter]:
    """The theorems of one recorded program whose tactic proof can be replayed, and why others
    could not."""
    skipped: Counter = Counter()
    response = recording.response
    if not response.tactics:
        return [], Counter(no_tactic_records=1)
    if not accepted(recording):
        return [], Counter(not_accepted=1)
    program = recording.program.replace("\r\n", "\n")
    lines = program.split("\n")
    # a top-level tactic right after a declaration's `:= by` opens that declaration's proof
    blocks: list[tuple[tuple[str, str, str, str] | None, list[TacticRecord]]] = []
    for record in top_level_tactics(response.tactics):
        try:
            opened = split_statement(program[: _offset(lines, record.pos.line, record.pos.column)])
        except StatementError:
            opened = None
        if opened is not None or not blocks:
            blocks.append((opened, []))
        blocks[-1][1].append(record)
    problems = []
    for opened, records in blocks:
        if opened is None or opened[2].split(None, 1)[0] not in ("theorem", "lemma"):
            skipped["not_a_theorem_proof"] += 1  # a def / example / instance, or a term-mode start
            continue
        header, context, declaration, theorem = opened
        steps = [
            {
                "tactic_idx": i,
                "tactic": r.tactic,
                "state_before": r.goals,
                "state_after": records[i + 1].goals if i + 1 < len(records) else NO_GOALS,
            }
            for i, r in enumerate(records)
        ]
        built = build_tree(steps)
        if built.tree is None:
            skipped[built.drop.value] += 1
            continue
        name = f"{theorem}@{recording.record_id}"
        statement = Statement(
            name=name, theorem=theorem, header=header, context=context, statement=declaration, source=recording.source
        )
        problems.append(RecordedProblem(statement, recording.program, built.tree, built.transitions))
    return problems, skipped


def recorded_problems(sources: Iterable[str] = REPL_SOURCES) -> tuple[list[RecordedProblem], Counter]:
    """Every replayable theorem of the recordings, from the recording a replay backend over the same
    sources answers with (the first of a program's recordings)."""
    problems: list[RecordedProblem] = []
    skipped: Counter = Counter()
    for _, recordings in RecordingIndex(sources):
        found, why = problems_from_recording(recordings[0])
        problems += found
        skipped.update(why)
    return problems, skipped


def recorded_env(problems: Sequence[RecordedProblem]) -> ReplayEnv:
    """The replay environment over the problems' recorded steps; each problem starts by its name."""
    transitions = [
        {"state": t.state, "tactic": t.tactic, "result": list(t.result)} for p in problems for t in p.transitions
    ]
    return ReplayEnv(transitions, {p.statement.name: p.tree.state for p in problems})


__all__ = [
    "REPL_SOURCES",
    "RecordedProblem",
    "accepted",
    "problems_from_recording",
    "recorded_env",
    "recorded_problems",
    "top_level_tactics",
]
