"""Under data parallelism each rank trains on its own share of the resumable data order
(leanloop.training.resume): disjoint shares that together are the epoch, the same batches a
single process would train on, a state a restored run continues, and a sampler Lightning keeps
instead of swapping in its DistributedSampler (which restarts the epoch on a resume). The two-rank
kill-and-resume run is tests/leanloop/test_training_resume.py's (slow)."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader

from classifiers.data import LengthGroupedBatches, PackedBatches
from leanloop.training.resume import RankShard, ResumeState, resumable

LENGTHS = [(7 * i) % 23 + 1 for i in range(30)]


def _rows(batch) -> list[int]:
    return batch.tolist() if isinstance(batch, torch.Tensor) else [int(i) for i in batch]


def _loaders() -> dict[str, DataLoader]:
    """The train loaders the stages build: a plain shuffle, length-grouped indices, packed rows."""
    data = list(range(len(LENGTHS)))
    return {
        "shuffle": DataLoader(data, batch_size=4, shuffle=True),
        "length_grouped": DataLoader(data, batch_size=4, sampler=LengthGroupedBatches(LENGTHS, 4, 2, seed=5)),
        "packed": DataLoader(data, batch_sampler=PackedBatches(LENGTHS, 30, seed=5), collate_fn=list),
    }


def _epoch(name: str, rank: int, world: int, epoch: int = 0) -> list[list[int]]:
    loader, order, per_batch = resumable(_loaders()[name], seed=9, rank=rank, world_size=world)
    order.set_epoch(epoch)
    assert per_batch == (1 if world > 1 or name == "packed" else 4)
    return [_rows(batch) for batch in loader]


@pytest.mark.parametrize("name", ["shuffle", "length_grouped", "packed"])
@pytest.mark.parametrize("world", [2, 3])
def test_each_rank_takes_its_own_share_of_the_single_process_batches(name, world):
    single = _epoch(name, 0, 1)
    shares = [_epoch(name, rank, world) for rank in range(world)]
    assert len({len(share) for share in shares}) == 1  # every rank runs as many steps
    dealt = [batch for step in zip(*shares) for batch in step]
    # round-robin over the single-process batches, padded with the epoch's first ones
    assert dealt == [single[i % len(single)] for i in range(len(dealt))]
    assert len(dealt) - len(single) < world
    seen = [i for batch in dealt[: len(single)] for i in batch]
    assert sorted(seen) == list(range(len(LENGTHS)))  # disjoint, and the whole epoch
    assert _epoch(name, 1, world, epoch=1) != shares[1]  # a new order every epoch, on every rank


def test_a_restored_shard_continues_where_its_checkpoint_stopped():
    straight = _epoch("length_grouped", 1, 2)
    state = ResumeState()
    state.load_state_dict({"tokens": 0, "epoch": 0, "batches": 2, "world_size": 2})  # 2 steps done
    loader, order, per_batch = resumable(_loaders()["length_grouped"], seed=9, rank=1, world_size=2)
    state.skip_for(order, per_batch)
    assert [_rows(b) for b in loader] == straight[2:]
    assert [_rows(b) for b in loader] == straight  # the skip is the first pass's only
    assert len(loader) == len(straight)  # the trainer counts the skipped steps as done


def test_lightning_keeps_the_shard_instead_of_its_distributed_sampler():
    import lightning as L

    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", logger=False, enable_progress_bar=False)
    connector = trainer._data_connector
    for name, loader in _loaders().items():
        assert connector._requires_distributed_sampler(loader), name  # what it would replace
        sharded, order, _ = resumable(loader, seed=9, rank=0, world_size=2)
        assert isinstance(order, RankShard) and sharded.sampler is order
        assert not connector._requires_distributed_sampler(sharded), name


def test_a_shard_refuses_a_rank_outside_its_world():
    with pytest.raises(ValueError, match="rank 2 outside a world of 2"):
        RankShard(LengthGroupedBatches(LENGTHS, 4), 4, False, 2, 2)


def test_a_checkpoint_resumed_on_another_number_of_ranks_is_refused():
    # its batch count is each rank's: on another world size it would skip the wrong rows
    state = ResumeState()
    state.load_state_dict({"tokens": 0, "epoch": 0, "batches": 2, "world_size": 2})
    _, order, per_batch = resumable(_loaders()["shuffle"], seed=9, rank=0, world_size=3)
    with pytest.raises(ValueError, match="trained on 2 data-parallel rank.* this run has 3: resume it on as many"):
        state.skip_for(order, per_batch)
    _, single, per_batch = resumable(_loaders()["shuffle"], seed=9)
    with pytest.raises(ValueError, match="this run has 1"):
        state.skip_for(single, per_batch)
    state.load_state_dict({"tokens": 0, "epoch": 0, "batches": 2})  # a checkpoint that does not say
    state.skip_for(single, per_batch)
    assert single.skip == 8
