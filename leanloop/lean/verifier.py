"""The Verifier: a Lean backend plus the acceptance policy, batch in, one ``Outcome`` per program out.

Usable from async code (the RL stage races ``check_one`` tasks against model inference and
cancels the unfinished ones) and from sync code (``check_sync``). Concurrency is bounded by one
semaphore per event loop; each item is bounded by the backend's own timeout and, as a guard
against a backend that ignores it, by ``asyncio.wait_for`` with a grace period.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable, Sequence

from leanloop.lean.acceptance import AcceptancePolicy
from leanloop.lean.acceptance import reasons as R
from leanloop.lean.acceptance.submission import Submission
from leanloop.lean.types import LeanBackend, LeanResponse, Outcome, ResponseStatus, VerifyRequest

# A backend gets this much longer than the per-item timeout before the Verifier gives up on it
# (the backend's own timeout handling, restarts included, should have answered by then).
TIMEOUT_GRACE_S = 30.0


class Verifier:
    def __init__(
        self,
        backend: LeanBackend,
        policy: AcceptancePolicy | str = "collection",
        concurrency: int = 8,
        timeout: float | None = 60.0,
    ):
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.backend = backend
        self.policy = AcceptancePolicy(policy) if isinstance(policy, str) else policy
        self.concurrency = concurrency
        self.timeout = timeout
        self._gates: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}

    def __repr__(self) -> str:
        return (
            f"Verifier(backend={self.backend.name!r}, policy={self.policy.name!r}, "
            f"concurrency={self.concurrency}, timeout={self.timeout})"
        )

    def _gate(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        gate = self._gates.get(loop)
        if gate is None:
            # asyncio primitives belong to one loop; check_sync runs a fresh loop per call
            self._gates = {k: v for k, v in self._gates.items() if not k.is_closed()}
            gate = self._gates[loop] = asyncio.Semaphore(self.concurrency)
        return gate

    async def _ask(self, program: str) -> LeanResponse:
        """The backend's answer; never raises except for cancellation."""
        started = time.perf_counter()
        try:
            call = self.backend.run(program, self.timeout)
            if self.timeout is None:
                return await call
            return await asyncio.wait_for(call, self.timeout + TIMEOUT_GRACE_S)
        except asyncio.TimeoutError:
            return LeanResponse(
                ResponseStatus.TIMEOUT,
                time_s=time.perf_counter() - started,
                detail=f"backend {self.backend.name} gave no answer within {self.timeout}s + {TIMEOUT_GRACE_S}s grace",
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a backend bug must not lose the item: it becomes infra_error
            return LeanResponse(
                ResponseStatus.INFRA_ERROR,
                time_s=time.perf_counter() - started,
                detail=f"backend {self.backend.name} raised {type(exc).__name__}: {exc}",
            )

    async def check_one(self, request: VerifyRequest) -> Outcome:
        """Check one program. Cancel the awaiting task to abandon it (the RL hybrid cut-off)."""
        prepared = self.policy.prepare(request)
        if isinstance(prepared, Outcome):
            prepared.backend = self.backend.name
            return prepared
        async with self._gate():
            response = await self._ask(prepared.program)
            if response.status == ResponseStatus.UNAVAILABLE and prepared.composed and self.backend.name == "replay":
                # No answer for the program with the harness trailer (replay recordings never have
                # one): the verbatim program's recorded errors can still reject it. Only replay: a
                # live backend ran the composed program, and re-running the candidate without the
                # harness would let a candidate-caused non-answer buy a second, unharnessed try.
                fallback = await self._ask(prepared.candidate)
                return self.policy.judge_verbatim_fallback(request, fallback, self.backend.name)
            outcome = self.policy.judge(request, prepared, response, self.backend.name)
            if any(reason.startswith(R.HARNESS_LINE_ERROR) for reason in outcome.reasons):
                # is the trusted statement itself broken (input error), or did the candidate put
                # an error on the harness's lines (its failure, scored 0)?
                probe = self.policy.statement_probe(prepared)
                outcome = self.policy.judge_probe(outcome, probe, await self._ask(probe.program))
        return outcome

    async def check(
        self, requests: Sequence[VerifyRequest], on_result: Callable[[int, Outcome], None] | None = None
    ) -> list[Outcome]:
        """One outcome per request, in order. ``on_result(index, outcome)`` is called as each one
        finishes (the corpus build journals it there)."""

        async def one(index: int, request: VerifyRequest) -> Outcome:
            outcome = await self.check_one(request)
            if on_result is not None:
                on_result(index, outcome)
            return outcome

        return list(await asyncio.gather(*(one(i, r) for i, r in enumerate(requests))))

    def check_sync(self, requests: Sequence[VerifyRequest]) -> list[Outcome]:
        """``check`` for code that is not async (CLI, scripts, tests)."""
        return asyncio.run(self.check(requests))

    def prepare(self, request: VerifyRequest) -> Submission | Outcome:
        """What ``check_one`` would send to Lean (or the outcome decided without Lean)."""
        return self.policy.prepare(request)

    async def aclose(self) -> None:
        await self.backend.aclose()


__all__ = ["Verifier"]
