"""``ReplEnv``: the Lean REPL in proof-state mode, through lean-interact (``ProofStep``)."""

from __future__ import annotations

from dataclasses import dataclass

from leanloop.lean.session import LeanSession, Reply, SessionConfig, by_sorry, split_header
from search.env import EnvGoal, EnvResult, EnvStatus, ProofEnv
from search.goals import group_by_metavariables, parse_state


@dataclass(frozen=True)
class ReplHandle:
    proof_state: int
    index: int
    rest: int
    generation: int = 0  # the REPL process (restart count) the proof state belongs to


class ReplEnv(ProofEnv):
    name = "repl"

    def __init__(self, config: SessionConfig | None = None) -> None:
        """``config``: the REPL session (set-up, ``timeout`` for the statement and for tactics the
        search gives no timeout, memory limits, crash retries, ``parallel_elaboration``)."""
        super().__init__()
        self.config = config or SessionConfig()
        self.session = LeanSession(self.config)
        self._focused: dict[tuple[int, int, int], int] = {}  # (generation, state, index) -> focused state

    @staticmethod
    def _failure(reply: Reply) -> EnvResult:
        try:
            status = EnvStatus(reply.status.value)
        except ValueError:  # the statement is trusted: a crash while it elaborates is the infrastructure's
            status = EnvStatus.INFRA_ERROR
        return EnvResult(status, error=reply.detail)

    def _start(self, theorem: str) -> EnvResult:
        header, body, _ = split_header(by_sorry(theorem))
        reply = self.session.command(body, header=header)
        if not reply.ok:
            return self._failure(reply)
        errors = reply.errors()
        if errors or not reply.answer.sorries:
            where = "the header does not elaborate: " if reply.header_failed else ""
            return EnvResult(EnvStatus.ERROR, error=where + (errors[0] if errors else "the statement has no sorry"))
        sorry = reply.answer.sorries[0]
        goals = parse_state(sorry.goal)
        return EnvResult(EnvStatus.OK, [EnvGoal(tuple(goals), ReplHandle(sorry.proof_state, 0, 0, reply.generation))])

    def _step(self, state: int, generation: int, tactic: str, timeout: float | None) -> Reply:
        return self.session.step(state, generation, tactic, timeout)

    def _apply(self, goal: EnvGoal, tactic: str, timeout: float | None) -> EnvResult:
        handle: ReplHandle = goal.handle
        with self.session.lock:
            state = handle.proof_state
            if handle.index:
                key = (handle.generation, state, handle.index)
                focused = self._focused.get(key)
                if focused is None:
                    reply = self._step(state, handle.generation, f"rotate_left {handle.index}", timeout)
                    if not reply.ok or reply.errors():
                        return (
                            self._failure(reply)
                            if not reply.ok
                            else EnvResult(EnvStatus.ERROR, error=reply.errors()[0])
                        )
                    focused = self._focused[key] = reply.answer.proof_state
                state = focused
            reply = self._step(state, handle.generation, tactic, timeout)
        if not reply.ok:
            return self._failure(reply)
        errors = reply.errors()  # error messages, a "Lean error" refusal, "Error: kernel type check failed ..."
        if errors:
            return EnvResult(EnvStatus.ERROR, error=errors[0])
        answer = reply.answer
        status_text = answer.proof_status or ""
        # no goals left but unassigned metavariables: the goal is not closed, whatever the goal list says
        if not answer.goals and "metavariable" in status_text:
            return EnvResult(EnvStatus.ERROR, error=status_text)
        texts = list(answer.goals or [])
        produced = texts[: len(texts) - handle.rest] if handle.rest else texts
        goals = [g for text in produced for g in parse_state(text)]
        groups = group_by_metavariables(goals)
        out, index = [], 0
        for group in groups:
            # after `rotate_left index` every other goal of the state sits behind this group
            out.append(EnvGoal(group, ReplHandle(answer.proof_state, index, len(texts) - len(group), reply.generation)))
            index += len(group)
        return EnvResult(EnvStatus.OK, out)

    def close(self) -> None:
        self.session.close()
        self._focused.clear()
