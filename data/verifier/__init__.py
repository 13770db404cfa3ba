"""The Verifier: ask Lean whether a program proves a statement, and what Lean said."""

from data.verifier.types import (
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
    "Category", "LeanBackend", "LeanMessage", "LeanResponse", "Outcome", "ResponseStatus",
    "TacticRecord", "VerifyRequest", "Verifier",
]


def __getattr__(name: str):
    # Lazy: the Verifier needs data.policy, which itself imports data.verifier.types.
    if name == "Verifier":
        from data.verifier.verifier import Verifier

        return Verifier
    raise AttributeError(f"module 'data.verifier' has no attribute {name!r}")
