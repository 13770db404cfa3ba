"""``replay``: answer from real recorded Lean output, never from a guess.

The tests and the embedded default run without Lean: a program gets the response Lean gave when
the recording was made (see ``leanloop.lean.recordings`` for the sources and how each is read).
A program nobody recorded gets ``UNAVAILABLE`` with detail ``"no recorded Lean answer"``.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Sequence

from leanloop.lean.recordings import DEFAULT_SOURCES, Recording, RecordingIndex, normalize_program, resolve_source
from leanloop.lean.replies import NO_RECORDED_ANSWER
from leanloop.lean.types import LeanBackend, LeanResponse, ResponseStatus


@dataclass
class ReplayBackendConfig:
    """Options of the ``replay`` backend. See README "Lean backends"."""

    # aliases (rl_lean, kimina_match, repl_io, repl_all_versions) or JSONL paths (shared://... allowed);
    # earlier sources win when a program was recorded more than once
    sources: list[str] = field(default_factory=lambda: list(DEFAULT_SOURCES))
    honor_timeout: bool = False  # answer TIMEOUT when the recorded Lean time exceeds the requested timeout


class ReplayBackend(LeanBackend):
    """Replays recorded answers keyed by ``normalize_program`` text.

    ``sources``: aliases (``rl_lean``, ``kimina_match``, ``repl_io``, ``repl_all_versions``) or paths
    (``shared://...`` allowed), loaded on first use; earlier sources win when a program was
    recorded more than once (``lookup`` returns every recording, in that order).
    ``honor_timeout``: when true, a recording whose Lean time exceeds the requested timeout answers
    ``TIMEOUT`` (Lean would not have finished in that budget); off by default because the recorded
    time belongs to the recording machine.
    """

    name = "replay"

    def __init__(self, sources: Sequence[str] = DEFAULT_SOURCES, honor_timeout: bool = False):
        if isinstance(sources, str):
            sources = [sources]
        if not sources:
            raise ValueError("ReplayBackend needs at least one recording source (e.g. ['rl_lean'])")
        self.sources = list(sources)
        for source in self.sources:  # a typo in a config fails here, not at the first program
            resolve_source(source)
        self.honor_timeout = honor_timeout
        self._index: RecordingIndex | None = None
        self._lock = threading.Lock()

    @property
    def index(self) -> RecordingIndex:
        """The loaded recordings (loads them on first access)."""
        if self._index is None:
            with self._lock:
                if self._index is None:
                    self._index = RecordingIndex(self.sources)
        return self._index

    def lookup(self, program: str) -> list[Recording]:
        """Every recording of this program (normalized), preferred first; empty if none."""
        return self.index.lookup(program)

    def answer(self, program: str, timeout: float | None = None) -> LeanResponse:
        """Synchronous ``run``: the preferred recording's response, or UNAVAILABLE."""
        recordings = self.lookup(program)
        if not recordings:
            return LeanResponse(ResponseStatus.UNAVAILABLE, detail=NO_RECORDED_ANSWER)
        response = recordings[0].fresh_response()
        if (
            self.honor_timeout
            and timeout is not None
            and response.status is ResponseStatus.OK
            and response.time_s > timeout
        ):
            return LeanResponse(
                ResponseStatus.TIMEOUT,
                time_s=float(timeout),
                lean_version=response.lean_version,
                detail=f"recorded Lean time {response.time_s:.1f}s exceeds the {timeout:g}s timeout",
            )
        return response

    async def run(self, program: str, timeout: float | None = None) -> LeanResponse:
        if self._index is None:  # first call: load off the event loop
            await asyncio.to_thread(lambda: self.index)
        return self.answer(program, timeout)


__all__ = ["ReplayBackend", "ReplayBackendConfig", "normalize_program"]
