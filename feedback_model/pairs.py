"""Feedback-trace pairs: corpus rows -> (program, annotated program) -> tokenized examples with the
loss on the annotated program only. Plain functions with no Lightning import, shared by the SFT
data module (:mod:`feedback_model.data`), the evaluation (``make feedback-model-eval``) and the benchmark.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from feedback_model.config import TraceFormat
from leanloop.corpus import read_corpus as shared_read_corpus
from leanloop.training.packing import TooLongError, completion_example

CORPUS_COLUMNS = ("id", "program", "name", "split", "category", "label", "messages", "reference_trace", "trace_kind")


@dataclass(frozen=True)
class TracePair:
    id: str
    name: str
    split: str
    label: bool
    program: str
    trace: str
    kind: str  # full | errors_only | valid_no_states


def read_corpus(ref: str | Path, columns: Sequence[str] = CORPUS_COLUMNS) -> list[dict[str, Any]]:
    """The rows of a finished data-stage run that trace pairs are made from (leanloop.corpus)."""
    return shared_read_corpus(ref, columns)


def reference_trace(row: dict[str, Any]) -> tuple[str | None, str]:
    """(reference trace, kind) of a corpus row; (None, why) when it has none."""
    if row.get("reference_trace"):
        return row["reference_trace"], row.get("trace_kind") or "reference"
    if row.get("category") == "valid":
        from leanloop.traces import annotate

        return annotate(row["program"], row.get("messages") or [], []), "valid_no_states"
    return None, f"no_reference:{row.get('category')}"


def trace_pairs(rows: Iterable[dict[str, Any]], splits: Sequence[str], counts: Counter) -> list[TracePair]:
    """Pairs from the labelled rows of ``splits``; everything else is counted by reason."""
    wanted = set(splits)
    pairs = []
    for row in rows:
        if row.get("split") not in wanted:
            continue
        if row.get("label") is None:
            counts[f"{row['split']}/unlabelled:{row.get('category')}"] += 1
            continue
        trace, kind = reference_trace(row)
        if trace is None:
            counts[f"{row['split']}/{kind}"] += 1
            continue
        counts[f"{row['split']}/pairs:{kind}"] += 1
        pairs.append(
            TracePair(row["id"], row.get("name") or "", row["split"], bool(row["label"]), row["program"], trace, kind)
        )
    return pairs


def longest_token_chars(tokenizer: Any) -> int:
    """An upper bound on the characters one token spells: the longest vocabulary entry (byte-level
    BPE entries are one symbol per byte, and a character is at least one byte)."""
    return max(len(token) for token in tokenizer.get_vocab())


def pair_examples(
    pairs: Sequence[TracePair],
    tokenizer: Any,
    fmt: TraceFormat,
    max_length: int,
    counts: Counter,
    prefix: str,
    too_long: list[str] | None = None,
) -> tuple[list[TracePair], list[dict[str, list[int]]]]:
    """(kept pairs, their tokenized examples): prompt labels -100, trace + EOS trained. A pair over
    ``max_length`` tokens is dropped and counted (``<prefix>_too_long``, its id appended to
    ``too_long``), never truncated; one whose text is longer than ``max_length`` tokens could spell
    is dropped without tokenizing it (also counted as ``<prefix>_too_long_chars``)."""
    char_bound = max_length * longest_token_chars(tokenizer)
    kept, examples = [], []
    for pair in pairs:
        prompt = fmt.prompt(pair.program)
        try:
            if len(prompt) + len(pair.trace) > char_bound:
                counts[f"{prefix}_too_long_chars"] += 1
                raise TooLongError(f"{len(prompt) + len(pair.trace)} characters")
            examples.append(completion_example(tokenizer, prompt, pair.trace, max_length))
            kept.append(pair)
        except TooLongError:
            counts[f"{prefix}_too_long"] += 1
            if too_long is not None:
                too_long.append(pair.id)
    counts[f"{prefix}_examples"] += len(examples)
    return kept, examples
