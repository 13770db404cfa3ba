"""Feedback-quality metrics between a reference trace and a predicted one (seed App. D)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Hashable, Iterable, Sequence

import numpy as np

from leanloop.traces.parse import ERROR_RE, FeedbackBlock, extract_blocks

TOKEN_RE = re.compile(r"\w+|[^\w\s]")
FEEDBACK_METRICS = ("block_f1", "anchored_block_f1", "token_f1", "error_agreement")


def multiset_f1(reference: Iterable[Hashable], prediction: Iterable[Hashable]) -> float:
    """``2|R ∩ P| / (|R| + |P|)``; 1.0 when both are empty, 0.0 when exactly one is."""
    ref, pred = Counter(reference), Counter(prediction)
    total = sum(ref.values()) + sum(pred.values())
    if total == 0:
        return 1.0
    overlap = sum((ref & pred).values())
    return 2.0 * overlap / total


def block_keys(trace: str, blocks: Sequence[FeedbackBlock] | None = None) -> list[str]:
    return [block.key for block in (extract_blocks(trace) if blocks is None else blocks)]


def anchored_block_keys(trace: str, blocks: Sequence[FeedbackBlock] | None = None) -> list[tuple[int, str]]:
    """``(non-empty source lines before the block, content)`` for each block of one side."""
    out: list[tuple[int, str]] = []
    anchor, cursor, pending = 0, 0, ""
    for block in extract_blocks(trace) if blocks is None else blocks:
        # The source before this block with earlier blocks removed: count its complete lines once,
        # carry the unfinished last line (it may continue after the block).
        source = pending + trace[cursor : block.start]
        *complete, pending = source.split("\n")
        anchor += sum(1 for line in complete if line.strip())
        out.append((anchor + (1 if pending.strip() else 0), block.key))
        cursor = block.end
    return out


def trace_tokens(trace: str, blocks: Sequence[FeedbackBlock] | None = None) -> list[str]:
    return [
        token
        for block in (extract_blocks(trace) if blocks is None else blocks)
        for token in TOKEN_RE.findall(block.body)
    ]


def has_error(trace: str) -> bool:
    return bool(ERROR_RE.search(trace))


@dataclass(frozen=True)
class FeedbackScores:
    block_f1: float
    anchored_block_f1: float
    token_f1: float
    error_agreement: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def feedback_scores(reference: str, prediction: str) -> FeedbackScores:
    """The four metrics for one program."""
    ref_blocks, pred_blocks = extract_blocks(reference), extract_blocks(prediction)
    return FeedbackScores(
        block_f1=multiset_f1(block_keys(reference, ref_blocks), block_keys(prediction, pred_blocks)),
        anchored_block_f1=multiset_f1(
            anchored_block_keys(reference, ref_blocks), anchored_block_keys(prediction, pred_blocks)
        ),
        token_f1=multiset_f1(trace_tokens(reference, ref_blocks), trace_tokens(prediction, pred_blocks)),
        error_agreement=float(has_error(reference) == has_error(prediction)),
    )


def is_missing(reference: str | None) -> bool:
    return reference is None or (isinstance(reference, float) and np.isnan(reference)) or not str(reference).strip()


def feedback_metrics(references: Sequence[str | None], predictions: Sequence[str | None]) -> dict[str, object]:
    """Per-program scores averaged over programs. A missing prediction scores as an empty trace;
    a missing or blank reference removes the row (counted in ``n_excluded``).

    Returns ``{block_f1, anchored_block_f1, token_f1, error_agreement}`` (means, NaN when no row
    is left), ``n`` (rows scored), ``n_excluded`` and ``per_program`` (list of score dicts, None for
    excluded rows, aligned with the input)."""
    if len(references) != len(predictions):
        raise ValueError(f"{len(references)} references but {len(predictions)} predictions: they must pair up")
    per_program: list[dict[str, float] | None] = []
    for reference, prediction in zip(references, predictions):
        if is_missing(reference):
            per_program.append(None)
            continue
        predicted = "" if prediction is None or (isinstance(prediction, float) and np.isnan(prediction)) else prediction
        per_program.append(feedback_scores(str(reference), str(predicted)).to_dict())
    scored = [row for row in per_program if row is not None]
    means = {
        name: (float(np.mean([row[name] for row in scored])) if scored else float("nan")) for name in FEEDBACK_METRICS
    }
    return {**means, "n": len(scored), "n_excluded": len(per_program) - len(scored), "per_program": per_program}
