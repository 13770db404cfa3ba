"""The proof environment: start from a theorem, apply a tactic to one (factorized) goal."""

from __future__ import annotations

import abc
import enum
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from search.goals import Goal, node_exact_key, node_text, normalize_tactic, parse_state


class EnvStatus(str, enum.Enum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    INFRA_ERROR = "infra_error"
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class EnvGoal:
    """One factorized state the search can act on; ``handle`` is the backend's own reference
    (a REPL proof state, a recorded text), opaque to the search."""

    goals: tuple[Goal, ...]
    handle: Any = None

    @property
    def key(self) -> str:
        return node_exact_key(self.goals)

    @property
    def text(self) -> str:
        return node_text(self.goals)


@dataclass
class EnvResult:
    status: EnvStatus
    goals: list[EnvGoal] = field(default_factory=list)
    error: str = ""
    time_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status is EnvStatus.OK

    @property
    def closed(self) -> bool:
        """The tactic closed its goal (no new goals)."""
        return self.ok and not self.goals


class ProofEnv(abc.ABC):
    name = "env"

    def __init__(self) -> None:
        self.calls = 0
        self.time_s = 0.0

    def start(self, theorem: str) -> EnvResult:
        started = time.perf_counter()
        result = self._start(theorem)
        self.time_s += time.perf_counter() - started
        return result

    def apply(self, goal: EnvGoal, tactic: str, timeout: float | None = None) -> EnvResult:
        started = time.perf_counter()
        self.calls += 1
        result = self._apply(goal, tactic, timeout)
        elapsed = time.perf_counter() - started
        self.time_s += elapsed
        result.time_s = result.time_s or elapsed
        return result

    def apply_many(self, items: Sequence[tuple[EnvGoal, str]], timeout: float | None = None) -> list[EnvResult]:
        """Several applications; pooled backends run them concurrently."""
        return [self.apply(goal, tactic, timeout) for goal, tactic in items]

    @abc.abstractmethod
    def _start(self, theorem: str) -> EnvResult: ...

    @abc.abstractmethod
    def _apply(self, goal: EnvGoal, tactic: str, timeout: float | None) -> EnvResult: ...

    def close(self) -> None:
        """Release processes / connections."""


def goals_from_texts(texts: Sequence[str], handles: Sequence[Any] | None = None) -> list[EnvGoal]:
    return [EnvGoal(tuple(parse_state(text)), handles[i] if handles else text) for i, text in enumerate(texts)]


NOT_RECORDED = "no recorded Lean answer for this (goal, tactic)"


class ReplayEnv(ProofEnv):
    """Answers recorded transitions only. ``start`` takes a recorded theorem's name (its root goal
    is the statement's goal) or a goal text that some recording starts from."""

    name = "replay"

    def __init__(self, transitions: Sequence[dict[str, Any]], roots: dict[str, str]) -> None:
        super().__init__()
        self.roots = dict(roots)
        self.table: dict[tuple[str, str], tuple[str, ...]] = {}
        self.by_state: dict[str, list[str]] = {}
        for row in transitions:
            state_key = node_exact_key(tuple(parse_state(row["state"])))
            key = (state_key, normalize_tactic(row["tactic"]))
            if key not in self.table:
                self.table[key] = tuple(row["result"])
                self.by_state.setdefault(state_key, []).append(row["tactic"])
        self.known_states = set(self.by_state)

    @classmethod
    def from_run(cls, run_dir: str | Path) -> "ReplayEnv":
        """From a ``make search-data`` run: its transitions, and every tree's root as a theorem."""
        import pandas as pd

        from leanloop.artifacts import read_manifest
        from leanloop.corpus import SPLITS

        run_dir = Path(run_dir)
        read_manifest(run_dir, stage="search_data")
        transitions = pd.read_parquet(run_dir / "final" / "transitions.parquet").to_dict("records")
        for row in transitions:
            row["result"] = list(row["result"])
        roots: dict[str, str] = {}
        for split in SPLITS:
            frame = pd.read_parquet(run_dir / "final" / f"{split}.parquet", columns=["name", "statement_goal"])
            roots.update(zip(frame["name"], frame["statement_goal"]))
        return cls(transitions, roots)

    def recorded_tactics(self, state_text: str) -> list[str]:
        """The tactics recorded at this goal (what an oracle policy proposes)."""
        return list(self.by_state.get(node_exact_key(tuple(parse_state(state_text))), []))

    def _start(self, theorem: str) -> EnvResult:
        text = self.roots.get(theorem, theorem)
        try:
            goals = tuple(parse_state(text))
        except ValueError:
            goals = ()
        if not goals or node_exact_key(goals) not in self.known_states:
            return EnvResult(EnvStatus.UNAVAILABLE, error=f"no recorded start for {theorem[:80]!r}")
        return EnvResult(EnvStatus.OK, [EnvGoal(goals, text)])

    def _apply(self, goal: EnvGoal, tactic: str, timeout: float | None) -> EnvResult:
        result = self.table.get((goal.key, normalize_tactic(tactic)))
        if result is None:
            return EnvResult(EnvStatus.UNAVAILABLE, error=NOT_RECORDED)
        return EnvResult(EnvStatus.OK, goals_from_texts(result))
