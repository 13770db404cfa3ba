"""Resuming a killed training run exactly where it stopped."""

from __future__ import annotations

import csv
import itertools
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.callbacks import Callback
from torch.utils.data import BatchSampler, DataLoader, IterableDataset, RandomSampler, Sampler, SequentialSampler


class EpochOrder(Sampler):
    """A sampler (of indices, or of index lists as a ``batch_sampler``) whose order is
    :meth:`order`, a function of ``(seed, epoch)`` alone, and which can start ``skip`` items into its
    first epoch after a restore. Its length stays the whole epoch's (the trainer counts the skipped
    batches as done)."""

    def __init__(self, seed: int) -> None:
        self.seed, self.epoch, self.skip = seed, 0, 0

    def set_epoch(self, epoch: int) -> None:  # Lightning calls this at every epoch start
        self.epoch = epoch

    def order(self) -> list:
        raise NotImplementedError

    def __iter__(self) -> Iterator:
        skip, self.skip = self.skip, 0
        return iter(self.order()[skip:])


class ResumableSampler(EpochOrder):
    """A Random/SequentialSampler as an :class:`EpochOrder`."""

    def __init__(self, size: int, shuffle: bool, seed: int):
        super().__init__(seed)
        self.size, self.shuffle = size, shuffle

    def __len__(self) -> int:
        return self.size

    def order(self) -> list[int]:
        if not self.shuffle:
            return list(range(self.size))
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        return torch.randperm(self.size, generator=generator).tolist()


class StepStream(IterableDataset):
    """An endless stream of one item per training step (``DataLoader(batch_size=None)``) whose items
    are a function of its own seed (:meth:`items`): a resumed run starts it ``skip`` items in."""

    skip = 0

    def items(self) -> Iterator:
        raise NotImplementedError

    def __iter__(self) -> Iterator:
        skip, self.skip = self.skip, 0
        return itertools.islice(self.items(), skip, None)


def resumable(loader: Any, seed: int) -> tuple[Any, EpochOrder | StepStream | None, int]:
    """``(loader, its order, items per batch)``: a loader whose order already is an
    :class:`EpochOrder` as it is (a ``batch_sampler`` one counts batches: 1 item per batch); a
    Random/SequentialSampler replaced by a :class:`ResumableSampler` (same batches, same collation);
    a :class:`StepStream` as it is; ``(loader, None, 0)`` for any other (another iterable dataset, a
    foreign sampler), which resumes at the epoch start."""
    if not isinstance(loader, DataLoader):
        return loader, None, 0
    if isinstance(loader.dataset, StepStream) and loader.batch_size is None:
        return loader, loader.dataset, 1
    if isinstance(loader.batch_sampler, EpochOrder):
        return loader, loader.batch_sampler, 1
    if type(loader.batch_sampler) is not BatchSampler:
        return loader, None, 0
    if isinstance(loader.sampler, EpochOrder):
        return loader, loader.sampler, loader.batch_size
    if type(loader.sampler) not in (RandomSampler, SequentialSampler):
        return loader, None, 0
    try:
        size = len(loader.dataset)  # type: ignore[arg-type]
    except TypeError:
        return loader, None, 0
    sampler = ResumableSampler(size, isinstance(loader.sampler, RandomSampler), seed)
    extra: dict[str, Any] = {}
    if loader.num_workers > 0:
        extra = {"prefetch_factor": loader.prefetch_factor, "persistent_workers": loader.persistent_workers}
    wrapped = DataLoader(loader.dataset, batch_size=loader.batch_size, sampler=sampler, collate_fn=loader.collate_fn,
                         num_workers=loader.num_workers, pin_memory=loader.pin_memory, drop_last=loader.drop_last,
                         timeout=loader.timeout, worker_init_fn=loader.worker_init_fn, **extra)
    return wrapped, sampler, loader.batch_size


def _trained_tokens(batch: Any) -> int:
    """Tokens a batch trains on: labelled positions (``labels != -100``), else the attention mask."""
    if isinstance(batch, dict):
        labels = batch.get("labels")
        if isinstance(labels, torch.Tensor) and labels.dim() >= 2:
            return int((labels != -100).sum())
        mask = batch.get("attention_mask")
        if isinstance(mask, torch.Tensor):
            return int(mask.sum())
    return 0


def seed_batch(seed: int, epoch: int, batch: int, rank: int = 0) -> None:
    """Seed torch (every device), numpy and ``random`` from the batch's place in the run."""
    import numpy as np

    value = ((((seed * 1_000_003) + epoch) * 1_000_003 + batch) * 1_009 + rank) % 2**63
    torch.manual_seed(value)
    np.random.seed(value % 2**32)
    random.seed(value)


class ResumeState(Callback):
    """Counts the run's trained tokens and remembers, in every checkpoint, where in its epoch the run
    was; on a restore it points the order past the batches already trained on. With a ``seed`` it
    seeds every training batch (:func:`seed_batch`), so a resumed step draws what the killed run's did."""

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed
        self.tokens = 0
        self.tokens_at_resume = 0
        self.resumed_epoch: int | None = None
        self._batches = 0
        self._epoch = 0

    @property
    def state_key(self) -> str:
        return "leanloop.ResumeState"

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if self.seed is not None:
            seed_batch(self.seed, int(trainer.current_epoch), batch_idx, int(trainer.global_rank))

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.tokens += _trained_tokens(batch)
        self._batches = batch_idx + 1
        self._epoch = int(trainer.current_epoch)

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        if self.resumed_epoch is None or int(trainer.current_epoch) != self.resumed_epoch:
            self._batches = 0

    def state_dict(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "epoch": self._epoch, "batches": self._batches}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.tokens = self.tokens_at_resume = int(state.get("tokens", 0))
        self._epoch, self._batches = int(state.get("epoch", 0)), int(state.get("batches", 0))
        self.resumed_epoch = self._epoch

    def skip_for(self, order: EpochOrder | StepStream, per_batch: int) -> None:
        """Called when the train loader is built: after a restore, start past the trained batches."""
        if self.resumed_epoch is not None and self._batches:
            order.skip = self._batches * per_batch


def trim_metrics(run_dir: Path, step: int) -> list[str]:
    """Drop the ``metrics.csv`` rows logged at or after ``step`` (a killed run logged them after its
    last checkpoint; the resumed run logs those steps again). Returns the file's columns."""
    path = Path(run_dir) / "metrics.csv"
    if not path.is_file():
        return []
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        fields = reader.fieldnames or []
        rows = [r for r in reader if not r.get("step") or float(r["step"]) < step]
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return list(fields)



def keep_rows_before(path: Path, step: int) -> list[dict]:
    """A stage's own step log (JSON lines with a ``step``) as a resumed run continues it: the rows of
    steps before ``step`` are kept (``step`` 0, a fresh start: none), the file rewritten to them and
    returned. A line the kill tore is dropped."""
    from leanloop.jsonl import read_appended, write_jsonl

    path = Path(path)
    if not path.is_file():
        return []
    rows = [row for row in read_appended(path)[0] if int(row.get("step", step)) < step] if step else []
    if rows:
        write_jsonl(path, rows)
    else:
        path.unlink()
    return rows

__all__ = ["EpochOrder", "ResumableSampler", "StepStream", "seed_batch", "ResumeState", "keep_rows_before", "resumable",
           "trim_metrics"]
