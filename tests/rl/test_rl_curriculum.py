"""Curriculum transitions (retire always/never solved, keep the solvable, re-admit within a budget)
and the replay buffer of successful proofs."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from rl.curriculum import (
    ACTIVE,
    ALWAYS_SOLVED,
    DROPPED,
    NEVER_SOLVED,
    TRIVIAL,
    Curriculum,
    CurriculumConfig,
    ReplayBuffer,
    ReplayConfig,
    StoredProof,
)


def test_retire_keep_and_readmit():
    c = Curriculum(
        ["easy", "hard", "mid", "gone"], CurriculumConfig(retire_after=8, readmit_after_steps=3, readmission_budget=1)
    )
    c.set_status("gone", DROPPED, 0, "negation_proved")
    for step in (1, 2):
        c.record("easy", 4, 4, step)
        c.record("hard", 4, 0, step)
        c.record("mid", 4, 1, step)
    states = c.states
    assert (states["easy"].status, states["hard"].status, states["mid"].status) == (ALWAYS_SOLVED, NEVER_SOLVED, ACTIVE)
    assert states["easy"].retired_at == 2 and states["easy"].reason == "solved 8/8"
    # fewer attempts than retire_after decide nothing
    c2 = Curriculum(["x"], CurriculumConfig(retire_after=8))
    c2.record("x", 4, 4, 1)
    assert c2.states["x"].status == ACTIVE
    # sampling draws only active statements; never the dropped one
    names, exhausted = c.sample(1, step=3)
    assert names == ["mid"] and not exhausted
    # re-admission after readmit_after_steps, once
    assert c.readmit(4) == []
    assert sorted(c.readmit(5)) == ["easy", "hard"]
    assert states["easy"].status == ACTIVE and states["easy"].window_attempts == 0 and states["easy"].attempts == 8
    c.record("hard", 8, 0, 6)
    assert states["hard"].status == NEVER_SOLVED
    assert c.readmit(20) == []  # budget spent: retired for good
    transitions = [(t.name, t.before, t.after) for t in c.transitions]
    assert ("hard", NEVER_SOLVED, ACTIVE) in transitions and transitions.count(("hard", ACTIVE, NEVER_SOLVED)) == 2
    assert c.counts() == {
        "curriculum/active": 2.0,
        "curriculum/always_solved": 0.0,
        "curriculum/never_solved": 1.0,
        "curriculum/trivial": 0.0,
        "curriculum/dropped": 1.0,
    }


def test_trivial_statements_are_never_readmitted():
    """The filters' trivial statements teach nothing: re-admission (which used to bring them back at
    readmit_after_steps, "step 50 -> active, re-admitted") and an exhausted curriculum leave them out."""
    c = Curriculum(["easy", "t"], CurriculumConfig(retire_after=1, readmit_after_steps=0, readmission_budget=5))
    c.set_status("t", TRIVIAL, 0, "trivial (filters)")
    assert c.readmit(50) == [] and c.states["t"].status == TRIVIAL
    c.record("easy", 1, 1, 1)
    names, exhausted = c.sample(3, step=1)  # readmits easy (budget left), never t
    assert "t" not in names and not exhausted
    c.config.readmission_budget = 0
    c.record("easy", 1, 1, 2)
    names, exhausted = c.sample(3, step=3)
    assert exhausted and set(names) == {"easy"}
    assert c.counts()["curriculum/trivial"] == 1.0


def test_exhausted_curriculum_samples_everything_but_dropped():
    c = Curriculum(["a", "b", "c"], CurriculumConfig(retire_after=1, readmission_budget=0), seed=1)
    c.set_status("c", DROPPED, 0)
    c.record("a", 1, 1, 1)
    c.record("b", 1, 0, 1)
    names, exhausted = c.sample(4, step=2)
    assert exhausted and set(names) <= {"a", "b"} and len(names) == 4


def test_disabled_curriculum_never_retires():
    c = Curriculum(["a"], CurriculumConfig(enabled=False, retire_after=1))
    c.record("a", 5, 5, 1)
    assert c.states["a"].status == ACTIVE and c.states["a"].successes == 5


def test_replay_buffer_keeps_trusted_sources_dedups_and_caps():
    buffer = ReplayBuffer(ReplayConfig(capacity_per_statement=2, sources=["lean"]))
    assert not buffer.add("t", StoredProof("by simp", [1, 2], "evaluator", 1))  # not trusted by default
    assert buffer.add("t", StoredProof("by simp", [1, 2], "lean", 1))
    assert not buffer.add("t", StoredProof("by simp", [1, 2], "lean", 2))  # same proof
    buffer.add("t", StoredProof("by norm_num", [3], "lean", 3))
    buffer.add("t", StoredProof("by linarith", [4], "lean", 4))
    assert len(buffer) == 2 and [p.completion for p in buffer.proofs["t"]] == ["by norm_num", "by linarith"]
    assert buffer.get("t", random.Random(0)).completion in {"by norm_num", "by linarith"}
    assert buffer.get("unknown", random.Random(0)) is None
    restored = ReplayBuffer(ReplayConfig(capacity_per_statement=2, sources=["lean"]))
    restored.load_state_dict(buffer.state_dict())  # what a checkpoint holds: the proofs, in order
    assert restored.proofs == buffer.proofs
    assert restored.get("t", random.Random(7)) == buffer.get("t", random.Random(7))


def test_config_validation():
    with pytest.raises(ValueError):
        CurriculumConfig(retire_after=0)
    with pytest.raises(ValueError, match="at least one"):
        Curriculum([])


def _ranks(names, world, seed):
    return [Curriculum(names, CurriculumConfig(retire_after=8, readmit_after_steps=2), seed=seed) for _ in range(world)]


def _step(curricula, step, k):
    """One step on every simulated rank: each draws its slice, then every rank applies every
    rank's updates (rl.module gathers them with all_gather_object)."""
    from rl.curriculum import CurriculumEvents

    draws, per_rank = [], []
    for rank, c in enumerate(curricula):
        names, _ = c.sample(k, step, rank, len(curricula))
        events = CurriculumEvents()
        for name in names:  # a deterministic outcome per statement: some always, some never solved
            events.record(name, 8, 8 * (int(name[4:]) % 3 == 0), step)
        draws.append(names)
        per_rank.append(events.events)
    for c in curricula:
        CurriculumEvents.apply(c, per_rank)
    return draws


def test_eight_ranks_draw_disjoint_problems_128_per_step_deterministic_and_resumable():
    """LLF Sec. 6: "eight rollouts for each of 128 problems per step" = 16 problems x 8 ranks, each
    rank its own 16 (all ranks share data.seed; before, all 8 drew the same 16)."""
    names = [f"thm_{i}" for i in range(1000)]
    curricula = _ranks(names, 8, seed=3)
    steps = [_step(curricula, step, 16) for step in range(6)]
    for draws in steps:
        assert [len(d) for d in draws] == [16] * 8
        assert len(set().union(*map(set, draws))) == 128  # disjoint across ranks and within each
    assert all(c.state_dict() == curricula[0].state_dict() for c in curricula)  # the copies stay identical
    again = _ranks(names, 8, seed=3)
    assert [_step(again, step, 16) for step in range(6)] == steps  # deterministic per seed
    other = _ranks(names, 8, seed=4)
    assert _step(other, 0, 16) != steps[0]
    # resume: curricula restored from a checkpointed state draw what the uninterrupted run draws
    first = _ranks(names, 8, seed=3)
    for step in range(3):
        _step(first, step, 16)
    saved = first[0].state_dict()
    resumed = _ranks(names, 8, seed=99)
    for c in resumed:
        c.load_state_dict(saved)
    assert [_step(resumed, step, 16) for step in range(3, 6)] == steps[3:]


def test_a_pool_smaller_than_the_step_is_spread_evenly():
    c = Curriculum(["a", "b", "c"], seed=0)
    drawn = [c2.sample(2, 0, rank, 4)[0] for rank, c2 in enumerate(_ranks(["a", "b", "c"], 4, seed=0))]
    flat = [n for d in drawn for n in d]
    assert sorted(Counter(flat).values()) == [2, 3, 3]  # whole permutations, not independent draws
    with pytest.raises(ValueError, match="rank 4 outside a world of 4"):
        c.sample(1, 0, 4, 4)


def test_rl_data_streams_each_ranks_slice_and_checkpoints_its_draws():
    """The data module under 8 simulated ranks on miniF2F's 488 statements: each rank's stream
    yields its own 16 problems; a module restored from the state Lightning checkpoints continues
    where the stream was: first the batch the trainer had fetched ahead but not trained on, then
    the draws after it."""
    from types import SimpleNamespace

    from rl.config import FilterConfig, StatementsConfig
    from rl.data import RLData

    def data(rank):
        module = RLData(
            StatementsConfig(path="shared://statements/minif2f_deepseek_prover_v1.5.jsonl"),
            problems_per_step=16,
            filters=FilterConfig(enabled=False),
            seed=5,
        )
        module.trainer = SimpleNamespace(global_rank=rank, world_size=8, is_global_zero=rank == 0)
        module.setup("fit")
        return module

    ranks = [data(rank) for rank in range(8)]
    streams = [iter(r.train_dataloader()) for r in ranks]
    drawn = []
    for _ in range(2):
        batches = [next(stream) for stream in streams]
        assert len({s.name for b in batches for s in b}) == 128
        drawn.append(batches[3])
    ranks[3].consumed(drawn[0])  # trained on the first; the second was fetched ahead
    with pytest.raises(RuntimeError, match="the oldest drawn batch is"):
        ranks[3].consumed(drawn[0])
    saved = ranks[3].state_dict()
    assert saved["step"] == 2 and saved["pending"] == [[s.name for s in drawn[1]]]
    expected = [[s.name for s in drawn[1]], [s.name for s in next(streams[3])]]
    restored = RLData(
        StatementsConfig(path="shared://statements/minif2f_deepseek_prover_v1.5.jsonl"),
        problems_per_step=16,
        filters=FilterConfig(enabled=False),
        seed=0,
    )
    restored.trainer = SimpleNamespace(global_rank=3, world_size=8, is_global_zero=False)
    restored.load_state_dict(saved)  # Lightning may restore before setup: applied there
    restored.setup("fit")
    stream = iter(restored.train_dataloader())
    assert [[s.name for s in next(stream)] for _ in range(2)] == expected


def test_without_the_curriculum_each_statement_comes_once_per_epoch():
    """LLF trains "for one epoch" on its filtered problems: with the curriculum off, a run of
    len/k steps draws every kept statement exactly once (not k at random each step)."""
    names = [f"s{i}" for i in range(12)]
    c = Curriculum(names, CurriculumConfig(enabled=False), seed=3)
    c.set_status("s0", DROPPED, 0, "compile_error")
    drawn = [n for step in range(1, 12) for n in c.sample(1, step)[0]]
    assert sorted(drawn) == sorted(names[1:])
    drawn = [n for step in range(12, 23) for n in c.sample(1, step)[0]]
    assert sorted(drawn) == sorted(names[1:])  # the next epoch, reshuffled
    # under 4 ranks (each its own copy, same seed) a step's draws are disjoint and an epoch covers all
    ranks = [Curriculum(names, CurriculumConfig(enabled=False), seed=3) for _ in range(4)]
    steps = [[r.sample(1, step, rank, 4)[0][0] for rank, r in enumerate(ranks)] for step in range(3)]
    assert all(len(set(s)) == 4 for s in steps) and sorted(n for s in steps for n in s) == sorted(names)
