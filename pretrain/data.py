"""Pretraining data: corpus documents -> token examples -> packed rows (causal LM) or masked
batches (masked LM)."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any, Literal

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader
from tqdm import tqdm

from leanloop.training.models import ModelSpec, load_tokenizer
from leanloop.training.packing import PackedCollator, lm_examples, needs_flattening, pack_examples
from leanloop.paths import resolve_shared
from pretrain.config import CorpusConfig
from leanloop.artifacts import resolve_run
from pretrain.documents import CORPUS_STAGE, collect_documents, is_validation


def mlm_examples(tokenizer: Any, text: str, max_length: int) -> list[dict[str, list[int]]]:
    """A document as encoder examples: [CLS] chunk [SEP], each at most ``max_length`` tokens."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    head = [tokenizer.cls_token_id] if tokenizer.cls_token_id is not None else []
    tail = [tokenizer.sep_token_id] if tokenizer.sep_token_id is not None else []
    body = max_length - len(head) - len(tail)
    return [{"input_ids": head + ids[i : i + body] + tail} for i in range(0, len(ids), body)]


class PretrainData(L.LightningDataModule):
    def __init__(
        self,
        corpus: CorpusConfig | None = None,
        max_length: int = 1024,
        batch_size: int = 2,
        mlm_probability: float = 0.3,
        num_workers: int = 0,
        objective: Literal["clm", "mlm"] = "clm",
        base: ModelSpec | None = None,
    ) -> None:
        """``max_length``: tokens per packed row (CLM) or per sequence (MLM). ``batch_size``: rows
        per micro-batch (effective batch = batch_size x accumulate_grad_batches x devices).
        ``objective`` and ``base`` are linked from the model section by ``pretrain.train``."""
        super().__init__()
        self.corpus = corpus or CorpusConfig()
        self.max_length = max_length
        self.batch_size = batch_size
        self.mlm_probability = mlm_probability
        self.num_workers = num_workers
        self.objective = objective
        self.base = base or ModelSpec("qwen3-tiny")
        self.tokenizer = None
        self.counts: dict[str, Any] = {}
        self.train_set: list = []
        self.val_set: list = []

    # -- tokenizing once: prepare_data runs on one process per node, setup on every rank ---------
    def cache_file(self) -> Path | None:
        """Tokenized + packed sets of a prebuilt corpus, keyed by everything that shapes them."""
        if not self.corpus.prebuilt:
            return None  # in-process corpora are small: rebuilt each run
        from leanloop.training.inputs import tokenizer_fingerprint

        key = (
            f"{self.objective}-{self.max_length}-{tokenizer_fingerprint(self._tokenizer())[7:19]}"
            f"-val{self.corpus.validation_fraction}-max{self.corpus.max_documents}"
        )
        return resolve_run(self.corpus.prebuilt, CORPUS_STAGE) / "cache" / f"{key}.pt"

    def prepare_data(self) -> None:
        cache = self.cache_file()
        if cache is not None and not cache.is_file():
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(f".tmp{os.getpid()}")
            torch.save(self._build(), tmp)
            os.replace(tmp, cache)

    def setup(self, stage: str | None = None) -> None:
        if self.train_set:
            return
        self._tokenizer()
        cache = self.cache_file()
        built = torch.load(cache, weights_only=False) if cache is not None and cache.is_file() else self._build()
        self.train_set, self.val_set, self.counts = built["train"], built["val"], built["counts"]

    def _tokenizer(self):
        if self.tokenizer is None:
            self.tokenizer = load_tokenizer(self.base)
        return self.tokenizer

    def _build(self) -> dict[str, Any]:
        self._tokenizer()
        documents, corpus_counts = collect_documents(self.corpus)
        if not documents:
            raise ValueError("the pretraining corpus is empty: check data.corpus sources")
        train_docs = [d for d in documents if not is_validation(d["text"], self.corpus.validation_fraction)]
        val_docs = [d for d in documents if is_validation(d["text"], self.corpus.validation_fraction)]
        if not val_docs and train_docs:  # tiny corpora: keep a validation loss all the same
            val_docs = [train_docs.pop()]
        split = self._pack if self.objective == "clm" else self._chunk
        train_set, train_tokens = split(train_docs)
        val_set, val_tokens = split(val_docs)
        counts = {
            "corpus": corpus_counts,
            "train_documents": len(train_docs),
            "val_documents": len(val_docs),
            "train_tokens": train_tokens,
            "val_tokens": val_tokens,
            "train_sequences": len(train_set),
            "val_sequences": len(val_set),
        }
        if self.objective == "clm":
            capacity = len(train_set) * self.max_length
            counts["train_row_fill"] = round(train_tokens / capacity, 4) if capacity else 0.0
        return {"train": train_set, "val": val_set, "counts": counts}

    def _pack(self, documents: list[dict]) -> tuple[list, int]:
        examples = []
        for document in tqdm(documents, desc="tokenize", unit="doc", disable=len(documents) < 5000):
            for example in lm_examples(self.tokenizer, document["text"], self.max_length):
                # one int32 array serves as ids and labels: a 130M-token corpus stays ~0.5 GB
                tokens = np.asarray(example["input_ids"], dtype=np.int32)
                examples.append({"input_ids": tokens, "labels": tokens})
        rows = pack_examples(examples, self.max_length)
        random.Random(0).shuffle(rows)  # best-fit order puts all long rows first
        return rows, sum(len(e["input_ids"]) for e in examples)

    def _chunk(self, documents: list[dict]) -> tuple[list, int]:
        examples = [e for d in documents for e in mlm_examples(self.tokenizer, d["text"], self.max_length)]
        return examples, sum(len(e["input_ids"]) for e in examples)

    def collator(self):
        if self.objective == "clm":
            pad = self.tokenizer.pad_token_id
            return PackedCollator(
                pad if pad is not None else self.tokenizer.eos_token_id,
                flatten=needs_flattening(self.base.attn_implementation),
            )
        from transformers import DataCollatorForLanguageModeling

        return DataCollatorForLanguageModeling(self.tokenizer, mlm=True, mlm_probability=self.mlm_probability)

    def _loader(self, dataset: list, shuffle: bool) -> DataLoader:
        return DataLoader(
            dataset,
            batch_size=self.batch_size,
            shuffle=shuffle,
            collate_fn=self.collator(),
            num_workers=self.num_workers,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_set, shuffle=False)

    # -- hooks read by run_stage --------------------------------------------------------------
    def manifest_inputs(self) -> dict[str, Path]:
        if self.corpus.prebuilt:
            return {"corpus": resolve_run(self.corpus.prebuilt, CORPUS_STAGE)}
        inputs = {f"jsonl:{s.path}": resolve_shared(s.path) for s in self.corpus.jsonl}
        inputs.update({f"text_dir:{d}": resolve_shared(d) for d in self.corpus.text_dirs})
        if self.corpus.holdout:
            inputs["holdout"] = resolve_run(self.corpus.holdout, "data")
        return inputs

    def manifest_counts(self) -> dict[str, Any]:
        return self.counts
