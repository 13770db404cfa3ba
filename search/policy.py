"""Policies for the search: the recorded tactics (an oracle, for tests and as an upper bound) and
the actor-critic transformer (``search.model.ModelPolicy``)."""

from __future__ import annotations

from typing import Sequence

from search.env import ReplayEnv
from search.mcts import Proposal


class OraclePolicy:
    """Proposes the tactics recorded at a goal (from the replay environment's transitions), plus
    ``distractors`` that Lean never saw there; the critic says 1 step to go."""

    def __init__(self, env: ReplayEnv, distractors: Sequence[str] = ()) -> None:
        self.env = env
        self.distractors = list(distractors)

    def propose(self, states: Sequence[str], samples: int) -> list[Proposal]:
        out = []
        for state in states:
            recorded = self.env.recorded_tactics(state)
            tactics = [(t, -1.0) for t in self.distractors] + [(t, 0.0) for t in recorded]
            out.append(Proposal(tactics[: max(samples, len(recorded) + len(self.distractors))], 1.0))
        return out
