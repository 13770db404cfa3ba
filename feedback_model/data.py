"""Feedback-trace SFT data: corpus rows -> (program, annotated program) pairs -> packed rows with the
loss on the annotated program only.

Targets are the data stage's reference traces (``leanloop.traces.annotate`` over Lean's recorded
answer): a full trace where Lean gave tactic records, an error-only trace for an invalid program
Lean answered with messages only (the RL-Lean recordings). A *valid* program Lean answered without
tactic records has no reference in the corpus (``data.build`` writes none: there is nothing to add),
but the feedback model must see valid programs too, or it learns that every trace ends in an error;
its target is the same annotator run on the same recorded messages, which is the normalized program
with no block (kind ``valid_no_states``). Rows without a label (timeouts, no recording, input
errors) and rows Lean never answered (``precheck_rejected``) have no trace and are counted, not used.

Every corpus row is accounted for in ``manifest_counts``: pairs per split and kind, rows with no
reference (by category), pairs over ``max_length`` (dropped, counted and listed by id: a pair is never
truncated). Recorded Lean answers can be huge (one RL-Lean error message is 1.1M characters, its
trace 2.4M), so a pair whose text is longer than any ``max_length``-token sequence could spell is
dropped before it is tokenized; the rest are tokenized and dropped when over ``max_length`` tokens.
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import lightning as L
from torch.utils.data import DataLoader

from feedback_model.config import TraceFormat
from leanloop.artifacts import read_manifest
from leanloop.paths import artifacts_root, resolve_shared
from leanloop.training.models import ModelSpec, load_tokenizer
from leanloop.training.packing import PackedCollator, TooLongError, completion_example, needs_flattening, pack_examples

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


def corpus_folder(ref: str | Path) -> Path:
    """A data run folder from ``artifacts://data/<run>``, the folder, or its ``final/``."""
    text = str(ref)
    folder = artifacts_root() / text[len("artifacts://"):] if text.startswith("artifacts://") else resolve_shared(text)
    if folder.name == "final" and (folder.parent / "manifest.json").is_file():
        folder = folder.parent
    return folder


def read_corpus(ref: str | Path, columns: Sequence[str] = CORPUS_COLUMNS) -> list[dict[str, Any]]:
    """Rows of a finished data-stage run (its manifest is checked first)."""
    import pyarrow.parquet as pq

    folder = corpus_folder(ref)
    read_manifest(folder, stage="data")
    files = sorted((folder / "final").rglob("*.parquet"))
    if not files:
        raise FileNotFoundError(f"{folder}/final holds no parquet files: not a finished corpus run")
    schema = pq.read_schema(files[0]).names
    missing = [c for c in columns if c not in schema]
    if missing:
        raise KeyError(f"corpus {folder} lacks columns {missing}; rebuild it with the data stage (`make data`)")
    return [row for file in files for row in pq.read_table(file, columns=list(columns)).to_pylist()]


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
        pairs.append(TracePair(row["id"], row.get("name") or "", row["split"], bool(row["label"]),
                               row["program"], trace, kind))
    return pairs


def longest_token_chars(tokenizer: Any) -> int:
    """An upper bound on the characters one token spells: the longest vocabulary entry (byte-level
    BPE entries are one symbol per byte, and a character is at least one byte)."""
    return max(len(token) for token in tokenizer.get_vocab())


def pair_examples(pairs: Sequence[TracePair], tokenizer: Any, fmt: TraceFormat, max_length: int,
                  counts: Counter, prefix: str, too_long: list[str] | None = None,
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


class FeedbackData(L.LightningDataModule):
    def __init__(
        self,
        corpus: str = "artifacts://data/default",
        train_splits: list[str] | None = None,
        val_split: str | None = "valid",
        max_length: int = 4096,
        batch_size: int = 1,
        max_examples: int | None = None,
        max_val_examples: int | None = None,
        num_workers: int = 0,
        seed: int = 0,
        format: TraceFormat | None = None,
        base: ModelSpec | None = None,
    ) -> None:
        """``corpus``: the data stage's run (``artifacts://data/<run>``). ``train_splits``: its splits
        trained on (default ``[train]``); ``val_split``: validation loss (None: none). ``max_length``:
        tokens per packed row and the longest pair kept (paper: 32,768). ``batch_size``: packed rows
        per micro-batch (effective batch = batch_size x accumulate_grad_batches x devices).
        ``max_examples`` / ``max_val_examples``: keep a seeded random subset (CPU defaults, debug).
        ``format`` and ``base`` are linked from the model section."""
        super().__init__()
        self.corpus = corpus
        self.train_splits = list(train_splits or ["train"])
        self.val_split = val_split
        self.max_length = max_length
        self.batch_size = batch_size
        self.max_examples = max_examples
        self.max_val_examples = max_val_examples
        self.num_workers = num_workers
        self.seed = seed
        self.format = format or TraceFormat()
        self.base = base or ModelSpec("qwen3-tiny")
        self.counts: dict[str, Any] = {}
        self.train_rows: list = []
        self.val_rows: list = []

    def _subset(self, pairs: list[TracePair], examples: list[dict[str, list[int]]], limit: int | None,
                counts: Counter, prefix: str) -> tuple[list[TracePair], list[dict[str, list[int]]]]:
        """A seeded random ``limit`` of the (pair, example)s that fit; the rest counted."""
        if limit is None or len(pairs) <= limit:
            return pairs, examples
        counts[f"{prefix}_over_max_examples"] += len(pairs) - limit
        counts[f"{prefix}_examples"] -= len(pairs) - limit
        keep = sorted(random.Random(self.seed).sample(range(len(pairs)), limit))
        return [pairs[i] for i in keep], [examples[i] for i in keep]

    def setup(self, stage: str | None = None) -> None:
        if self.train_rows:
            return
        self.tokenizer = load_tokenizer(self.base)
        counts: Counter = Counter()
        too_long: dict[str, list[str]] = {"train": [], "val": []}
        rows = read_corpus(self.corpus)
        # over-length pairs are dropped before the seeded subset: the counts cover the whole split
        train, train_examples = pair_examples(trace_pairs(rows, self.train_splits, counts), self.tokenizer,
                                              self.format, self.max_length, counts, "train", too_long["train"])
        train, train_examples = self._subset(train, train_examples, self.max_examples, counts, "train")
        val, val_examples = [], []
        if self.val_split:
            val, val_examples = pair_examples(trace_pairs(rows, [self.val_split], counts), self.tokenizer,
                                              self.format, self.max_length, counts, "val", too_long["val"])
            val, val_examples = self._subset(val, val_examples, self.max_val_examples, counts, "val")
        for prefix, ids in too_long.items():
            if ids:
                print(f"[feedback] {len(ids)} {prefix} pair(s) over max_length={self.max_length} tokens dropped "
                      f"(never truncated): {', '.join(ids[:5])}{' ...' if len(ids) > 5 else ''}", file=sys.stderr)
        if not train_examples:
            raise ValueError(f"no feedback-trace pairs to train on from {self.corpus} (splits {self.train_splits}): "
                             f"{dict(counts)}; check the corpus has reference traces and max_length")
        self.train_rows = self._pack(train_examples)
        self.val_rows = self._pack(val_examples) if val_examples else []
        tokens = sum(len(e["input_ids"]) for e in train_examples)
        self.counts = {
            **dict(sorted(counts.items())),
            "train_tokens": tokens,
            "train_trace_tokens": sum(sum(t != -100 for t in e["labels"]) for e in train_examples),
            "train_rows": len(self.train_rows), "val_rows": len(self.val_rows),
            "train_row_fill": round(tokens / (len(self.train_rows) * self.max_length), 4),
            "train_valid_pairs": sum(p.label for p in train), "train_invalid_pairs": sum(not p.label for p in train),
            **{f"{prefix}_too_long_ids": ids for prefix, ids in too_long.items() if ids},
        }

    def _pack(self, examples: list[dict[str, list[int]]]) -> list:
        rows = pack_examples(examples, self.max_length)
        random.Random(self.seed).shuffle(rows)  # best-fit order puts all long rows first
        return rows

    def _loader(self, rows: list, shuffle: bool) -> DataLoader:
        collator = PackedCollator(self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None
                                  else self.tokenizer.eos_token_id,
                                  flatten=needs_flattening(self.base.attn_implementation))
        return DataLoader(rows, batch_size=self.batch_size, shuffle=shuffle, collate_fn=collator,
                          num_workers=self.num_workers)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_rows, shuffle=True)

    def val_dataloader(self) -> DataLoader | list:
        return self._loader(self.val_rows, shuffle=False) if self.val_rows else []

    # -- hooks read by run_stage --------------------------------------------------------------
    def manifest_inputs(self) -> dict[str, Path]:
        return {"corpus": corpus_folder(self.corpus)}

    def manifest_counts(self) -> dict[str, Any]:
        return self.counts
