"""``ReplEnv``: the Lean REPL in proof-state mode, through lean-interact (``ProofStep``).

``start(statement)`` elaborates ``<statement> := by sorry`` (header lines reused per worker as the
Verifier's local backend does) and takes the sorry's proof state. A proof state holds all of a
state's goals; a factorized goal is ``(proof_state, index, rest)``: the ``index``-th goal of that
state, with ``rest`` goals after it that belong to other nodes. Applying a tactic first brings the
goal to the front (``rotate_left index``, cached), runs the tactic, and keeps the goals it produced
(the reply's goals minus the ``rest`` untouched ones at the end, which is where Lean leaves them).

The REPL setup (toolchain, Mathlib project, stand-in) is the local backend's ``LocalBackendConfig``.

After a timeout or a crash lean-interact restarts the REPL, whose env and proof-state ids start
again from 0: every id handed out before then names nothing (or, worse, something else). Each
restart starts a new *generation*; the header cache and the focus cache are emptied, and a goal
of an older generation answers ``infra_error`` instead of reaching a state it does not own.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from leanloop.lean.local import LocalBackend, LocalBackendConfig, split_header
from leanloop.lean.replies import NO_RECORDED_ANSWER
from search.env import EnvGoal, EnvResult, EnvStatus, ProofEnv
from search.goals import group_by_metavariables, parse_state


@dataclass(frozen=True)
class ReplHandle:
    proof_state: int
    index: int
    rest: int
    generation: int = 0  # the REPL process (restart count) the proof state belongs to


def statement_with_sorry(statement: str) -> str:
    body = statement.rstrip()
    for suffix in (":= by sorry", ":= by", ":="):
        if body.endswith(suffix):
            body = body[: -len(suffix)].rstrip()
            break
    return body + " := by sorry"


class ReplEnv(ProofEnv):
    name = "repl"

    def __init__(self, config: LocalBackendConfig | None = None, timeout: float = 60.0,
                 parallel_elaboration: bool | None = None) -> None:
        """``parallel_elaboration``: override lean-interact's ``Elab.async`` option on commands (None
        keeps what the local backend chose for the Lean version)."""
        super().__init__()
        self.parallel_elaboration = parallel_elaboration
        self.config = config or LocalBackendConfig()
        self.timeout = timeout
        self._backend = LocalBackend(self.config)  # only for its lean-interact REPL config
        self._server: Any = None
        self._headers: dict[str, int] = {}
        self._focused: dict[tuple[int, int], int] = {}
        self._generation = 0  # bumped when the REPL is restarted: older ids are void
        self._lock = threading.Lock()  # one REPL process answers one request at a time

    def _ensure_server(self) -> Any:
        if self._server is None:
            from lean_interact import AutoLeanServer

            repl_config = self._backend.repl_config()
            if self.parallel_elaboration is not None:
                repl_config.enable_parallel_elaboration = self.parallel_elaboration
            self._server = AutoLeanServer(repl_config)
        return self._server

    def _run(self, request: Any, timeout: float | None) -> tuple[EnvStatus, Any, str]:
        from lean_interact.interface import LeanError

        try:
            reply = self._ensure_server().run(request, timeout=timeout or self.timeout)
        except TimeoutError as error:
            self._new_generation()
            return EnvStatus.TIMEOUT, None, str(error)
        except Exception as error:  # crash, broken pipe: the server restarts on the next request
            self._new_generation()
            return EnvStatus.INFRA_ERROR, None, f"{type(error).__name__}: {error}"
        if isinstance(reply, LeanError):
            status = EnvStatus.UNAVAILABLE if NO_RECORDED_ANSWER in reply.message else EnvStatus.INFRA_ERROR
            return status, None, reply.message
        return EnvStatus.OK, reply, ""

    def _new_generation(self) -> None:
        """The REPL was (or will be) restarted: ids from before name nothing in the new process."""
        self._generation += 1
        self._headers.clear()
        self._focused.clear()

    def _start(self, theorem: str) -> EnvResult:
        from lean_interact.interface import Command

        header, body, _ = split_header(statement_with_sorry(theorem))
        with self._lock:
            env = None
            if header:
                env = self._headers.get(header)
                if env is None:
                    status, reply, error = self._run(Command(cmd=header), self.config.header_timeout)
                    if status is not EnvStatus.OK:
                        return EnvResult(status, error=error)
                    env = self._headers[header] = reply.env
            status, reply, error = self._run(Command(cmd=body, env=env), self.timeout)
            generation = self._generation
        if status is not EnvStatus.OK:
            return EnvResult(status, error=error)
        errors = [m.data for m in reply.messages if m.severity == "error"]
        if errors or not reply.sorries:
            return EnvResult(EnvStatus.ERROR, error=errors[0] if errors else "the statement has no sorry")
        sorry = reply.sorries[0]
        goals = parse_state(sorry.goal)
        return EnvResult(EnvStatus.OK, [EnvGoal(tuple(goals), ReplHandle(sorry.proof_state, 0, 0, generation))])

    def _apply(self, goal: EnvGoal, tactic: str, timeout: float | None) -> EnvResult:
        from lean_interact.interface import ProofStep

        handle: ReplHandle = goal.handle
        with self._lock:
            if handle.generation != self._generation:
                return EnvResult(EnvStatus.INFRA_ERROR, error=f"the REPL restarted since this goal was made (generation "
                                 f"{handle.generation}, now {self._generation}): its proof state is gone")
            state = handle.proof_state
            if handle.index:
                focused = self._focused.get((state, handle.index))
                if focused is None:
                    status, reply, error = self._run(ProofStep(proof_state=state, tactic=f"rotate_left {handle.index}"),
                                                     timeout)
                    if status is not EnvStatus.OK:
                        return EnvResult(status, error=error)
                    focused = self._focused[(state, handle.index)] = reply.proof_state
                state = focused
            status, reply, error = self._run(ProofStep(proof_state=state, tactic=tactic), timeout)
            generation = self._generation
        if status is not EnvStatus.OK:
            return EnvResult(status, error=error)
        errors = [m.data for m in (reply.messages or []) if m.severity == "error"]
        if errors:
            return EnvResult(EnvStatus.ERROR, error=errors[0])
        status_text = reply.proof_status or ""
        # "Error: kernel type check failed ..." or no goals left but unassigned metavariables:
        # the goal is not closed, whatever the goal list says
        if status_text.startswith("Error") or (not reply.goals and "metavariable" in status_text):
            return EnvResult(EnvStatus.ERROR, error=status_text)
        texts = list(reply.goals or [])
        produced = texts[: len(texts) - handle.rest] if handle.rest else texts
        goals = [g for text in produced for g in parse_state(text)]
        groups = group_by_metavariables(goals)
        out, index = [], 0
        for group in groups:
            # after `rotate_left index` every other goal of the state sits behind this group
            out.append(EnvGoal(group, ReplHandle(reply.proof_state, index, len(texts) - len(group), generation)))
            index += len(group)
        return EnvResult(EnvStatus.OK, out)

    def close(self) -> None:
        if self._server is not None:
            try:
                self._server.kill()
            except Exception:  # already gone
                pass
            self._server = None
            self._new_generation()
