"""Sharded sampling with a tiny real Qwen3: shards merge to the unsharded result byte for byte, and a
killed shard resumes without resampling finished statements."""

from __future__ import annotations

import pytest

from leanloop.prover.generation import SamplingConfig
from leanloop.prover.shards import SampleJournal, ShardError, merge_journals
from leanloop.sharding import MergeRefused, Shard, ShardSpecError, process_shard, shard_dir
from leanloop.training.models import ModelSpec
from sft.config import SampleConfig, StatementsConfig
from sft.sample import load_statement_set, run, sample_dir


class CountingGenerator:
    """The real generator, counting which statements it is asked for."""

    def __init__(self, inner):
        self.inner, self.names = inner, []

    def sample_batch(self, prompts, names, config):
        self.names += list(names)
        return self.inner.sample_batch(prompts, names, config)


def _config(prover, run_name, shard=None, temperature=1.0, merge_shards=0):
    return SampleConfig(
        model=ModelSpec(name=str(prover)),
        run=run_name,
        statements=StatementsConfig(path="shared://statements/minif2f_goedel_prover_v2_repaired.jsonl", limit=4),
        sampling=SamplingConfig(k=2, max_new_tokens=4, temperature=temperature),
        shard=shard,
        merge_shards=merge_shards,
    )


def test_shards_merge_to_the_unsharded_file_and_resume(tiny_prover, tiny_generator, artifacts):
    whole = run(_config(tiny_prover, "whole"), tiny_generator).read_bytes()
    statements = load_statement_set(_config(tiny_prover, "split").statements)
    names = [s.name for s in statements]

    for index in range(3):
        assert run(_config(tiny_prover, "split", f"{index}/3"), tiny_generator) is None
    # each shard holds exactly the statements the stable hash gives it, in statement-set order
    held = {index: list(SampleJournal(shard_dir(sample_dir("split"), Shard(index, 3)), 2).done) for index in range(3)}
    assert held == {index: [n for n in names if Shard(index, 3).owns(n)] for index in range(3)}
    merged = run(_config(tiny_prover, "split", merge_shards=3), tiny_generator)
    assert merged.read_bytes() == whole

    # kill the fullest shard mid-statement: keep its first statement, one row of the next, half a line
    index = max(range(3), key=lambda i: len(held[i]))
    assert len(held[index]) >= 2
    journal = shard_dir(sample_dir("split"), Shard(index, 3)) / "journal.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])
    (shard_dir(sample_dir("split"), Shard(index, 3)) / "manifest.json").unlink()
    (sample_dir("split") / "manifest.json").unlink()
    with pytest.raises(MergeRefused, match=f"shard {index}/3 is unfinished"):
        run(_config(tiny_prover, "split", merge_shards=3), tiny_generator)
    counting = CountingGenerator(tiny_generator[0])
    assert run(_config(tiny_prover, "split", f"{index}/3"), (counting, tiny_generator[1])) is None
    assert counting.names == held[index][1:]  # only the unfinished statements are sampled again
    assert run(_config(tiny_prover, "split", merge_shards=3), tiny_generator).read_bytes() == whole

    with pytest.raises(ShardError, match="different sampling"):
        run(_config(tiny_prover, "split", f"{index}/3", temperature=0.7), tiny_generator)
    with pytest.raises(ShardSpecError, match="pass one of the two"):
        run(_config(tiny_prover, "split", "0/3", merge_shards=3), tiny_generator)


def test_merge_names_missing_statements_and_their_shards(tmp_path):
    owner = Shard(1, 2) if Shard(1, 2).owns("b") else Shard(0, 2)
    SampleJournal(shard_dir(tmp_path, Shard(1 - owner.index, 2)), k=1).append("a", [{"name": "a", "attempt": 0}])
    with pytest.raises(MergeRefused, match=rf"unfinished shards: \[{owner.index}\]"):
        merge_journals(tmp_path, 2, ["a", "b"], k=1)
    with pytest.raises(MergeRefused, match="outside this statement set"):
        merge_journals(tmp_path, 2, [], k=1)
    with pytest.raises(ShardError, match="expected k=1"):
        SampleJournal(tmp_path, k=1).append("c", [])


def test_an_array_task_picks_its_shard(monkeypatch):
    for name in (
        "LEANLOOP_SHARD_INDEX",
        "LEANLOOP_SHARD_COUNT",
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_MIN",
        "SLURM_ARRAY_TASK_COUNT",
    ):
        monkeypatch.delenv(name, raising=False)
    assert process_shard(None) is None
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "5")
    monkeypatch.setenv("SLURM_ARRAY_TASK_MIN", "2")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "4")
    assert process_shard(None) == Shard(3, 4)
    assert process_shard("0/2") == Shard(0, 2)  # the option wins
    monkeypatch.setenv("LEANLOOP_SHARD_INDEX", "6")  # cluster.submit's array tasks
    monkeypatch.setenv("LEANLOOP_SHARD_COUNT", "8")
    assert process_shard(None) == Shard(6, 8)
    monkeypatch.delenv("LEANLOOP_SHARD_COUNT")
    with pytest.raises(ShardSpecError, match="how many shards"):
        process_shard(None)
