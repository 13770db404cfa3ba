"""AND-OR Monte Carlo tree search over factorized Lean goals (NanoProof Section 3)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from search.config import SearchConfig
from search.env import EnvGoal, EnvResult, EnvStatus, ProofEnv
from search.goals import node_cycle_key
from search.sampling import dedupe
from search.trees import TreeNode


@dataclass
class Proposal:
    """A policy's answer for one goal: tactics with log-probabilities, and the critic's expected
    number of tactics left to finish the proof (>= 0)."""

    tactics: list[tuple[str, float]]
    distance: float


class Policy(Protocol):
    def propose(self, states: Sequence[str], samples: int) -> list[Proposal]:
        """One ``Proposal`` per goal text (a batch: one model call for all)."""


@dataclass(eq=False)
class GoalNode:
    goal: EnvGoal
    edges: list["TacticEdge"] = field(default_factory=list)
    visits: int = 0
    value_sum: float = 0.0
    expansions: int = 0
    tried: set[str] = field(default_factory=set)
    solved_depth: int | None = None
    # tactic key -> [times proposed, best log-prob, spelling, times proposed first]
    proposed: dict[str, list] = field(default_factory=dict)
    picks: dict[str, str] = field(default_factory=dict)  # rule -> the untried tactic it would run now

    def __post_init__(self) -> None:
        self.key = self.goal.key
        self.cycle_key = node_cycle_key(self.goal.goals)

    @property
    def value(self) -> float:
        if self.solved_depth is not None:
            return -float(self.solved_depth)
        return self.value_sum / self.visits if self.visits else 0.0

    def refresh_solved(self) -> None:
        depths = [e.solved_depth for e in self.edges if e.solved_depth is not None]
        if depths:
            self.solved_depth = min(depths)


@dataclass(eq=False)
class TacticEdge:
    tactic: str
    prior: float
    children: list[GoalNode]
    visits: int = 0
    value_sum: float = 0.0

    @property
    def solved_depth(self) -> int | None:
        depths = [c.solved_depth for c in self.children]
        if any(d is None for d in depths):
            return None
        return 1 + max(depths, default=0)

    @property
    def value(self) -> float:
        depth = self.solved_depth
        if depth is not None:
            return -float(depth)
        return self.value_sum / self.visits if self.visits else 0.0


class RuleEvidence:
    """What the search has seen its policy's samples do (``candidate_order``, ``edge_prior`` and
    ``widening`` "evidence" read it).

    - Two readings of a goal's samples: ``count`` (the untried tactic proposed most often there)
      and ``first`` (the one proposed first most often: the policy's top choice), each with a hit
      rate: how often its pick applied where the two picks differed and the expansion ran it (where
      they agree the outcome says nothing about which reads the samples better). Starting at 1/2
      (a uniform prior): where repeated wrong tactics make the most frequent proposal wrong,
      ``count`` loses weight; where the first choice is unreliable, ``first`` does. A tactic's
      score is its two counts weighted by (rate / best rate) ** ``sharpness``.
    - ``opened_rate``: how often a goal's first expansion applied a tactic, how far the policy's
      first choices can be trusted to stand (``widening`` evidence)."""

    RULES = ("count", "first")

    def __init__(self, sharpness: float = 4.0) -> None:
        self.sharpness = sharpness
        self.hits = {rule: 1.0 for rule in self.RULES}
        self.trials = {rule: 2.0 for rule in self.RULES}
        self.opened = [1.0, 2.0]

    def record(self, rule: str, hit: bool) -> None:
        self.hits[rule] += hit
        self.trials[rule] += 1

    def weight(self, rule: str) -> float:
        return self.hits[rule] / self.trials[rule]

    def score(self, entry: list) -> float:
        """A ``GoalNode.proposed`` entry's evidence score: its counts, each weighted by its rule's rate."""
        weights = {rule: self.weight(rule) for rule in self.RULES}
        top = max(weights.values())
        return sum(
            (weights[rule] / top) ** self.sharpness * entry[index] for rule, index in (("count", 0), ("first", 3))
        )

    @property
    def opened_rate(self) -> float:
        """How often a goal's first expansion applied a tactic (a uniform prior: 1/2 at first)."""
        return self.opened[0] / self.opened[1]


@dataclass
class SearchStats:
    iterations: int = 0
    expansions: int = 0
    env_calls: int = 0
    tactics_sampled: int = 0
    duplicates: int = 0
    cycles: int = 0
    errors: int = 0
    unavailable: int = 0
    timeouts: int = 0
    infra_errors: int = 0
    model_s: float = 0.0
    env_s: float = 0.0
    solved_at_iteration: int | None = None
    env_calls_to_solve: int | None = None


class Search:
    """One theorem's search tree."""

    def __init__(self, name: str, root: EnvGoal, env: ProofEnv, config: SearchConfig) -> None:
        self.name = name
        self.env = env
        self.config = config
        self.root = GoalNode(root)
        self.table: dict[str, GoalNode] = {self.root.key: self.root}
        self.stats = SearchStats()
        # SearchBatch shares one among its searches (evidence_scope batch)
        self.evidence = RuleEvidence(config.evidence_sharpness)

    @property
    def solved(self) -> bool:
        return self.root.solved_depth is not None

    def done(self, budget: int, calls: int | None = None) -> bool:
        """Solved, or out of iterations, or (with ``calls``) out of environment calls."""
        return self.solved or self.stats.iterations >= budget or (calls is not None and self.stats.env_calls >= calls)

    # -- selection ------------------------------------------------------------------------------
    def _widen(self, node: GoalNode) -> bool:
        c = self.config
        scale = 2 * (1 - self.evidence.opened_rate) if c.widening == "evidence" else 1.0
        return node.expansions == 0 or node.expansions <= scale * c.widening_c * node.visits**c.widening_alpha - 1

    def _puct(self, parent: GoalNode, edge: TacticEdge, prior_sum: float) -> float:
        c = self.config
        explore = math.log((parent.visits + c.pb_c_base + 1) / c.pb_c_base) + c.pb_c_init
        explore *= math.sqrt(parent.visits) / (edge.visits + 1) * edge.prior / max(prior_sum, 1e-12)
        if edge.visits or edge.solved_depth is not None:
            exploit = c.value_discount ** (-self._edge_value(edge))
        elif c.first_play_urgency is None:
            exploit = 0.0
        else:
            exploit = c.value_discount ** (-min(parent.value - c.first_play_urgency, 0.0))
        return exploit + explore

    def _goal_value(self, node: GoalNode) -> float:
        """The node's value, lowered by ``dead_end_decay`` per visit while it is unsolved."""
        if node.solved_depth is not None or not self.config.dead_end_decay:
            return node.value
        return node.value - self.config.dead_end_decay * node.visits

    def _edge_value(self, edge: TacticEdge) -> float:
        if edge.solved_depth is not None or not self.config.dead_end_decay:
            return edge.value
        # the hardest open child decides an AND node, each with its visits' decay
        open_values = [self._goal_value(ch) for ch in edge.children if ch.solved_depth is None and ch.visits]
        return min([edge.value] + [-1.0 + v for v in open_values])

    def select(self) -> list | None:
        """The path root -> leaf to expand (GoalNode, TacticEdge, GoalNode, ...), or None when every
        way down loops back onto the path (transpositions) this round."""
        node, path, on_path = self.root, [self.root], {self.root.key}
        while len(path) < 2 * self.config.max_depth:
            if self._widen(node) or not node.edges:
                return path
            prior_sum = sum(e.prior for e in node.edges)
            edges = [e for e in node.edges if not any(ch.key in on_path for ch in e.children)]
            if not edges:
                return path if node.visits < 2 else None
            edge = max(edges, key=lambda e: self._puct(node, e, prior_sum))
            open_children = [ch for ch in edge.children if ch.solved_depth is None]
            if not open_children:  # solved below through a transposition: the path's states are stale
                for earlier in reversed(path):
                    if isinstance(earlier, GoalNode):
                        earlier.refresh_solved()
                return None
            if self.config.and_sibling == "least_visited":
                child = min(open_children, key=lambda ch: (ch.visits, self._goal_value(ch)))
            else:
                child = min(open_children, key=lambda ch: (ch.visits > 0, self._goal_value(ch)))
            path += [edge, child]
            on_path.add(child.key)
            node = child
        return path

    # -- expansion and backpropagation ------------------------------------------------------------
    def samples(self, leaf: GoalNode) -> int:
        """How many tactics this expansion of ``leaf`` runs (``first_expansion_samples``, times
        ``expansion_growth`` per re-expansion, at most ``samples_per_expansion``)."""
        c = self.config
        if c.first_expansion_samples is None:
            return c.samples_per_expansion
        grown = c.first_expansion_samples * c.expansion_growth ** min(leaf.expansions, 64)
        return min(c.samples_per_expansion, math.ceil(grown - 1e-9))

    def candidates(self, leaf: GoalNode, proposal: Proposal) -> list[tuple[str, float]]:
        """The proposal's tactics not yet tried at this goal, deduped, the first ``samples(leaf)``."""
        unique = dedupe(proposal.tactics)
        self.stats.tactics_sampled += len(proposal.tactics)
        self.stats.duplicates += len(proposal.tactics) - len(unique)
        fresh = [(t, lp) for t, lp in unique if " ".join(t.split()) not in leaf.tried]
        self.stats.duplicates += len(unique) - len(fresh)
        self.count_samples(leaf, unique)
        if self.config.candidate_order == "rank":
            return fresh[: self.samples(leaf)]
        pool = [(key, entry) for key, entry in leaf.proposed.items() if key not in leaf.tried]
        if self.config.candidate_order == "evidence":
            leaf.picks = {
                "count": max(pool, key=lambda item: (item[1][0], item[1][1]), default=(None,))[0],
                "first": max(pool, key=lambda item: (item[1][3], item[1][1]), default=(None,))[0],
            }
            pool.sort(key=lambda item: (-self.evidence.score(item[1]), -item[1][1]))
        else:
            pool.sort(key=lambda item: (-item[1][0], -item[1][1]))
        return [(entry[2], entry[1]) for _, entry in pool[: self.samples(leaf)]]

    def count_samples(self, node: GoalNode, unique: list[tuple[str, float]]) -> None:
        """Add a proposal's deduped tactics to the goal's counts (``candidate_order`` and
        ``edge_prior`` read them)."""
        top = max(unique, key=lambda item: item[1])[0] if unique else None
        for tactic, lp in unique:
            seen = node.proposed.setdefault(" ".join(tactic.split()), [0, lp, tactic, 0])
            seen[0] += 1
            seen[1] = max(seen[1], lp)
            seen[3] += tactic == top
        if self.config.edge_prior != "expansion":  # the counts change only here, so the priors too
            for edge in node.edges:
                edge.prior = self._sample_prior(node, edge.tactic)

    def _sample_prior(self, leaf: GoalNode, tactic: str) -> float:
        """An edge's prior read from the goal's samples: how many proposals held its tactic
        (``edge_prior`` frequency), or its evidence score."""
        entry = leaf.proposed[" ".join(tactic.split())]
        return self.evidence.score(entry) if self.config.edge_prior == "evidence" else entry[0]

    def expand(
        self, path: list, proposal: Proposal, tried: list[tuple[str, float]], results: Sequence[EnvResult]
    ) -> None:
        leaf: GoalNode = path[-1]
        leaf.expansions += 1
        self.stats.expansions += 1
        self.stats.env_calls += len(results)
        path_keys = {n.cycle_key for n in path if isinstance(n, GoalNode)}
        temperature = max(self.config.prior_temperature, 1e-6)
        weights = [math.exp(lp / temperature) for _, lp in tried] if tried else []
        total = sum(weights) or 1.0
        applied = {}
        for (tactic, _), weight, result in zip(tried, weights, results):
            key = " ".join(tactic.split())
            leaf.tried.add(key)
            applied[key] = False
            if result.status is not EnvStatus.OK:
                self._count_failure(result.status)
                continue
            if any(node_cycle_key(g.goals) in path_keys for g in result.goals):
                self.stats.cycles += 1
                continue
            applied[key] = True
            children = [self.table.get(g.key) or self.table.setdefault(g.key, GoalNode(g)) for g in result.goals]
            prior = weight / total if self.config.edge_prior == "expansion" else self._sample_prior(leaf, tactic)
            leaf.edges.append(TacticEdge(tactic, prior, children))
        if leaf.expansions == 1 and tried:
            self.evidence.opened[0] += any(applied.values())
            self.evidence.opened[1] += 1
        if leaf.picks and leaf.picks["count"] != leaf.picks["first"]:  # agreeing picks say nothing
            for rule, key in leaf.picks.items():
                if key in applied:
                    self.evidence.record(rule, applied[key])
        leaf.picks = {}
        leaf.refresh_solved()
        if leaf.solved_depth is not None:
            value = -float(leaf.solved_depth)
        elif not leaf.edges:
            value = self.config.no_tactic_value
        else:
            value = -float(proposal.distance)
        self.backpropagate(path, value)

    def _count_failure(self, status: EnvStatus) -> None:
        if status is EnvStatus.UNAVAILABLE:
            self.stats.unavailable += 1
        elif status is EnvStatus.TIMEOUT:
            self.stats.timeouts += 1
        elif status is EnvStatus.INFRA_ERROR:
            self.stats.infra_errors += 1
        else:
            self.stats.errors += 1

    def backpropagate(self, path: list, value: float) -> None:
        for index in range(len(path) - 1, -1, -1):
            node = path[index]
            if isinstance(node, GoalNode):
                node.refresh_solved()
            node.visits += 1
            node.value_sum += value
            if index == 0:
                break
            parent = path[index - 1]
            if isinstance(parent, TacticEdge):
                visited = [ch.value for ch in parent.children if ch.visits and ch.solved_depth is None]
                value = min(visited) if visited else value
            else:
                value = -1.0 + value
        self.end_iteration()

    def end_iteration(self) -> None:
        """Count one iteration; the first after which the root is solved is recorded."""
        self.stats.iterations += 1
        if self.solved and self.stats.solved_at_iteration is None:
            self.stats.solved_at_iteration = self.stats.iterations
            self.stats.env_calls_to_solve = self.stats.env_calls

    # -- result ---------------------------------------------------------------------------------
    def proof(self) -> TreeNode | None:
        """The shallowest proof found (a LeanTree-format tree), or None."""
        if not self.solved:
            return None

        def build(node: GoalNode) -> TreeNode:
            edge = min((e for e in node.edges if e.solved_depth is not None), key=lambda e: e.solved_depth)
            return TreeNode(node.goal.goals, edge.tactic, [build(ch) for ch in edge.children])

        return build(self.root).measure()


class SearchBatch:
    """Many searches advanced together: per round, each unfinished search selects one leaf; one
    policy call proposes tactics for all leaves; one ``apply_many`` runs all their tactics."""

    def __init__(self, searches: Sequence[Search], policy: Policy, config: SearchConfig) -> None:
        self.searches = list(searches)
        self.policy = policy
        self.config = config
        self.rounds = 0
        if config.evidence_scope == "batch":  # one policy: what its samples' rules hit is learnt once
            shared = RuleEvidence(config.evidence_sharpness)
            for search in self.searches:
                search.evidence = shared

    def _goals_above(self, path: list) -> list[GoalNode]:
        """The goals above a selected path's leaf whose proposals are counted (``path_proposals``)."""
        if self.config.path_proposals == "leaf" or len(path) < 3:  # the leaf is the root
            return []
        return path[:-1:2] if self.config.path_proposals == "path" else path[:1]

    def run(self, budget: int | None = None, calls: int | None = None) -> list[Search]:
        """Iterate until every search is solved or out of ``budget`` iterations (default: the
        config's ``simulations``) or, with ``calls``, out of that many environment calls (the last
        expansion runs only the tactics that still fit)."""
        budget = budget or self.config.simulations
        stalled: dict[int, int] = {}
        while True:
            active = [s for s in self.searches if not s.done(budget, calls) and stalled.get(id(s), 0) < 3]
            if not active:
                return self.searches
            selected = []
            for search in active:
                path = search.select()
                if path is None:  # every way down loops, or a stale state was refreshed: a spent iteration
                    search.end_iteration()
                    stalled[id(search)] = stalled.get(id(search), 0) + 1
                    continue
                stalled[id(search)] = 0
                selected.append((search, path))
            if not selected:
                continue
            started = time.perf_counter()
            above = [(search, node) for search, path in selected for node in self._goals_above(path)]
            proposals = self.policy.propose(
                [path[-1].goal.text for _, path in selected] + [node.goal.text for _, node in above],
                self.config.samples_per_expansion,
            )
            for (search, node), proposal in zip(above, proposals[len(selected) :]):
                search.count_samples(node, dedupe(proposal.tactics))
            model_s = (time.perf_counter() - started) / len(selected)
            jobs = []
            for (search, path), proposal in zip(selected, proposals):
                search.stats.model_s += model_s
                fresh = search.candidates(path[-1], proposal)
                jobs.append(fresh if calls is None else fresh[: calls - search.stats.env_calls])
            items = [(path[-1].goal, tactic) for (search, path), tried in zip(selected, jobs) for tactic, _ in tried]
            env = self.searches[0].env
            started = time.perf_counter()
            results = env.apply_many(items, timeout=self.config.tactic_timeout) if items else []
            env_s = (time.perf_counter() - started) / max(len(selected), 1)
            offset = 0
            for (search, path), proposal, tried in zip(selected, proposals, jobs):
                search.stats.env_s += env_s
                search.expand(path, proposal, tried, results[offset : offset + len(tried)])
                offset += len(tried)
            self.rounds += 1


def start_searches(theorems: Sequence[str], env: ProofEnv, config: SearchConfig) -> tuple[list[Search], dict[str, str]]:
    """A search per theorem that the environment can start; the others with their reason."""
    searches, failed = [], {}
    for theorem in theorems:
        started = env.start(theorem)
        if started.ok and len(started.goals) == 1:
            searches.append(Search(theorem, started.goals[0], env, config))
        else:
            failed[theorem] = started.status.value if not started.ok else "not one goal"
    return searches, failed
