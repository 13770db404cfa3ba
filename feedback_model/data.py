"""Feedback-trace SFT data (``python -m feedback_model.train``): the corpus's (program, annotated
program) pairs (:mod:`feedback_model.pairs`: targets, what is dropped and why) tokenized with the loss
on the annotated program only, then packed into rows.

Every corpus row is accounted for in ``manifest_counts``: pairs per split and kind, rows with no
reference (by category), pairs over ``max_length`` (dropped before the seeded ``max_examples`` subset,
counted and listed by id: a pair is never truncated), pairs beyond ``max_examples``.
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import lightning as L
from torch.utils.data import DataLoader

from feedback_model.config import TraceFormat
from feedback_model.pairs import TracePair, pair_examples, read_corpus, trace_pairs
from leanloop.artifacts import resolve_run
from leanloop.training.models import ModelSpec, load_tokenizer
from leanloop.training.packing import collator_for, pack_examples


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

    def _subset(
        self,
        pairs: list[TracePair],
        examples: list[dict[str, list[int]]],
        limit: int | None,
        counts: Counter,
        prefix: str,
    ) -> tuple[list[TracePair], list[dict[str, list[int]]]]:
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
        train, train_examples = pair_examples(
            trace_pairs(rows, self.train_splits, counts),
            self.tokenizer,
            self.format,
            self.max_length,
            counts,
            "train",
            too_long["train"],
        )
        train, train_examples = self._subset(train, train_examples, self.max_examples, counts, "train")
        val, val_examples = [], []
        if self.val_split:
            val, val_examples = pair_examples(
                trace_pairs(rows, [self.val_split], counts),
                self.tokenizer,
                self.format,
                self.max_length,
                counts,
                "val",
                too_long["val"],
            )
            val, val_examples = self._subset(val, val_examples, self.max_val_examples, counts, "val")
        for prefix, ids in too_long.items():
            if ids:
                print(
                    f"[feedback] {len(ids)} {prefix} pair(s) over max_length={self.max_length} tokens dropped "
                    f"(never truncated): {', '.join(ids[:5])}{' ...' if len(ids) > 5 else ''}",
                    file=sys.stderr,
                )
        if not train_examples:
            raise ValueError(
                f"no feedback-trace pairs to train on from {self.corpus} (splits {self.train_splits}): "
                f"{dict(counts)}; check the corpus has reference traces and max_length"
            )
        self.train_rows = self._pack(train_examples)
        self.val_rows = self._pack(val_examples) if val_examples else []
        tokens = sum(len(e["input_ids"]) for e in train_examples)
        self.counts = {
            **dict(sorted(counts.items())),
            "train_tokens": tokens,
            "train_trace_tokens": sum(sum(t != -100 for t in e["labels"]) for e in train_examples),
            "train_rows": len(self.train_rows),
            "val_rows": len(self.val_rows),
            "train_row_fill": round(tokens / (len(self.train_rows) * self.max_length), 4),
            "train_valid_pairs": sum(p.label for p in train),
            "train_invalid_pairs": sum(not p.label for p in train),
            **{f"{prefix}_too_long_ids": ids for prefix, ids in too_long.items() if ids},
        }

    def _pack(self, examples: list[dict[str, list[int]]]) -> list:
        rows = pack_examples(examples, self.max_length)
        random.Random(self.seed).shuffle(rows)  # best-fit order puts all long rows first
        return rows

    def _loader(self, rows: list, shuffle: bool) -> DataLoader:
        return DataLoader(
            rows,
            batch_size=self.batch_size,
            shuffle=shuffle,
            collate_fn=collator_for(self.tokenizer, self.base.attn_implementation),
            num_workers=self.num_workers,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_rows, shuffle=True)

    def val_dataloader(self) -> DataLoader | list:
        return self._loader(self.val_rows, shuffle=False) if self.val_rows else []

    # -- hooks read by run_stage --------------------------------------------------------------
    def manifest_inputs(self) -> dict[str, Path]:
        return {"corpus": resolve_run(self.corpus, "data")}

    def manifest_counts(self) -> dict[str, Any]:
        return self.counts
