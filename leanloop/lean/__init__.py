"""The Verifier: ask Lean whether a program proves a statement, and what Lean said."""

from leanloop.lean.types import (
    Category,
    LeanBackend,
    LeanMessage,
    LeanResponse,
    Outcome,
    ResponseStatus,
    TacticRecord,
    VerifyRequest,
)

__all__ = [
    "Category",
    "LeanBackend",
    "LeanMessage",
    "LeanResponse",
    "Outcome",
    "ResponseStatus",
    "TacticRecord",
    "VerifyRequest",
    "Verifier",
]


def __getattr__(name: str):
    # Lazy: the Verifier needs leanloop.lean.acceptance, which itself imports leanloop.lean.types.
    if name == "Verifier":
        from leanloop.lean.verifier import Verifier

        return Verifier
    raise AttributeError(f"module 'leanloop.lean' has no attribute {name!r}")
