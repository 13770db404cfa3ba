"""Sharded sampling with a tiny real Qwen3: shards merge to the unsharded result byte for byte, and a
killed shard resumes without resampling finished statements."""

from __future__ import annotations

import pytest

from leanloop.training.models import ModelSpec
from sft.config import SampleConfig, ShardConfig, StatementsConfig
from leanloop.prover.generation import SamplingConfig
from sft.sample import load_statement_set, run, sample_dir
from leanloop.prover.shards import ShardError, ShardFile, ShardSpec, merge_shards, shard_from_env


class CountingGenerator:
    """The real generator, counting which statements it is asked for."""

    def __init__(self, inner):
        self.inner, self.names = inner, []

    def sample_batch(self, prompts, names, config):
        self.names += list(names)
        return self.inner.sample_batch(prompts, names, config)


def _config(prover, run_name, shard=None, temperature=1.0):
    return SampleConfig(
        model=ModelSpec(name=str(prover)), run=run_name,
        statements=StatementsConfig(path="shared://statements/minif2f_goedel_prover_v2_repaired.jsonl",
                                    limit=3),
        sampling=SamplingConfig(k=2, max_new_tokens=4, temperature=temperature),
        shard=shard or ShardConfig())



def test_shards_merge_to_the_unsharded_file_and_resume(tiny_prover, tiny_generator, artifacts):
    whole = run(_config(tiny_prover, "whole"), tiny_generator).read_bytes()

    assert run(_config(tiny_prover, "split", ShardConfig(index=0, count=2)), tiny_generator) is None
    merged = run(_config(tiny_prover, "split", ShardConfig(index=1, count=2)), tiny_generator)
    assert merged.read_bytes() == whole

    # kill shard 0 mid-statement: keep its first statement, one row of the next, half a line
    shard0 = sample_dir("split") / "shards" / ShardSpec(0, 2).file_name()
    lines = shard0.read_text().splitlines(keepends=True)
    assert len(lines) == 4  # statements 0 and 2 of 3, k=2 each
    shard0.write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])
    (sample_dir("split") / "final" / "candidates.jsonl").unlink()
    counting = CountingGenerator(tiny_generator[0])
    statements = load_statement_set(_config(tiny_prover, "split").statements)
    merged = run(_config(tiny_prover, "split", ShardConfig(index=0, count=2)), (counting, tiny_generator[1]))
    assert counting.names == [statements[2].name]  # only the unfinished statement is sampled again
    assert merged.read_bytes() == whole

    with pytest.raises(ShardError, match="different sampling"):
        run(_config(tiny_prover, "split", ShardConfig(index=0, count=2), temperature=0.7), tiny_generator)


def test_merge_names_missing_shards(tmp_path):
    ShardFile(tmp_path / ShardSpec(0, 2).file_name(), k=1).append("a", [{"name": "a", "attempt": 0}])
    with pytest.raises(ShardError, match=r"unfinished shards: \[1\]"):
        merge_shards(tmp_path, 2, ["a", "b"], k=1)
    assert merge_shards(tmp_path, 2, ["a"], k=1) == [{"name": "a", "attempt": 0}]
    with pytest.raises(ShardError, match="expected k=1"):
        ShardFile(tmp_path / "x.jsonl", k=1).append("c", [])


def test_slurm_array_task_picks_the_shard(monkeypatch):
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "5")
    monkeypatch.setenv("SLURM_ARRAY_TASK_MIN", "2")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "4")
    assert shard_from_env(None, None) == ShardSpec(3, 4)
    assert shard_from_env(0, 2) == ShardSpec(0, 2)  # explicit config wins
    assert ShardSpec(3, 4).select(list(range(10))) == [3, 7]
    monkeypatch.setenv("LEANLOOP_SHARD_INDEX", "6")  # cluster.submit's array tasks
    monkeypatch.setenv("LEANLOOP_SHARD_COUNT", "8")
    assert shard_from_env(None, None) == ShardSpec(6, 8)
    monkeypatch.delenv("LEANLOOP_SHARD_COUNT")
    monkeypatch.delenv("SLURM_ARRAY_TASK_COUNT")
    with pytest.raises(ShardError, match="how many shards"):
        shard_from_env(None, None)
