"""Which statements the policy practises on, and a buffer of its successful proofs.

RL-environment guide: a statement the policy always solves or never solves gives a group of equal
rewards, hence zero advantage and no learning signal; keep the solvable-but-unsolved ones.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable

ACTIVE = "active"
ALWAYS_SOLVED = "always_solved"
NEVER_SOLVED = "never_solved"
TRIVIAL = "trivial"  # retired by the filters; never re-admitted
DROPPED = "dropped"


@dataclass
class ReplayConfig:
    enabled: bool = True
    capacity_per_statement: int = 4
    sources: list[str] = field(default_factory=lambda: ["lean"])
    """Reward sources whose successes are stored (``lean``; add ``evaluator`` to trust it too)."""
    inject: bool = True
    """Replace one rollout of an all-fail group by a buffered proof of its statement."""


@dataclass
class CurriculumConfig:
    enabled: bool = True
    retire_after: int = 16
    """Attempts (rollouts) since admission after which an always/never-solved statement retires."""
    readmit_after_steps: int = 20
    readmission_budget: int = 1
    """How many times a retired statement may come back."""
    solved_sources: list[str] = field(default_factory=lambda: ["lean", "evaluator"])
    """Reward sources whose reward 1 counts as solved."""
    replay: ReplayConfig = field(default_factory=ReplayConfig)

    def __post_init__(self) -> None:
        if self.retire_after < 1 or self.readmit_after_steps < 0 or self.readmission_budget < 0:
            raise ValueError("retire_after >= 1, readmit_after_steps >= 0 and readmission_budget >= 0")


@dataclass
class StatementState:
    name: str
    status: str = ACTIVE
    attempts: int = 0  # all time
    successes: int = 0
    window_attempts: int = 0  # since (re)admission
    window_successes: int = 0
    readmissions: int = 0
    retired_at: int | None = None
    reason: str | None = None  # why it is retired / dropped


@dataclass
class Transition:
    step: int
    name: str
    before: str
    after: str


class Curriculum:
    def __init__(self, names: Iterable[str], config: CurriculumConfig | None = None, seed: int = 0):
        self.config = config or CurriculumConfig()
        self.states = {n: StatementState(n) for n in names}
        if not self.states:
            raise ValueError("the curriculum needs at least one statement")
        self.rng = random.Random(seed)
        self.transitions: list[Transition] = []
        self.epoch: list[str] = []  # curriculum off: this epoch's statements still to draw, in order

    # -- what to practise ---------------------------------------------------------------------------
    def active(self) -> list[str]:
        return [n for n, s in self.states.items() if s.status == ACTIVE]

    def sample(self, k: int, step: int, rank: int = 0, world_size: int = 1) -> tuple[list[str], bool]:
        """``rank``'s ``k`` statements for this step and whether the curriculum ran dry (no active
        statement: everything retired, sampled from all). Every rank draws the same ``k x world_size``
        (without replacement while enough are active, else whole permutations of the pool one after
        another) and keeps slice ``rank``: disjoint problems across ranks."""
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} outside a world of {world_size}")
        self.readmit(step)
        if not self.config.enabled:
            return self._epochs(k * world_size)[rank * k : (rank + 1) * k], False
        pool = self.active()
        exhausted = not pool
        if exhausted:
            pool = [n for n, s in self.states.items() if s.status not in (DROPPED, TRIVIAL)] or list(self.states)
        total = k * world_size
        if len(pool) >= total:
            drawn = self.rng.sample(pool, total)
        else:
            drawn = []
            while len(drawn) < total:
                drawn += self.rng.sample(pool, len(pool))
        return drawn[rank * k : (rank + 1) * k], exhausted

    def _epochs(self, k: int) -> list[str]:
        """Curriculum off (LLF: "one epoch on approximately 21.8K filtered ... problems"): every
        statement the filters kept, each once per epoch in a shuffled order, epoch after epoch."""
        kept = [n for n, s in self.states.items() if s.status not in (DROPPED, TRIVIAL)] or list(self.states)
        out = []
        while len(out) < k:
            if not self.epoch:
                self.epoch = self.rng.sample(kept, len(kept))
            out.append(self.epoch.pop())
        return out

    # -- what happened ------------------------------------------------------------------------------
    def set_status(self, name: str, status: str, step: int, reason: str | None = None) -> None:
        state = self.states[name]
        if state.status != status:
            self.transitions.append(Transition(step, name, state.status, status))
        state.status, state.reason = status, reason
        if status in (ALWAYS_SOLVED, NEVER_SOLVED, TRIVIAL):
            state.retired_at = step

    def record(self, name: str, attempts: int, successes: int, step: int) -> None:
        state = self.states[name]
        state.attempts += attempts
        state.successes += successes
        state.window_attempts += attempts
        state.window_successes += successes
        if not self.config.enabled or state.status != ACTIVE or state.window_attempts < self.config.retire_after:
            return
        if state.window_successes == state.window_attempts:
            self.set_status(name, ALWAYS_SOLVED, step, f"solved {state.window_attempts}/{state.window_attempts}")
        elif state.window_successes == 0:
            self.set_status(name, NEVER_SOLVED, step, f"solved 0/{state.window_attempts}")

    def credit(self, name: str, step: int) -> None:
        """One success for ``name`` whose attempt was recorded earlier without it (the judge agreed
        after the step: undecided proofs earn nothing until then)."""
        state = self.states.get(name)
        if state is None:
            return
        state.successes += 1
        state.window_successes = min(state.window_successes + 1, state.window_attempts)
        if state.status == NEVER_SOLVED:  # retired on the counts without this success
            state.retired_at = None
            self.set_status(name, ACTIVE, step, "a success confirmed by the judge after the step")
        self.record(name, 0, 0, step)  # the retirement rule, on the corrected counts

    def revoke(self, name: str, step: int, reason: str) -> None:
        """One success counted for ``name`` was wrong (the judge rejected a proof the fast path
        paid): take it back; a statement retired as always solved on it becomes active again."""
        state = self.states.get(name)
        if state is None:
            return
        state.successes = max(0, state.successes - 1)
        state.window_successes = max(0, state.window_successes - 1)
        if state.status == ALWAYS_SOLVED:
            state.retired_at = None
            self.set_status(name, ACTIVE, step, reason)

    def readmit(self, step: int) -> list[str]:
        back = []
        for name, state in self.states.items():
            if (
                state.status in (ALWAYS_SOLVED, NEVER_SOLVED)
                and state.retired_at is not None
                and step - state.retired_at >= self.config.readmit_after_steps
                and state.readmissions < self.config.readmission_budget
            ):
                state.readmissions += 1
                state.window_attempts = state.window_successes = 0
                self.set_status(
                    name, ACTIVE, step, f"re-admitted ({state.readmissions}/{self.config.readmission_budget})"
                )
                back.append(name)
        return back

    def counts(self) -> dict[str, float]:
        tally = Counter(s.status for s in self.states.values())
        return {
            f"curriculum/{status}": float(tally.get(status, 0))
            for status in (ACTIVE, ALWAYS_SOLVED, NEVER_SOLVED, TRIVIAL, DROPPED)
        }

    def state_dict(self) -> dict:
        """Statuses, transitions and the sampler's state (plain types: a checkpoint holds them)."""
        return {
            "states": [asdict(s) for s in self.states.values()],
            "transitions": [asdict(t) for t in self.transitions],
            "rng": rng_state(self.rng),
            "epoch": list(self.epoch),
        }

    def load_state_dict(self, state: dict) -> None:
        self.states = {s["name"]: StatementState(**s) for s in state["states"]}
        self.transitions = [Transition(**t) for t in state["transitions"]]
        set_rng_state(self.rng, state["rng"])
        self.epoch = list(state.get("epoch", []))

    def write(self, path: Path) -> None:
        state = self.state_dict()
        path.write_text(json.dumps({"states": state["states"], "transitions": state["transitions"]}, indent=1) + "\n")


def rng_state(rng: random.Random) -> list:
    """A ``random.Random``'s state in plain types (a checkpoint holds them)."""
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def set_rng_state(rng: random.Random, state: list) -> None:
    version, internal, gauss = state
    rng.setstate((version, tuple(internal), gauss))


class CurriculumEvents:
    """One rank's curriculum updates of a step (``record``, ``credit``, ``revoke``, called as on a
    :class:`Curriculum`), kept so that every rank can apply every rank's updates in the same order."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def record(self, name: str, attempts: int, successes: int, step: int) -> None:
        self.events.append(("record", name, attempts, successes, step))

    def credit(self, name: str, step: int) -> None:
        self.events.append(("credit", name, step))

    def revoke(self, name: str, step: int, reason: str) -> None:
        self.events.append(("revoke", name, step, reason))

    @staticmethod
    def apply(curriculum: Curriculum, per_rank: list[list[tuple]]) -> None:
        for events in per_rank:
            for method, *args in events:
                getattr(curriculum, method)(*args)


@dataclass
class StoredProof:
    completion: str
    completion_ids: list[int]
    source: str
    step: int


class ReplayBuffer:
    def __init__(self, config: ReplayConfig | None = None):
        self.config = config or ReplayConfig()
        self.proofs: dict[str, list[StoredProof]] = {}

    def add(self, name: str, proof: StoredProof) -> bool:
        if not self.config.enabled or proof.source not in self.config.sources:
            return False
        stored = self.proofs.setdefault(name, [])
        if any(p.completion == proof.completion for p in stored):
            return False
        stored.append(proof)
        del stored[: -self.config.capacity_per_statement]
        return True

    def remove(self, name: str, completion: str) -> bool:
        """Drop a stored proof (the judge rejected it); True if it was there."""
        stored = self.proofs.get(name) or []
        kept = [p for p in stored if p.completion != completion]
        if len(kept) == len(stored):
            return False
        if kept:
            self.proofs[name] = kept
        else:
            self.proofs.pop(name, None)
        return True

    def get(self, name: str, rng: random.Random) -> StoredProof | None:
        stored = self.proofs.get(name)
        return rng.choice(stored) if stored else None

    def __len__(self) -> int:
        return sum(len(v) for v in self.proofs.values())

    def state_dict(self) -> dict:
        """The stored proofs, in order (which one an injection picks depends on it)."""
        return {name: [asdict(p) for p in proofs] for name, proofs in self.proofs.items()}

    def load_state_dict(self, state: dict) -> None:
        self.proofs = {name: [StoredProof(**p) for p in proofs] for name, proofs in state.items()}
