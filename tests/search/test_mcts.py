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
    # fixed widening: with evidence widening an oracle's first choices always apply, so its goals
    # are never re-sampled and the distractors never run
    config = SearchConfig(simulations=200, samples_per_expansion=8, widening="fixed")
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
    config = SearchConfig(simulations=5, first_expansion_samples=None)  # every proposed tactic at once
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


class _TranspositionEnv(ProofEnv):
    """R --split--> [A, E] and R --other--> [C, F]; E and C close; A --reduce--> [C]; F is stuck. C
    is solved through the second edge, which leaves A (and so R through the first edge) stale:
    the selection finds R solved only when it walks into A's solved edge."""

    name = "transposition"
    MOVES = {
        ("R", "split"): ["A", "E"],
        ("R", "other"): ["C", "F"],
        ("E", "close"): [],
        ("C", "close"): [],
        ("A", "reduce"): ["C"],
    }

    def _start(self, theorem):
        return EnvResult(EnvStatus.OK, [EnvGoal(tuple(parse_state("⊢ R")))])

    def _apply(self, goal, tactic, timeout):
        result = self.MOVES.get((goal.goals[0].target, tactic))
        if result is None:
            return EnvResult(EnvStatus.ERROR, error="no")
        return EnvResult(EnvStatus.OK, [EnvGoal(tuple(parse_state(f"⊢ {t}"))) for t in result])


class _ScriptPolicy:
    SCRIPT = {
        "R": [("split", 0.0), ("other", 0.0)],
        "A": [("reduce", 0.0)],
        "E": [("close", 0.0)],
        "C": [("close", 0.0)],
        "F": [("stuck", 0.0)],
    }

    def propose(self, states, samples):
        return [Proposal(list(self.SCRIPT[parse_state(s)[0].target]), 1.0) for s in states]


def test_a_root_solved_through_a_stale_transposition_records_its_iteration():
    from search.evaluate import SearchEvalConfig, summarize
    from search.simplify import SimplifyStats

    env = _TranspositionEnv()
    config = SearchConfig(simulations=30, widening_c=0.0, first_play_urgency=0.0)
    searches, _ = start_searches(["t"], env, config)
    search = searches[0]
    SearchBatch(searches, _ScriptPolicy(), config).run()
    assert search.solved
    a = search.table[EnvGoal(tuple(parse_state("⊢ A"))).key]
    assert a.solved_depth is not None  # refreshed on the way down, not by a backup
    assert search.stats.solved_at_iteration is not None and search.stats.env_calls_to_solve is not None
    row = {"theorem": "t", "started": True, "solved": True, "proof": {}, **search.stats.__dict__}
    metrics = summarize([row], SearchEvalConfig(budgets=[1, 30], baseline=False), SimplifyStats())
    assert metrics["solved_vs_budget"]["30"] == 1
    # a row written before the iteration was always recorded still summarizes (its iterations bound it)
    metrics = summarize(
        [{**row, "solved_at_iteration": None}], SearchEvalConfig(budgets=[1, 30], baseline=False), SimplifyStats()
    )
    assert metrics["solved"] == 1


class _WideEnv(ProofEnv):
    """Every tactic fails: each expansion of the root shows how many tactics it ran."""

    name = "wide"

    def _start(self, theorem):
        return EnvResult(EnvStatus.OK, [EnvGoal(tuple(parse_state("⊢ R")))])

    def _apply(self, goal, tactic, timeout):
        return EnvResult(EnvStatus.ERROR, error="no")


def test_re_expansions_widen_and_the_call_budget_binds():
    tactics = [f"t{i}" for i in range(16)]
    config = SearchConfig(simulations=5, samples_per_expansion=8, first_expansion_samples=1, expansion_growth=2.0)
    searches, _ = start_searches(["t"], _WideEnv(), config)
    SearchBatch(searches, _ListPolicy(tactics), config).run()
    # a root with no applicable tactic is re-expanded every iteration: 1, 2, 4, 8, then the 1 left unused
    assert searches[0].stats.env_calls == 1 + 2 + 4 + 8 + 1 and searches[0].root.expansions == 5
    searches, _ = start_searches(["t"], _WideEnv(), config)
    SearchBatch(searches, _ListPolicy(tactics), config).run(budget=100, calls=6)
    assert searches[0].stats.env_calls == 6  # 1 + 2 + then only the 3 that fit


class _ScriptedPolicy:
    """Proposes the given lists in turn, best first."""

    def __init__(self, *proposals):
        self.proposals = list(proposals)
        self.calls = 0

    def propose(self, states, samples):
        tactics = self.proposals[min(self.calls, len(self.proposals) - 1)]
        self.calls += 1
        return [Proposal([(t, -0.1 * rank) for rank, t in enumerate(tactics)], 2.0) for _ in states]


def test_frequency_order_runs_the_tactic_proposed_most_often_first():
    def second_tactic_run(order):
        config = SearchConfig(simulations=2, samples_per_expansion=3, first_expansion_samples=1, candidate_order=order)
        searches, _ = start_searches(["t"], _WideEnv(), config)
        SearchBatch(searches, _ScriptedPolicy(["a", "b", "c"], ["d", "b", "e"]), config).run()
        assert searches[0].root.expansions == 2 and searches[0].stats.env_calls == 2
        return searches[0].root.tried - {"a"}

    # "b" is in both proposals: the samples say the policy puts more mass on it than on "d", which
    # led only the second proposal
    assert second_tactic_run("frequency") == {"b"}
    assert second_tactic_run("rank") == {"d"}


class _TwoWayEnv(ProofEnv):
    """``a`` and ``b`` each lead to a goal where nothing applies; every other tactic fails."""

    name = "two_way"

    def _start(self, theorem):
        return EnvResult(EnvStatus.OK, [EnvGoal(tuple(parse_state("⊢ R")))])

    def _apply(self, goal, tactic, timeout):
        if goal.text == "⊢ R" and tactic in ("a", "b"):
            return EnvResult(EnvStatus.OK, [EnvGoal(tuple(parse_state(f"⊢ {tactic.upper()}")))])
        return EnvResult(EnvStatus.ERROR, error="no")


def test_frequency_priors_follow_how_often_each_edge_was_proposed():
    config = SearchConfig(
        simulations=3,
        samples_per_expansion=2,
        first_expansion_samples=1,
        widening_c=1.5,
        candidate_order="frequency",
        edge_prior="frequency",
        widening="fixed",
    )
    searches, _ = start_searches(["t"], _TwoWayEnv(), config)
    SearchBatch(searches, _ScriptedPolicy(["a", "b"], ["x"], ["b", "c"]), config).run()
    root = searches[0].root
    assert [e.tactic for e in root.edges] == ["a", "b"]  # a first (tie, better rank), then b: proposed twice
    searches[0].select()
    assert {e.tactic: e.prior for e in root.edges} == {"a": 1, "b": 2}


def test_evidence_order_follows_whichever_reading_of_the_samples_has_applied():
    """Three proposals: ``w`` in each (most frequent), ``f1``..``f3`` each first once. The evidence
    order runs ``w`` while the most-proposed picks have applied more often than the first choices,
    and the first choice once they have not; the edge priors follow the same scores."""

    def first_run(count_hits: int, first_hits: int):
        config = SearchConfig()
        (search,) = start_searches(["t"], _TwoWayEnv(), config)[0]
        for rule, hits in (("count", count_hits), ("first", first_hits)):
            for index in range(4):
                search.evidence.record(rule, index < hits)
        leaf = search.root
        for first in ("f1", "f2", "f3"):
            tried = search.candidates(leaf, Proposal([(first, 0.0), ("w", -1.0)], 1.0))
        return tried[0][0], search.evidence.score(leaf.proposed["w"]), search.evidence.score(leaf.proposed["f3"])

    tactic, w, f = first_run(count_hits=4, first_hits=0)
    assert tactic == "w" and w > f
    tactic, w, f = first_run(count_hits=0, first_hits=4)
    assert tactic == "f1" and w < f  # the first choices tie: the earliest proposed runs first


def test_evidence_widening_resamples_less_where_first_choices_apply():
    config = SearchConfig()
    (search,) = start_searches(["t"], _TwoWayEnv(), config)[0]
    node = search.root
    node.expansions, node.visits = 1, 4  # fixed widening (c 1.5): 1 <= 1.5 * 2 - 1, re-sample
    assert search._widen(node)
    for _ in range(20):
        search.evidence.opened[0] += 1
        search.evidence.opened[1] += 1
    assert not search._widen(node)


class _RecordingPolicy(_ScriptedPolicy):
    """``_ScriptedPolicy`` that keeps the goal texts of each call."""

    def __init__(self, *proposals):
        super().__init__(*proposals)
        self.asked = []

    def propose(self, states, samples):
        self.asked.append(list(states))
        return super().propose(states, samples)


class _ChainEnv(ProofEnv):
    """``a`` leads from R to A and from A to B, where nothing applies; every other tactic fails."""

    name = "chain"

    def _start(self, theorem):
        return EnvResult(EnvStatus.OK, [EnvGoal(tuple(parse_state("⊢ R")))])

    def _apply(self, goal, tactic, timeout):
        following = {"⊢ R": "⊢ A", "⊢ A": "⊢ B"}
        if tactic == "a" and goal.text in following:
            return EnvResult(EnvStatus.OK, [EnvGoal(tuple(parse_state(following[goal.text])))])
        return EnvResult(EnvStatus.ERROR, error="no")


def test_path_proposals_count_the_goals_above_the_leaf():
    """A selection that ends below the root asks the policy, in the leaf's call, about the root
    (``root``) or every goal above the leaf (``path``), and counts those proposals there: the root's
    counts follow its visits, not only its expansions. The leaf's proposal is the one its expansion
    runs, asked first."""

    def run(path_proposals):
        config = SearchConfig(simulations=8, widening="fixed", path_proposals=path_proposals)
        (search,) = start_searches(["t"], _ChainEnv(), config)[0]
        policy = _RecordingPolicy(["a", "b"])
        SearchBatch([search], policy, config).run()
        assert len(policy.asked) == search.stats.iterations == 8
        return search.root, policy.asked

    above = {"⊢ R": [], "⊢ A": ["⊢ R"], "⊢ B": ["⊢ R", "⊢ A"]}
    root, asked = run("path")
    assert {states[0] for states in asked} == set(above)  # every depth was a leaf
    assert all(states[1:] == above[states[0]] for states in asked)
    assert root.proposed["a"][0] == len(asked) > root.expansions  # every call counted at the root
    root, asked = run("root")
    assert all(states[1:] == above[states[0]][:1] for states in asked)
    assert root.proposed["a"][0] == len(asked) > root.expansions
    root, asked = run("leaf")
    assert all(len(states) == 1 for states in asked)
    assert root.proposed["a"][0] == root.expansions < len(asked)
