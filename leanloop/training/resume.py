"""Resuming a killed training run exactly where it stopped.

A run folder keeps ``step-NNNNNN/lightning.ckpt`` every ``--checkpoint_every_n_steps``. Resuming one
must give the run an uninterrupted run would have given:

- the data order: :class:`ResumableSampler` draws each epoch's order from ``(seed, epoch)`` alone (not
  from the global RNG, which a restart does not restore) and, after a restore, skips the batches the
  checkpoint had already trained on, so the next batch is the one the killed run would have seen;
- the counts: :class:`ResumeState` (a callback, saved in the checkpoint) carries how many batches of
  the epoch and how many tokens the run had trained on, so the manifest counts the whole run;
- the logs: ``metrics.csv`` keeps the rows logged before the checkpoint (:func:`trim_metrics` drops
  the rows a killed run logged after it, which the resumed run logs again).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.callbacks import Callback
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, Sampler, SequentialSampler

CHECKPOINT = re.compile(r"step-(\d+)")


class ResumableSampler(Sampler[int]):
    """A Random/SequentialSampler whose order depends only on ``(seed, epoch)`` and which can start
    ``skip`` samples into its first epoch after a restore. Its length stays the whole epoch's (the
    trainer counts the skipped batches as done)."""

    def __init__(self, size: int, shuffle: bool, seed: int):
        self.size, self.shuffle, self.seed = size, shuffle, seed
        self.epoch = 0
        self.skip = 0

    def set_epoch(self, epoch: int) -> None:  # Lightning calls this at every epoch start
        self.epoch = epoch

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[int]:
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
            order = torch.randperm(self.size, generator=generator).tolist()
        else:
            order = list(range(self.size))
        skip, self.skip = self.skip, 0
        return iter(order[skip:])


def resumable(loader: Any, seed: int) -> Any:
    """``loader`` with its sampler replaced by a :class:`ResumableSampler` (same batches, same
    collation), or ``loader`` itself when it has a sampler of its own (bucketing, packing) or an
    iterable dataset: those resume at the epoch start, as before."""
    if not isinstance(loader, DataLoader) or type(loader.batch_sampler) is not BatchSampler:
        return loader
    if type(loader.sampler) not in (RandomSampler, SequentialSampler):
        return loader
    try:
        size = len(loader.dataset)  # type: ignore[arg-type]
    except TypeError:
        return loader
    sampler = ResumableSampler(size, isinstance(loader.sampler, RandomSampler), seed)
    extra: dict[str, Any] = {}
    if loader.num_workers > 0:
        extra = {"prefetch_factor": loader.prefetch_factor, "persistent_workers": loader.persistent_workers}
    return DataLoader(loader.dataset, batch_size=loader.batch_size, sampler=sampler, collate_fn=loader.collate_fn,
                      num_workers=loader.num_workers, pin_memory=loader.pin_memory, drop_last=loader.drop_last,
                      timeout=loader.timeout, worker_init_fn=loader.worker_init_fn, **extra)


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


class ResumeState(Callback):
    """Counts the run's trained tokens and remembers, in every checkpoint, where in its epoch the run
    was; on a restore it points the sampler past the batches already trained on."""

    def __init__(self) -> None:
        self.tokens = 0
        self.tokens_at_resume = 0
        self.resumed_epoch: int | None = None
        self._batches = 0
        self._epoch = 0
        self.samplers: list[ResumableSampler] = []

    @property
    def state_key(self) -> str:
        return "leanloop.ResumeState"

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

    def skip_for(self, sampler: ResumableSampler, batch_size: int) -> None:
        """Called when the train loader is built: after a restore, start past the trained batches."""
        self.samplers.append(sampler)
        if self.resumed_epoch is not None and self._batches:
            sampler.skip = self._batches * batch_size


def last_checkpoint(run_dir: Path) -> Path | None:
    """The newest ``step-NNNNNN/lightning.ckpt`` of a run folder, or None."""
    found = []
    for folder in Path(run_dir).glob("step-*"):
        match = CHECKPOINT.fullmatch(folder.name)
        if match and (folder / "lightning.ckpt").is_file():
            found.append((int(match.group(1)), folder / "lightning.ckpt"))
    return max(found)[1] if found else None


def checkpoint_step(path: str | Path) -> int | None:
    match = CHECKPOINT.fullmatch(Path(path).parent.name)
    return int(match.group(1)) if match else None


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


__all__ = ["ResumableSampler", "ResumeState", "checkpoint_step", "last_checkpoint", "resumable", "trim_metrics"]
