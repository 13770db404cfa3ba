"""Prover SFT data: valid proofs -> (statement prompt, proof) pairs -> packed rows, loss on the proof."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
from torch.utils.data import DataLoader

from leanloop.jsonl import numbered_jsonl
from leanloop.paths import resolve_shared
from leanloop.training.models import ModelSpec, load_tokenizer
from leanloop.training.packing import TooLongError, collator_for, completion_example, pack_examples
from leanloop.artifacts import resolve_run
from leanloop.corpus import read_corpus
from sft.examples import SplitError, split_program, target_theorem
from leanloop.prover.prompt import PromptConfig, render_prompt, render_target


@dataclass
class ProofSource:
    """A JSONL file of proofs: every row (published accepted proofs), or the rows whose
    ``valid_field`` is true (candidates shipped with a recorded verdict)."""

    path: str
    program_field: str = "program"
    name_field: str = "name"
    valid_field: str | None = None


@dataclass
class Proof:
    name: str
    program: str
    source: str


def read_proof_source(source: ProofSource, counts: Counter) -> list[Proof]:
    path = resolve_shared(source.path)
    if not path.is_file():
        raise FileNotFoundError(f"proof source {source.path} not found at {path}")
    proofs = []
    for number, row in numbered_jsonl(path):
        if source.valid_field is not None and row.get(source.valid_field) is not True:
            counts["extra_not_valid"] += 1
            continue
        program, name = row.get(source.program_field), row.get(source.name_field)
        if not isinstance(program, str) or not isinstance(name, str):
            raise ValueError(
                f"{path}:{number}: needs text fields `{source.program_field}` and "
                f"`{source.name_field}` (set program_field / name_field)"
            )
        proofs.append(Proof(name, program, source.path))
    return proofs


class ProverSFTData(L.LightningDataModule):
    def __init__(
        self,
        corpus: str | None = None,
        train_splits: list[str] | None = None,
        val_split: str | None = "valid",
        extra_proofs: list[ProofSource] | None = None,
        prompt: PromptConfig | None = None,
        max_length: int = 1024,
        batch_size: int = 2,
        max_examples: int | None = None,
        num_workers: int = 0,
        seed: int = 0,
        base: ModelSpec | None = None,
    ) -> None:
        """``corpus``: a data-stage run (``artifacts://data/<run>``) whose valid programs in
        ``train_splits`` (default ``[train]``) are trained on; ``val_split``: its split for the
        validation loss (None: none). ``extra_proofs``: more proof files (their theorems in the
        corpus's other splits are dropped). ``prompt``: raw text or chat template. ``max_length``:
        tokens per packed row, and the longest example kept (longer ones are counted and dropped).
        ``batch_size``: packed rows per micro-batch. ``max_examples``: cap (debug runs). ``base`` is
        linked from ``model.base`` so the tokenizer is the model's."""
        super().__init__()
        if corpus is None and not extra_proofs:
            raise ValueError("prover SFT needs proofs: set data.corpus (a data-stage run) and/or data.extra_proofs")
        self.corpus = corpus
        self.train_splits = list(train_splits or ["train"])
        self.val_split = val_split
        self.extra_proofs = list(extra_proofs or [])
        self.prompt = prompt or PromptConfig()
        self.max_length = max_length
        self.batch_size = batch_size
        self.max_examples = max_examples
        self.num_workers = num_workers
        self.seed = seed
        self.base = base or ModelSpec(name="qwen3-tiny")
        self.counts: dict[str, Any] = {}
        self.train_rows: list = []
        self.val_rows: list = []

    # -- which proofs -------------------------------------------------------------------------
    def collect(self) -> tuple[list[Proof], list[Proof], Counter]:
        """(train proofs, validation proofs, counts) before tokenization."""
        counts: Counter = Counter()
        train: list[Proof] = []
        val: list[Proof] = []
        held_out: set[str] = set()
        if self.corpus is not None:
            rows = read_corpus(self.corpus, ["program", "name", "split", "label"])
            splits = set(self.train_splits)
            for row in rows:
                if row["split"] not in splits and row["name"]:
                    held_out.add(row["name"])
                if row["label"] is not True or not row["program"]:
                    counts["corpus_not_valid"] += 1
                    continue
                proof = Proof(row["name"], row["program"], "corpus")
                if row["split"] in splits:
                    train.append(proof)
                elif row["split"] == self.val_split:
                    val.append(proof)
                else:
                    counts["corpus_valid_other_split"] += 1
        for source in self.extra_proofs:
            for proof in read_proof_source(source, counts):
                if proof.name in held_out:
                    counts["extra_held_out"] += 1  # the corpus evaluates this theorem
                    continue
                train.append(proof)
        return train, val, counts

    def examples(self, proofs: list[Proof], counts: Counter, prefix: str, limit: int | None = None) -> list[dict]:
        """Tokenized pairs; drops (and counts) duplicates, unsplittable and over-long programs.
        With ``limit``, stops after that many examples (the rest are counted as not read)."""
        seen: set[str] = set()
        examples = []
        for index, proof in enumerate(proofs):
            if limit is not None and len(examples) >= limit:
                counts[f"{prefix}_over_max_examples"] += len(proofs) - index
                break
            if proof.program in seen:
                counts[f"{prefix}_duplicate"] += 1
                continue
            seen.add(proof.program)
            try:
                statement_prompt, _ = split_program(proof.program, target_theorem(proof.program, proof.name))
            except SplitError as error:
                counts[f"{prefix}_unsplittable_{error.kind}"] += 1
                continue
            prompt = render_prompt(statement_prompt, self.prompt, self.tokenizer)
            target = render_target(proof.program, statement_prompt, self.prompt)
            if self.prompt.style == "chat":
                target, add_eos = target + self.prompt.end_of_turn, False
            else:
                add_eos = True
            try:
                example = completion_example(self.tokenizer, prompt, target, self.max_length, add_eos)
            except TooLongError:
                counts[f"{prefix}_too_long"] += 1
                continue
            examples.append({**example, "name": proof.name})
            counts[f"{prefix}_examples"] += 1
        return examples

    def setup(self, stage: str | None = None) -> None:
        if self.train_rows:
            return
        self.tokenizer = load_tokenizer(self.base)
        train, val, counts = self.collect()
        train_examples = self.examples(train, counts, "train", self.max_examples)
        val_examples = self.examples(val, counts, "val", self.max_examples)
        if not train_examples:
            raise ValueError(f"no SFT examples: {dict(counts)} (check data.corpus / extra_proofs, and max_length)")
        self.train_rows = self._pack(train_examples)
        self.val_rows = self._pack(val_examples) if val_examples else []
        tokens = sum(len(e["input_ids"]) for e in train_examples)
        trained = sum(sum(label != -100 for label in e["labels"]) for e in train_examples)
        self.counts = {
            **dict(counts),
            "train_tokens": tokens,
            "train_target_tokens": trained,
            "train_rows": len(self.train_rows),
            "val_rows": len(self.val_rows),
            "train_row_fill": round(tokens / (len(self.train_rows) * self.max_length), 4),
            "train_theorems": sorted({e["name"] for e in train_examples}),
        }

    def _pack(self, examples: list[dict]) -> list:
        plain = [{"input_ids": e["input_ids"], "labels": e["labels"]} for e in examples]
        rows = pack_examples(plain, self.max_length)
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
        inputs = {f"proofs:{s.path}": resolve_shared(s.path) for s in self.extra_proofs}
        if self.corpus is not None:
            inputs["corpus"] = resolve_run(self.corpus, "data")
        return inputs

    def manifest_counts(self) -> dict[str, Any]:
        return self.counts
