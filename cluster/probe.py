"""``python -m cluster.probe --config configs/strategy/<x>.yaml [--trainer.devices N]``

A minute-long check that a distributed setup really trains together, before a long job is spent
finding out: a tiny regression model trained under the given strategy, through the same stage
machinery as every stage (``run_stage``; artifacts in ``artifacts/probe/<run>/``). Its manifest
records, gathered from all ranks: the world size, how far the ranks' parameters drifted apart
(0 when gradients are synchronized), whether any sample was seen by two ranks (the distributed
sampler splits the data), and how far the parameters moved from their start (a step happened).

On a cluster: ``python -m cluster.submit --stage probe --entry cluster.probe --config
configs/strategy/zero3.yaml --profile configs/cluster/gpu8x2.yaml``.
"""

from __future__ import annotations

import contextlib
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

STAGE = "probe"


class ProbeData(L.LightningDataModule):
    def __init__(self, samples: int = 64, features: int = 8, batch_size: int = 4, seed: int = 0) -> None:
        """``samples`` rows of a fixed random linear problem (the same on every rank)."""
        super().__init__()
        self.samples, self.features, self.batch_size, self.seed = samples, features, batch_size, seed

    def setup(self, stage: str | None = None) -> None:
        generator = torch.Generator().manual_seed(self.seed)
        x = torch.randn(self.samples, self.features, generator=generator)
        w = torch.randn(self.features, 1, generator=generator)
        self.dataset = TensorDataset(x, x @ w, torch.arange(self.samples))

    def train_dataloader(self) -> DataLoader:
        # under DDP/DeepSpeed run_stage deals each rank its own share (leanloop.training.resume.RankShard)
        return DataLoader(self.dataset, batch_size=self.batch_size, shuffle=True)

    def manifest_counts(self) -> dict[str, Any]:
        return {"samples": self.samples}


class ProbeModule(L.LightningModule):
    def __init__(self, width: int = 16, lr: float = 0.05, features: int = 8) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(features, width), torch.nn.Tanh(), torch.nn.Linear(width, 1))
        self.lr = lr
        self.seen: list[int] = []
        self.report: dict[str, Any] = {}

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        x, y, index = batch
        self.seen.extend(index.tolist())
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("train/loss", loss, sync_dist=True, prog_bar=True)
        return loss

    def on_fit_start(self) -> None:
        with self._full_parameters():
            self.initial = self._flat().clone()

    def on_fit_end(self) -> None:
        # collectives: every rank must reach this point
        with self._full_parameters():
            flat = self._flat()
        world = self.trainer.world_size
        params = self.all_gather(flat).reshape(world, -1)
        seen = self.all_gather(torch.tensor(self.seen, device=flat.device)).reshape(world, -1)
        per_rank = [sorted(row.tolist()) for row in seen]
        counted = torch.bincount(seen.flatten().long())
        self.report = {
            "world_size": world,
            "strategy": type(self.trainer.strategy).__name__,
            "backend": getattr(self.trainer.strategy, "process_group_backend", None)
            or getattr(self.trainer.strategy, "_process_group_backend", None),
            "max_param_spread": float((params - params[0]).abs().max()),
            "param_change": float((flat - self.initial.to(flat.device)).abs().max()),
            "samples_per_rank": [len(row) for row in per_rank],
            "samples_seen_by_several_ranks": int((counted > 1).sum()),
        }

    def _flat(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1).double() for p in self.net.parameters()])

    @contextlib.contextmanager
    def _full_parameters(self):
        """ZeRO-3 keeps only a shard of each parameter per rank; gather them to read them whole."""
        strategy = self.trainer.strategy
        if type(strategy).__name__ == "DeepSpeedStrategy" and strategy.zero_stage_3:
            import deepspeed

            with deepspeed.zero.GatheredParameters(list(self.net.parameters())):
                yield
        else:
            yield

    def manifest_counts(self) -> dict[str, Any]:
        return {"probe": self.report}


def run(args: list[str] | None = None):
    from leanloop.training.cli import run_stage

    return run_stage(STAGE, ProbeModule, ProbeData, args)


if __name__ == "__main__":
    from leanloop.training.cli import main

    main(STAGE, ProbeModule, ProbeData)
