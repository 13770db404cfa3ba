"""The acceptance policy (one object, two profiles): see ``leanloop.lean.acceptance.policy``."""

from leanloop.lean.acceptance.axioms import ALLOWED_AXIOMS, AxiomReply, parse_axioms_reply
from leanloop.lean.acceptance.submission import (
    HARNESS_NAMESPACE,
    Signature,
    StatementError,
    Submission,
    parse_statement,
)
from leanloop.lean.acceptance.masking import mask
from leanloop.lean.acceptance.policy import (
    BENCHMARK_HEADER,
    COLLECTION,
    HARNESS_HEARTBEATS,
    MAX_CHARS,
    PROFILES,
    RL,
    STATEMENT,
    AcceptancePolicy,
    Precheck,
    Profile,
    is_sorry_warning,
)

__all__ = [
    "ALLOWED_AXIOMS",
    "AxiomReply",
    "parse_axioms_reply",
    "HARNESS_NAMESPACE",
    "Signature",
    "StatementError",
    "Submission",
    "parse_statement",
    "mask",
    "BENCHMARK_HEADER",
    "COLLECTION",
    "HARNESS_HEARTBEATS",
    "MAX_CHARS",
    "PROFILES",
    "RL",
    "STATEMENT",
    "AcceptancePolicy",
    "Precheck",
    "Profile",
    "is_sorry_warning",
]
