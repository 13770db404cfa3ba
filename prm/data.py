"""The step verifier's data: (statement, numbered prose steps) -> Lean's step labels.

Proofs come from a prm-label run (``dataset: artifacts://prm_label/<run>``) or, with ``dataset: null``,
from the embedded default labels built in memory (``recorded``). A proof trains on its longest
prefix of labelled steps (:func:`prm.labels_from_lean.training_prefix`), cut at ``max_proof_steps``.
``mode`` (linked from ``model.mode``): ``sft`` batches are tokenized proofs with loss on the label
tokens and the end of turn only; ``grpo`` batches are the examples themselves (the module samples
answers). ``layout`` (linked from ``model.layout``): where the labels go (:mod:`prm.verifier_io`).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import lightning as L
import torch
from torch.utils.data import DataLoader

from leanloop.artifacts import resolve_run
from leanloop.training.models import ModelSpec, load_tokenizer
from prm.config import RecordedConfig, SplitConfig
from prm.labelled_proofs import LABEL_STAGE, ProofRecord, read_split
from prm.labels_from_lean import training_prefix
from prm.verifier_io import EncodedProof, Layout, encode_proof


@dataclass
class VerifierExample:
    proof_id: str
    name: str
    encoded: EncodedProof  # with Lean's labels
    labels: list[bool]
    proof_label: bool | None

    @property
    def prompt_ids(self) -> list[int]:
        return self.encoded.ids[: self.encoded.answer_start]


def draw(items: list, n: int | None, seed: int) -> list:
    """A seeded random ``n`` of ``items`` in their order (all of them when ``n`` is None or not
    smaller): the verifier's ``max_examples`` and the baselines of bench.prm_curve draw the same ones."""
    if n is None or n >= len(items):
        return list(items)
    return [items[i] for i in sorted(random.Random(seed).sample(range(len(items)), n))]


def examples_from(
    records: list[ProofRecord], tokenizer: Any, max_proof_steps: int, layout: Layout = "after_each_step"
) -> tuple[list[VerifierExample], Counter]:
    counts: Counter = Counter()
    out = []
    for record in records:
        labels = training_prefix(record.labels)[:max_proof_steps]
        if not labels:
            counts["no_labelled_steps"] += 1
            continue
        counts["cut_at_max_proof_steps"] += len(training_prefix(record.labels)) > max_proof_steps
        proses = [s["prose"] for s in record.steps[: len(labels)]]
        out.append(
            VerifierExample(
                record.proof_id,
                record.name,
                encode_proof(record.statement, proses, labels, tokenizer, layout),
                labels,
                record.proof_label,
            )
        )
    return out, counts


class PRMData(L.LightningDataModule):
    def __init__(
        self,
        base: ModelSpec | None = None,
        mode: Literal["sft", "grpo"] = "sft",
        layout: Layout = "after_each_step",
        dataset: str | None = None,
        recorded: RecordedConfig | None = None,
        splits: SplitConfig | None = None,
        max_proof_steps: int = 16,
        max_length: int = 1024,
        batch_size: int = 4,
        max_examples: int | None = None,
        max_val_examples: int | None = 64,
    ) -> None:
        """``base``, ``mode`` and ``layout`` are linked from the model. ``dataset``: a prm-label run; null: the
        embedded default labels (``recorded``, split by theorem with ``splits``). Examples longer than
        ``max_length`` tokens are dropped (counted), never truncated: ``max_examples`` are drawn at random
        (``splits.seed``) from the proofs with labelled steps, then the ones that fit are kept."""
        super().__init__()
        self.base = base or ModelSpec(name="qwen3-tiny")
        self.mode = mode
        self.layout = layout
        self.dataset = dataset
        self.recorded = recorded or RecordedConfig()
        self.splits = splits or SplitConfig()
        self.max_proof_steps = max_proof_steps
        self.max_length = max_length
        self.batch_size = batch_size
        self.max_examples = max_examples
        self.max_val_examples = max_val_examples
        self.counts: Counter = Counter()
        self.train: list = []
        self.val: list = []

    def _records(self) -> dict[str, list[ProofRecord]]:
        if self.dataset is not None:
            folder = resolve_run(self.dataset, LABEL_STAGE)
            return {s: read_split(folder, s) for s in ("train", "valid")}
        from prm.recorded_steps import build_recorded

        records, _ = build_recorded(self.recorded, self.splits, progress=False)
        return {s: [r for r in records if r.split == s] for s in ("train", "valid")}

    def setup(self, stage: str | None = None) -> None:
        if self.train:
            return
        self.tokenizer = load_tokenizer(self.base)
        records = self._records()
        train, counts = examples_from(records["train"], self.tokenizer, self.max_proof_steps, self.layout)
        val, _ = examples_from(records["valid"], self.tokenizer, self.max_proof_steps, self.layout)
        self.counts.update(counts)
        train = self._fit(draw(train, self.max_examples, self.splits.seed), "train")
        val = self._fit(val[: self.max_val_examples or None], "valid")
        if not train:
            raise ValueError("no training example fits: raise data.max_length or check the dataset's labels")
        self.train = train if self.mode == "grpo" else [self._tokenize(e) for e in train]
        self.val = val
        self.counts["train_examples"], self.counts["val_examples"] = len(self.train), len(self.val)

    def _fit(self, examples: list[VerifierExample], split: str) -> list[VerifierExample]:
        kept = []
        for e in examples:
            if len(e.encoded.ids) <= self.max_length:
                kept.append(e)
            else:
                self.counts[f"{split}_too_long"] += 1
        return kept

    def _tokenize(self, example: VerifierExample) -> dict[str, torch.Tensor]:
        """Loss on the label tokens and the closing end of turn; the proof's own text is read, not
        trained on (in ``after_each_step`` the answer repeats the steps)."""
        ids = example.encoded.ids
        labels = [-100] * len(ids)
        for k in [*example.encoded.slots, len(ids) - 1]:
            labels[k] = ids[k]
        return {"input_ids": torch.tensor(ids), "labels": torch.tensor(labels)}

    def _pad(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        width = max(len(r["input_ids"]) for r in rows)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            n = len(r["input_ids"])
            ids[i, :n], labels[i, :n], mask[i, :n] = r["input_ids"], r["labels"], 1
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}

    def train_dataloader(self) -> DataLoader:
        collate = (lambda rows: rows) if self.mode == "grpo" else self._pad
        return DataLoader(
            self.train,
            batch_size=self.batch_size,
            shuffle=True,
            collate_fn=collate,
            generator=torch.Generator().manual_seed(self.splits.seed),
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val, batch_size=self.batch_size, shuffle=False, collate_fn=lambda rows: rows)

    def transfer_batch_to_device(self, batch, device, dataloader_idx):
        if isinstance(batch, list):
            return batch
        return super().transfer_batch_to_device(batch, device, dataloader_idx)

    def manifest_inputs(self) -> dict[str, Path]:
        if self.dataset is not None:
            return {"dataset": resolve_run(self.dataset, LABEL_STAGE)}
        from leanloop.paths import resolve_shared

        return {"recorded": resolve_shared(self.recorded.path)}

    def manifest_counts(self) -> dict[str, Any]:
        return dict(self.counts)
