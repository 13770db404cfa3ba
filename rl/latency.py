"""A Lean backend whose answers are real and whose timing is controlled."""

from __future__ import annotations

import asyncio
import math
from typing import Callable

from leanloop.lean.types import LeanBackend, LeanResponse, ResponseStatus

DelayFn = Callable[[str, LeanResponse], float]


class TimedBackend(LeanBackend):
    def __init__(
        self, inner: LeanBackend, delay: DelayFn | None = None, scale: float = 1.0, unrecorded_delay: float = 0.0
    ):
        """``delay(program, response) -> seconds`` of Lean time; default: the recorded Lean time (a
        recorded timeout never finishes; a program with no recording takes ``unrecorded_delay``)."""
        if scale <= 0 or unrecorded_delay < 0:
            raise ValueError("scale must be > 0 and unrecorded_delay >= 0")
        self.inner = inner
        self.name = inner.name
        self.scale = scale
        self.unrecorded_delay = unrecorded_delay
        self.delay = delay or self.recorded_delay
        self.started = 0
        self.finished = 0
        self.cancelled = 0
        self.timed_out = 0

    def recorded_delay(self, program: str, response: LeanResponse) -> float:
        if response.status is ResponseStatus.TIMEOUT:
            return math.inf
        if response.status is ResponseStatus.UNAVAILABLE:
            return self.unrecorded_delay
        return float(response.time_s or 0.0)

    async def run(self, program: str, timeout: float | None = None) -> LeanResponse:
        self.started += 1
        response = await self.inner.run(program, None)  # known now, revealed after the delay
        wait = float(self.delay(program, response))
        try:
            if timeout is not None and wait > timeout:
                await asyncio.sleep(timeout * self.scale)
                self.timed_out += 1
                return LeanResponse(
                    ResponseStatus.TIMEOUT,
                    time_s=float(timeout),
                    lean_version=response.lean_version,
                    detail=f"no answer within the {timeout:g}s timeout (answer due after {wait:.3g}s)",
                )
            await asyncio.sleep(wait * self.scale)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        self.finished += 1
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()
