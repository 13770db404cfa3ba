"""AND-OR MCTS on the replay environment: the recorded tactics solve every replayable held-out
theorem; cycles (up to hypothesis order, names, whitespace) are rejected and counted."""

from __future__ import annotations

import json

import pandas as pd

from search.config import SearchConfig
from search.env import EnvGoal, EnvResult, EnvStatus, ProofEnv
from search.goals import parse_state
from search.mcts import Proposal, SearchBatch, start_searches
from search.policy import OraclePolicy


def test_oracle_policy_solves_every_replayable_held_out_theorem(search_data, replay):
    test = pd.read_parquet(search_data / "final" / "test.parquet")
    assert len(test) > 100
    config = SearchConfig(simulations=200, samples_per_expansion=8)
    searches, failed = start_searches(list(test["name"]), replay, config)
    assert not failed  # every held-out tree's root is a recorded goal
    SearchBatch(searches, OraclePolicy(replay, distractors=["simp", "omega"]), config).run()
    unsolved = [s.name for s in searches if not s.solved]
    assert not unsolved, unsolved[:5]
    by_name = dict(zip(test["name"], test["depth"]))
    for search in searches:
        proof = search.proof()
        # the shallowest proof found is never deeper than the recorded one, and uses only steps
        # the environment answered
        assert proof.depth <= by_name[search.name]
        for node in proof.nodes():
            assert replay.apply(EnvGoal(node.goals), node.tactic).ok
    assert sum(s.stats.unavailable for s in searches) > 0  # the distractors were tried and refused


class _LoopEnv(ProofEnv):
    """A goal whose tactics lead back to itself with the hypotheses renamed and reordered."""

    name = "loop"
    GOAL = "x y : ℕ\nh : x < y\nh2 : 0 < x\n⊢ x + 1 ≤ y"
    RENAMED = "x y : ℕ\nhpos : 0 < x\nhlt : x   <  y\n⊢ x + 1 ≤ y"

    def _start(self, theorem: str) -> EnvResult:
        return EnvResult(EnvStatus.OK, [EnvGoal(tuple(parse_state(self.GOAL)))])

    def _apply(self, goal, tactic, timeout):
        if tactic == "rename_i":
            return EnvResult(EnvStatus.OK, [EnvGoal(tuple(parse_state(self.RENAMED)))])
        if tactic == "omega":
            return EnvResult(EnvStatus.OK, [])
        return EnvResult(EnvStatus.ERROR, error="nope")


class _ListPolicy:
    def __init__(self, tactics):
        self.tactics = tactics

    def propose(self, states, samples):
        return [Proposal([(t, 0.0) for t in self.tactics], 2.0) for _ in states]


def test_cycles_are_rejected_and_counted():
    env = _LoopEnv()
    config = SearchConfig(simulations=5)
    searches, _ = start_searches(["t"], env, config)
    SearchBatch(searches, _ListPolicy(["rename_i", "exact foo"]), config).run()
    search = searches[0]
    assert search.stats.cycles >= 1 and search.stats.errors >= 1
    assert not search.root.edges and not search.solved  # the renamed goal never became a child
    searches, _ = start_searches(["t"], env, config)
    SearchBatch(searches, _ListPolicy(["rename_i", "omega", "omega "]), config).run()
    assert searches[0].solved and searches[0].proof().tactic == "omega"
    assert searches[0].stats.duplicates == 1 and searches[0].stats.cycles == 1


def test_search_prefers_the_shorter_proof_and_keeps_going_any_time(search_data, replay):
    # a recorded theorem with a multi-step proof: the tree's edges, offered all at once
    test = pd.read_parquet(search_data / "final" / "train.parquet")
    row = test[test["depth"] >= 3].iloc[0]
    config = SearchConfig(simulations=3)
    searches, _ = start_searches([row["name"]], replay, config)
    batch = SearchBatch(searches, OraclePolicy(replay), config)
    batch.run(budget=1)
    assert searches[0].stats.iterations == 1 and not searches[0].solved
    batch.run(budget=200)  # any-time: the same tree keeps growing
    assert searches[0].solved
    assert searches[0].proof().depth == json.loads(row["tree"])["depth"]
