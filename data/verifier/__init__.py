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
    "TacticRecord", "VerifyRequest",
]
