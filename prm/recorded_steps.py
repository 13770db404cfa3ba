"""The embedded default labels: recorded whole programs cut into top-level tactic steps, labelled
from Lean's recorded first error (through the Verifier on the replay backend), no generator model.

These are tactic-level labels from recorded Lean output: the prose of a step is the prover's own
comment above it where it wrote one, else the tactic text itself (the recordings carry no prose).
The reviewer (a scripted rule reviewer by default) reads each failing program's first error; a
failure it does not judge mathematical gives no negative labels.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from leanloop.jsonl import numbered_jsonl
from leanloop.lean.acceptance import AcceptancePolicy
from leanloop.lean.replay import ReplayBackend
from leanloop.lean.types import Outcome, VerifyRequest
from leanloop.lean.verifier import Verifier
from leanloop.paths import resolve_shared
from prm.config import RecordedConfig, SplitConfig
from prm.labelled_proofs import ProofRecord, theorem_split
from prm.labels_from_lean import StepLabel, as_dicts, labels_from_outcome
from prm.paired import PairedStep
from prm.review import Failure, Reviewer
from prm.steps import ProofShapeError, TacticStep, split_steps

LABELLER = "recorded_first_error"


def declaration(program: str, steps: list[TacticStep]) -> tuple[str, str]:
    """(header, statement): the text before the theorem's docstring/declaration, and the
    declaration up to its ``:= by`` (the trusted statement the proof's steps continue)."""
    lines = program.split("\n")
    first = steps[0].start.line - 1
    start = first
    while start > 0 and lines[start - 1].strip() and not lines[start - 1].startswith(("import", "open", "set_option")):
        start -= 1
    body = "\n".join(lines[start:first]).rstrip()
    header = "\n".join(lines[:start]).strip()
    return header, body


def review_recorded(
    labels: list[StepLabel],
    steps: list[TacticStep],
    statement: str,
    first: int | None,
    outcome: Outcome,
    reviewer: Reviewer | None,
) -> tuple[list[StepLabel], dict[str, Any] | None]:
    """The reviewer's reading of a recorded program's first failure. A failure it does not judge
    mathematical loses its negative labels: a syntax repair cannot be checked here (nobody
    recorded the repaired program), so it is not tried."""
    if reviewer is None or first is None:
        return labels, None
    output = "\n".join(m.data for m in outcome.messages if m.severity == "error")
    decision = reviewer.review(Failure(statement, tuple(PairedStep(s.prose, s.tactic) for s in steps), first, output))
    record = {"step": first, "verdict": decision.verdict, "reason": decision.reason, "repair": decision.repair}
    if decision.verdict == "mathematical":
        return labels, record
    why = f"dropped: reviewer judged the failure {decision.verdict} (a repair needs Lean; recorded answers only)"
    return [l if i < first else StepLabel(l.prose, l.tactic, None, why) for i, l in enumerate(labels)], record


def build_recorded(
    config: RecordedConfig,
    splits: SplitConfig,
    profile: AcceptancePolicy | str = "collection",
    progress: bool = True,
    reviewer: Reviewer | None = None,
) -> tuple[list[ProofRecord], Counter]:
    """Labelled proofs of the recorded programs, and counts (skipped shapes, categories, labels,
    the reviewer's verdicts)."""
    counts: Counter = Counter()
    cut: list[tuple[int, dict, list[TacticStep]]] = []
    for number, row in numbered_jsonl(resolve_shared(config.path)):
        if (
            config.limit is not None
            and len(cut) + sum(v for k, v in counts.items() if k.startswith("skipped:")) >= config.limit
        ):
            break
        try:
            cut.append((number, row, split_steps(row["code"], row.get("name"))))
        except ProofShapeError as error:
            counts[f"skipped:{error.reason}"] += 1
    verifier = Verifier(ReplayBackend(config.sources), profile)
    requests = [VerifyRequest(row["code"], name=row.get("name"), id=str(number)) for number, row, _ in cut]
    outcomes = _check(verifier, requests, progress)
    records = []
    for (number, row, steps), outcome in zip(cut, outcomes):
        labels, proof_label, first, reason = labels_from_outcome(steps, outcome)
        header, statement = declaration(row["code"], steps)
        labels, decision = review_recorded(labels, steps, statement, first, outcome, reviewer)
        if decision is not None:
            counts[f"reviewer:{decision['verdict']}"] += 1
        counts[f"category:{outcome.category.value}"] += 1
        counts["steps"] += len(steps)
        counts["labelled_steps"] += sum(l.label is not None for l in labels)
        counts["steps_from_comment"] += sum(s.prose_source == "comment" for s in steps)
        records.append(
            ProofRecord(
                proof_id=f"{row.get('custom_id', row.get('name'))}@{number}",
                name=row["name"],
                statement=statement,
                header=header,
                program=row["code"],
                steps=as_dicts(labels),
                proof_label=proof_label,
                first_error=first,
                category=outcome.category.value,
                lean_version=row.get("lean_version"),
                generator=str(row.get("prover")),
                source=str(row.get("source") or config.path),
                labeller=LABELLER,
                reason=reason,
                reviewer=[decision] if decision is not None else [],
                split=theorem_split(row["name"], splits.valid, splits.test, splits.seed),
            )
        )
    return records, counts


def _check(verifier: Verifier, requests: list[VerifyRequest], progress: bool):
    import asyncio

    from tqdm import tqdm

    bar = tqdm(total=len(requests), desc="[prm-label] recorded Lean answers", disable=not progress)

    def done(index, outcome):
        bar.update(1)

    try:
        return asyncio.run(verifier.check(requests, on_result=done))
    finally:
        bar.close()
