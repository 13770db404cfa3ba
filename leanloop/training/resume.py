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
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
)


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


class RankShard(EpochOrder, DistributedSampler):
    """One rank's share of an :class:`EpochOrder`'s epoch, yielding whole batches (index lists: the
    loader reads them with ``batch_size=None`` over :class:`BatchRows`). The epoch's batches
    (``batch_size`` items of the order each, the last one short unless ``drop_last``; with
    ``batch_size=None`` the order's items already are batches) are dealt round-robin: rank ``r``
    takes batches ``r, r + world_size, ...``. When their count is not a multiple of ``world_size``
    the epoch's first batches are dealt again (as Lightning's DistributedSampler pads), so every rank
    runs as many steps; the short batch, in the last round, stays its rank's last. A
    DistributedSampler by type only: Lightning then leaves it in place instead of wrapping the order
    in its own, which would restart the epoch on a resume."""

    def __init__(self, order: EpochOrder, batch_size: int | None, drop_last: bool, rank: int, world_size: int) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} outside a world of {world_size}")
        EpochOrder.__init__(self, order.seed)
        self.inner, self.batch_size, self.drop_last = order, batch_size, drop_last
        self.rank, self.num_replicas, self.shuffle = rank, world_size, True

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.inner.set_epoch(epoch)

    def epoch_batches(self) -> int:
        """How many batches the whole epoch (all ranks, before padding) holds."""
        size = len(self.inner)  # type: ignore[arg-type]
        if self.batch_size is None:
            return size
        return size // self.batch_size if self.drop_last else -(-size // self.batch_size)

    def __len__(self) -> int:
        return (self.epoch_batches() + self.num_replicas - 1) // self.num_replicas

    def batches(self) -> list[list]:
        """The epoch's batches, every rank's, in the order's order."""
        items = self.inner.order()
        if self.batch_size is None:
            return [list(batch) for batch in items]
        batches = [items[i : i + self.batch_size] for i in range(0, len(items), self.batch_size)]
        if self.drop_last and batches and len(batches[-1]) < self.batch_size:
            batches.pop()
        return batches

    def order(self) -> list[list]:
        batches = self.batches()
        if not batches:
            return []
        rounds = -(-len(batches) // self.num_replicas)
        padded = [batches[i % len(batches)] for i in range(rounds * self.num_replicas)]
        return padded[self.rank :: self.num_replicas]


class BatchRows(Dataset):
    """A map-style dataset read a batch at a time: ``rows[[i, j]]`` is ``[dataset[i], dataset[j]]``
    (a ``batch_size=None`` loader over a :class:`RankShard` collates them as the original loader did)."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, indices: list[int]) -> list:
        return [self.dataset[i] for i in indices]


class StepStream(IterableDataset):
    """An endless stream of one item per training step (``DataLoader(batch_size=None)``) whose items
    are a function of its own seed (:meth:`items`): a resumed run starts it ``skip`` steps in. Under
    data parallelism rank ``r`` of ``world_size`` takes items ``r, r + world_size, ...`` (disjoint
    draws; :func:`resumable` sets both)."""

    skip = 0
    rank, world_size = 0, 1

    def items(self) -> Iterator:
        raise NotImplementedError

    def __iter__(self) -> Iterator:
        skip, self.skip = self.skip, 0
        return itertools.islice(self.items(), self.rank + skip * self.world_size, None, self.world_size)


def resumable(
    loader: Any, seed: int, rank: int = 0, world_size: int = 1
) -> tuple[Any, EpochOrder | StepStream | None, int]:
    """``(loader, its order, items per batch)``: a loader whose order already is an
    :class:`EpochOrder` as it is (a ``batch_sampler`` one counts batches: 1 item per batch); a
    Random/SequentialSampler replaced by a :class:`ResumableSampler` (same batches, same collation);
    a :class:`StepStream` as it is; ``(loader, None, 0)`` for any other (another iterable dataset, a
    foreign sampler), which resumes at the epoch start. With ``world_size > 1`` the order is
    ``rank``'s :class:`RankShard` (its loader yields the same batches as the original would, each
    rank its own) and a stream is told its rank."""
    if not isinstance(loader, DataLoader):
        return loader, None, 0
    if isinstance(loader.dataset, StepStream) and loader.batch_size is None:
        loader.dataset.rank, loader.dataset.world_size = rank, world_size
        return loader, loader.dataset, 1
    batch_size: int | None = loader.batch_size
    if isinstance(loader.batch_sampler, EpochOrder):
        order, batch_size = loader.batch_sampler, None
    elif type(loader.batch_sampler) is not BatchSampler:
        return loader, None, 0
    elif isinstance(loader.sampler, EpochOrder):
        order = loader.sampler
    elif type(loader.sampler) not in (RandomSampler, SequentialSampler):
        return loader, None, 0
    else:
        try:
            size = len(loader.dataset)  # type: ignore[arg-type]
        except TypeError:
            return loader, None, 0
        order = ResumableSampler(size, isinstance(loader.sampler, RandomSampler), seed)
    if world_size > 1:
        shard = RankShard(order, batch_size, loader.drop_last, rank, world_size)
        return _rebuilt(loader, BatchRows(loader.dataset), sampler=shard, batch_size=None), shard, 1
    if order is loader.batch_sampler or order is loader.sampler:
        return loader, order, batch_size or 1
    return (
        _rebuilt(loader, loader.dataset, sampler=order, batch_size=batch_size, drop_last=loader.drop_last),
        order,
        batch_size or 1,
    )


def _rebuilt(loader: DataLoader, dataset: Any, **kwargs: Any) -> DataLoader:
    """``loader`` with another dataset and sampler: the same collation and workers."""
    if loader.num_workers > 0:
        kwargs.update(prefetch_factor=loader.prefetch_factor, persistent_workers=loader.persistent_workers)
    return DataLoader(
        dataset,
        collate_fn=loader.collate_fn,
        num_workers=loader.num_workers,
        pin_memory=loader.pin_memory,
        timeout=loader.timeout,
        worker_init_fn=loader.worker_init_fn,
        **kwargs,
    )


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
        self._world = 1
        self._world_at_save: int | None = None

    @property
    def state_key(self) -> str:
        return "leanloop.ResumeState"

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if self.seed is not None:
            seed_batch(self.seed, int(trainer.current_epoch), batch_idx, int(trainer.global_rank))

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self._world = int((trainer.distributed_sampler_kwargs or {}).get("num_replicas", 1))

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        tokens = _trained_tokens(batch)
        if self._world > 1:  # the run's tokens are every rank's
            tokens = int(trainer.strategy.reduce(torch.tensor(tokens, device=pl_module.device), reduce_op="sum"))
        self.tokens += tokens
        self._batches = batch_idx + 1
        self._epoch = int(trainer.current_epoch)

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        if self.resumed_epoch is None or int(trainer.current_epoch) != self.resumed_epoch:
            self._batches = 0

    def state_dict(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "epoch": self._epoch, "batches": self._batches, "world_size": self._world}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.tokens = self.tokens_at_resume = int(state.get("tokens", 0))
        self._epoch, self._batches = int(state.get("epoch", 0)), int(state.get("batches", 0))
        self.resumed_epoch = self._epoch
        self._world_at_save = int(state["world_size"]) if "world_size" in state else None

    def skip_for(self, order: EpochOrder | StepStream, per_batch: int) -> None:
        """Called when the train loader is built: after a restore, start past the trained batches.
        The count is each rank's: a checkpoint resumed on another number of ranks is refused."""
        if self.resumed_epoch is not None and self._batches:
            world = getattr(order, "num_replicas", None) or getattr(order, "world_size", 1)
            if self._world_at_save is not None and world != self._world_at_save:
                raise ValueError(
                    f"the checkpoint was trained on {self._world_at_save} data-parallel rank(s) and "
                    f"this run has {world}: resume it on as many devices (or start over with "
                    "--restart true)"
                )
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


__all__ = [
    "EpochOrder",
    "ResumableSampler",
    "RankShard",
    "BatchRows",
    "StepStream",
    "seed_batch",
    "ResumeState",
    "keep_rows_before",
    "resumable",
    "trim_metrics",
]
