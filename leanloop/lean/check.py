"""The ``lean:`` config block: how a stage checks programs with Lean, the same fields in every
stage that verifies (data, sft evaluation, rl, the autoformalizer, prm labelling, search
evaluation, ``make lean-check``)::

    lean:
      backend: {kind: replay, replay: {sources: [rl_lean]}}
      profile: collection
      heartbeats: profile
      concurrency: 8
      timeout: 60.0

Each stage sets its own defaults (data: ``concurrency: 16``; rl and sft evaluation: ``profile: rl``);
what only one stage needs sits in that stage's own block (rl's ``reward_checks``, the
autoformalizer's ``typecheck``, search's ``repl``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from leanloop.lean.backends import BackendConfig
from leanloop.lean.types import LeanBackend

if TYPE_CHECKING:
    from leanloop.lean.acceptance.policy import Profile


@dataclass
class LeanConfig:
    """How programs are checked with Lean (the Verifier and its backend)."""

    backend: BackendConfig = field(default_factory=BackendConfig)
    """The Lean backend: ``kind`` (replay: recorded Lean output; local: a lean-interact pool, whose
    ``local.workers`` should match ``concurrency``; kimina: a Kimina Lean Server) plus that kind's options."""
    profile: str = "collection"
    """The acceptance policy profile (:mod:`leanloop.lean.acceptance`): ``collection`` (the program
    compiled verbatim: what replay recordings answer), ``collection_llf`` (LLF's: 800,000 heartbeats
    and the printed-signature check), ``rl`` (hardened) or ``statement`` (statements with ``sorry``)."""
    heartbeats: int | None | Literal["profile"] = "profile"
    """The harness's ``maxHeartbeats`` line: ``profile`` (the profile's own: none for ``collection``,
    800,000 for the others), a number, or null (the program compiled verbatim, the only form a replay
    recording can answer)."""
    concurrency: int = 8
    """Lean checks in flight at once."""
    timeout: float = 60.0
    """Seconds Lean gets per program."""

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"lean.concurrency must be >= 1, got {self.concurrency}")
        if self.timeout <= 0:
            raise ValueError(f"lean.timeout must be > 0 seconds, got {self.timeout}")

    def require_profile(self, profile: str, why: str) -> None:
        """Refuses a block whose profile is not ``profile``, for a stage whose checks only that profile
        fits; ``why``: that stage's reason, which the one-line error gives."""
        if self.profile != profile:
            raise ValueError(f"lean.profile is {self.profile!r}: {why} only (set lean.profile: {profile})")

    def backend_instance(self) -> LeanBackend:
        """The configured backend (creating one starts nothing)."""
        return self.backend.build()

    def policy(self, profile: str | Profile | None = None, **options):
        """The acceptance policy of ``profile`` (a name or a :class:`Profile`; default: this block's)
        with this block's heartbeats; ``options``: :class:`AcceptancePolicy`'s others (``header``,
        ``lean_version``)."""
        from leanloop.lean.acceptance import AcceptancePolicy

        return AcceptancePolicy(profile or self.profile, heartbeats=self.heartbeats, **options)

    def verifier(self, backend: LeanBackend | None = None, policy=None, timeout: float | None = None):
        """A :class:`Verifier` with this block's concurrency; ``backend`` (default: the configured one,
        built now), ``policy`` (default: :meth:`policy`) and ``timeout`` (default: this block's)
        replace the block's own where a stage wraps or adjusts them."""
        from leanloop.lean.verifier import Verifier

        return Verifier(
            backend if backend is not None else self.backend_instance(),
            policy if policy is not None else self.policy(),
            concurrency=self.concurrency,
            timeout=self.timeout if timeout is None else timeout,
        )


__all__ = ["LeanConfig"]
