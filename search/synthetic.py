"""A synthetic policy and dead-end environments: the search measured apart from any model."""

from __future__ import annotations

import hashlib
import random
from typing import Sequence

from search.env import EnvGoal, EnvResult, EnvStatus, ProofEnv, ReplayEnv
from search.goals import Goal, Hypothesis, node_exact_key, normalize_tactic, parse_state
from search.mcts import Proposal

# first words of recorded tactics that close goals by automation: the repeated wrong proposals
AUTOMATION = frozenset(
    {
        "simp",
        "simp_all",
        "simpa",
        "linarith",
        "nlinarith",
        "norm_num",
        "omega",
        "aesop",
        "ring",
        "ring_nf",
        "positivity",
        "decide",
        "field_simp",
        "tauto",
        "rfl",
        "norm_cast",
        "push_cast",
        "gcongr",
        "trivial",
        "assumption",
        "contradiction",
        "abel",
    }
)


def _unit(*parts: str) -> float:
    """A deterministic number in [0, 1) from its parts."""
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class DeadEndEnv(ProofEnv):
    """``ReplayEnv`` whose unrecorded tactics fail, or (at ``dead_end_rate``) lead into a dead end."""

    name = "dead_end"

    def __init__(self, replay: ReplayEnv, dead_end_rate: float = 0.3, seed: int = 0) -> None:
        super().__init__()
        if not 0.0 <= dead_end_rate < 1.0:
            raise ValueError(f"dead_end_rate must be in [0, 1), got {dead_end_rate}")
        self.replay = replay
        self.rate = dead_end_rate
        self.seed = str(seed)

    def recorded_tactics(self, state_text: str) -> list[str]:
        return self.replay.recorded_tactics(state_text)

    def _start(self, theorem: str) -> EnvResult:
        return self.replay._start(theorem)

    def _apply(self, goal: EnvGoal, tactic: str, timeout: float | None) -> EnvResult:
        recorded = self.replay._apply(goal, tactic, timeout)
        if recorded.ok or self.rate == 0.0:
            return recorded if recorded.ok else EnvResult(EnvStatus.ERROR, error="wrong tactic (synthetic)")
        tag = hashlib.blake2b(
            f"{self.seed}\x1f{goal.key}\x1f{normalize_tactic(tactic)}".encode(), digest_size=6
        ).hexdigest()
        if _unit(self.seed, goal.key, normalize_tactic(tactic)) >= self.rate:
            return EnvResult(EnvStatus.ERROR, error="wrong tactic (synthetic)")
        first = goal.goals[0]
        dead = Goal(first.hypotheses + (Hypothesis(("h_dead",), f"dead_end_{tag}"),), first.target, first.case)
        return EnvResult(EnvStatus.OK, [EnvGoal((dead,) + goal.goals[1:])])


class NoisyPolicy:
    """``k`` candidates: the recorded tactic with probability ``p``, first with probability ``q``
    when present; the rest drawn from tactics recorded at other goals, or (at rate ``repeats``) from
    the goal's pool of ``pool_size`` automation tactics. Fresh draws on every call (a resampled goal
    gets new candidates), reproducible from ``stream`` (default: ``seed``); the pools depend on
    ``seed`` alone, so policies on different streams share them."""

    def __init__(
        self,
        env: ReplayEnv | DeadEndEnv,
        p: float,
        q: float,
        k: int = 8,
        seed: int = 0,
        distance: float = 1.0,
        repeats: float = 0.0,
        pool_size: int = 4,
        stream: int | None = None,
    ) -> None:
        replay = env.replay if isinstance(env, DeadEndEnv) else env
        self.env = replay
        self.p, self.q, self.k = p, q, k
        self.distance = distance
        self.repeats, self.pool_size, self.seed = repeats, pool_size, str(seed)
        self.rng = random.Random(seed if stream is None else stream)
        self.pool = sorted({t for tactics in replay.by_state.values() for t in tactics})
        self.automation = [t for t in self.pool if t.split()[0] in AUTOMATION]
        self.calls = 0
        self._goals: dict[str, tuple[list[str], set[str], list[str]]] = {}

    def _goal(self, state: str) -> tuple[list[str], set[str], list[str]]:
        """The goal's recorded tactics, their normalized forms and its automation pool (cached:
        parsing a state is most of a proposal's cost)."""
        if state not in self._goals:
            try:
                key = node_exact_key(tuple(parse_state(state)))
            except ValueError:
                key = state
            recorded = self.env.by_state.get(key, [])
            own = {normalize_tactic(t) for t in recorded}
            pool: list[str] = []
            if self.repeats:  # a stream of its own per (seed, goal): the same pool whoever asks first
                drawn = random.Random(f"{self.seed}\x1f{key}").sample(self.automation, 2 * self.pool_size)
                pool = [t for t in drawn if normalize_tactic(t) not in own][: self.pool_size]
            self._goals[state] = (recorded, own, pool)
        return self._goals[state]

    def _candidates(self, state: str) -> list[str]:
        recorded, own, pool = self._goal(state)
        weights = [1.0 / (rank + 1) for rank in range(len(pool))]
        wrong: list[str] = []
        while len(wrong) < self.k:
            if pool and self.rng.random() < self.repeats:
                tactic = self.rng.choices(pool, weights)[0]
                if tactic not in wrong:
                    wrong.append(tactic)
                    continue
            tactic = self.pool[self.rng.randrange(len(self.pool))]
            if normalize_tactic(tactic) not in own and tactic not in wrong:
                wrong.append(tactic)
        if not recorded or self.rng.random() >= self.p:
            return wrong
        right = recorded[self.rng.randrange(len(recorded))]
        rank = 0 if self.rng.random() < self.q else self.rng.randrange(1, self.k)
        return wrong[:rank] + [right] + wrong[rank : self.k - 1]

    def propose(self, states: Sequence[str], samples: int) -> list[Proposal]:
        self.calls += 1
        out = []
        for state in states:
            tactics = self._candidates(state)[: max(samples, 1)]
            out.append(Proposal([(t, -0.5 * rank) for rank, t in enumerate(tactics)], self.distance))
        return out
