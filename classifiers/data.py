"""LightningDataModule over the labelled corpus (the data stage's output) for both classifiers.

The model owns the input format (:meth:`classifiers.module.ClassifierModule.encode` / ``collate``),
so the datamodule asks ``trainer.lightning_module`` for it in ``setup``: a config cannot give the
data side a different tokenizer or context than the model it feeds.

Training batches group programs of similar length (:class:`LengthGroupedBatches`), which cuts padding
several-fold on CPU, and come in random order; evaluation batches run in length order and scores
are put back by corpus row index.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset
from tqdm.auto import tqdm

from classifiers.examples import Corpus, JsonlCorpus, Split, add_training_programs, load_jsonl_corpus, load_labelled
from leanloop.artifacts import resolve_path, resolve_run
from leanloop.corpus import EVAL_SPLITS, VALID
from leanloop.training.resume import EpochOrder


class EncodedSplit(Dataset):
    def __init__(self, ids: list[list[int]], labels: list[bool]) -> None:
        self.ids, self.labels = ids, labels

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"input_ids": self.ids[index], "label": self.labels[index], "index": index}


class LengthGroupedBatches(EpochOrder):
    """Training order: batches of programs of similar length, the batches in random order.

    Shuffle, cut into mega-batches of ``mega_batches`` batches, sort each by length, cut into
    batches, then shuffle the BATCHES. transformers' ``LengthGroupedSampler`` stops before that last
    step, so each epoch runs long-to-short sweeps; program length predicts the verdict here (long
    programs are mostly invalid), and such sweeps feed the model runs of one-label batches, which
    cost the encoder ~0.07 validation AUROC. Yields indices: a DataLoader with the same
    ``batch_size`` cuts them back into these batches (only the last batch may be short). The order
    is a function of ``(seed, epoch)`` (an :class:`EpochOrder`: a resumed run continues it exactly).
    """

    def __init__(self, lengths: list[int], batch_size: int, mega_batches: int = 50, seed: int = 0) -> None:
        if batch_size < 1 or mega_batches < 1:
            raise ValueError(f"batch_size and mega_batches must be positive, got {batch_size}, {mega_batches}")
        super().__init__(seed)
        self.lengths, self.batch_size, self.mega_batches = list(lengths), batch_size, mega_batches

    def __len__(self) -> int:
        return len(self.lengths)

    def batches(self) -> list[list[int]]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.lengths), generator=generator).tolist()
        size = self.batch_size * self.mega_batches  # a multiple of batch_size: only the final batch is short
        batches = []
        for start in range(0, len(order), size):
            mega = sorted(order[start : start + size], key=lambda i: self.lengths[i], reverse=True)
            batches += [mega[i : i + self.batch_size] for i in range(0, len(mega), self.batch_size)]
        full = [b for b in batches if len(b) == self.batch_size]
        short = [b for b in batches if len(b) < self.batch_size]
        return [full[i] for i in torch.randperm(len(full), generator=generator).tolist()] + short

    def order(self) -> list[int]:
        return [index for batch in self.batches() for index in batch]


class PackedBatches(EpochOrder):
    """Training batches as packed rows: the programs grouped into rows of at most ``capacity`` tokens
    (best-fit decreasing, leanloop.training.packing), the rows in a new random order every epoch."""

    def __init__(self, lengths: list[int], capacity: int, seed: int = 0) -> None:
        from leanloop.training.packing import pack_lengths

        super().__init__(seed)
        self.packs = pack_lengths(lengths, capacity)

    def __len__(self) -> int:
        return len(self.packs)

    def order(self) -> list[list[int]]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        return [self.packs[i] for i in torch.randperm(len(self.packs), generator=generator).tolist()]


def subsample(split: Split, n: int, seed: int) -> Split:
    """A seeded random ``n`` of a split's rows, in their corpus order (all of them if it has fewer)."""
    import random

    keep = sorted(random.Random(seed).sample(range(len(split)), min(n, len(split))))
    return Split([split.programs[i] for i in keep], [split.labels[i] for i in keep], [split.names[i] for i in keep])


class ClassifierData(L.LightningDataModule):
    def __init__(
        self,
        corpus: str | None = "artifacts://data/default",
        jsonl: JsonlCorpus | None = None,
        batch_size: int = 16,
        eval_batch_size: int = 32,
        num_workers: int = 0,
        max_rows_per_split: int | None = None,
        length_grouped: bool = True,
        train_rows: int | None = None,
        train_rows_seed: int = 0,
        extra_train: list[JsonlCorpus] | None = None,
    ) -> None:
        """
        Args:
            corpus: the data stage's run: ``artifacts://data/<run>`` or its folder.
            jsonl: instead of ``corpus`` (set ``corpus: null``): a file of programs with recorded
                verdicts, split by theorem name here (debug runs that need no data run).
            batch_size: training programs per step (per device).
            eval_batch_size: programs per scoring batch (validation and test).
            num_workers: DataLoader workers (0: tokenized in memory already, collation is cheap).
            max_rows_per_split: keep only the first N labelled rows of each split (debug configs).
            length_grouped: batch training programs of similar length together.
            train_rows: train on a seeded random N of the labelled training programs (learning
                curves, ``bench.classifier_curve``); validation and test stay whole. None: all.
            train_rows_seed: the seed of that draw.
            extra_train: files of programs with recorded verdicts added to the training split only
                (e.g. the APOLLO attempts in ``shared://candidates/``); programs of a validation or
                test theorem are left out, so the evaluation splits stay the corpus's own. The
                report's TF-IDF baseline is fitted on the same enlarged training split. None: none.
        """
        super().__init__()
        if (corpus is None) == (jsonl is None):
            raise ValueError(
                "give the classifiers exactly one of data.corpus (a data-stage run) or data.jsonl "
                f"(a labelled-programs file); got corpus={corpus!r}, jsonl={jsonl!r}"
            )
        self.corpus_path = corpus
        self.jsonl = jsonl
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.num_workers = num_workers
        self.max_rows_per_split = max_rows_per_split
        self.length_grouped = length_grouped
        if train_rows is not None and train_rows < 1:
            raise ValueError(f"data.train_rows must be at least 1 (or null for all), got {train_rows}")
        self.train_rows, self.train_rows_seed = train_rows, train_rows_seed
        self.extra_train = list(extra_train or [])
        self.corpus: Corpus | None = None
        self.encoded: dict[str, EncodedSplit] = {}

    def setup(self, stage: str | None = None) -> None:
        if self.encoded:
            return
        module = self.trainer.lightning_module
        if self.jsonl is not None:
            self.corpus = load_jsonl_corpus(self.jsonl, self.max_rows_per_split)
        else:
            self.corpus = load_labelled(self.corpus_path, self.max_rows_per_split)
        if self.extra_train:
            add_training_programs(self.corpus, self.extra_train)
            self.corpus.counts["train/used"] = len(self.corpus.splits["train"])
        if not len(self.corpus.splits["train"]):
            raise ValueError(f"corpus {self.corpus.path} has no labelled training programs")
        if self.train_rows is not None:
            self.corpus.splits["train"] = subsample(self.corpus.splits["train"], self.train_rows, self.train_rows_seed)
            self.corpus.counts["train/used"] = len(self.corpus.splits["train"])
        for name, split in self.corpus.splits.items():
            ids = [module.encode(p) for p in tqdm(split.programs, desc=f"tokenize {name}", leave=False)]
            self.encoded[name] = EncodedSplit(ids, split.labels)

    def _loader(self, split: str, train: bool) -> DataLoader:
        data = self.encoded[split]
        module = self.trainer.lightning_module
        collate = module.collate
        if train and module.input_config.pack_tokens:
            if self.batch_size != 1:
                raise ValueError(
                    f"inputs.pack_tokens makes a training batch one packed row: set data.batch_size 1 "
                    f"(got {self.batch_size}) and scale with devices / accumulate_grad_batches"
                )
            packs = PackedBatches(
                [len(ids) for ids in data.ids], module.input_config.pack_tokens, seed=torch.initial_seed() % 2**63
            )
            return DataLoader(data, batch_sampler=packs, collate_fn=module.train_collate, num_workers=self.num_workers)
        if train:
            if self.length_grouped:
                sampler = LengthGroupedBatches(
                    [len(ids) for ids in data.ids], self.batch_size, seed=torch.initial_seed() % 2**63
                )
                return DataLoader(
                    data, batch_size=self.batch_size, sampler=sampler, collate_fn=collate, num_workers=self.num_workers
                )
            return DataLoader(
                data, batch_size=self.batch_size, shuffle=True, collate_fn=collate, num_workers=self.num_workers
            )
        # Evaluation in length order: least padding; scores are keyed by row index anyway.
        order = sorted(range(len(data)), key=lambda i: len(data.ids[i]))
        return DataLoader(
            torch.utils.data.Subset(data, order),
            batch_size=self.eval_batch_size,
            collate_fn=collate,
            num_workers=self.num_workers,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(VALID, train=False)

    def test_dataloader(self) -> list[DataLoader]:
        # Both evaluation splits: validation picks the threshold, test is reported at it.
        return [self._loader(split, train=False) for split in EVAL_SPLITS]

    def manifest_inputs(self) -> dict[str, Path]:
        extra = {f"extra_train_{i}": resolve_path(source.path) for i, source in enumerate(self.extra_train)}
        if self.jsonl is not None:
            return {"labelled_programs": resolve_path(self.jsonl.path), **extra}
        return {"corpus": resolve_run(self.corpus_path, "data"), **extra}

    def manifest_counts(self) -> dict[str, Any]:
        return {"corpus": self.corpus.counts} if self.corpus is not None else {}
