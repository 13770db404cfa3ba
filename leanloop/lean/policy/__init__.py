"""The acceptance policy (one object, two profiles): see ``leanloop.lean.policy.policy``."""

from leanloop.lean.policy.axioms import ALLOWED_AXIOMS, AxiomReply, parse_axioms_reply
from leanloop.lean.policy.harness import HARNESS_NAMESPACE, Signature, StatementError, Submission, parse_statement
from leanloop.lean.policy.masking import mask
from leanloop.lean.policy.policy import (
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
    "ALLOWED_AXIOMS", "AxiomReply", "parse_axioms_reply", "HARNESS_NAMESPACE", "Signature", "StatementError",
    "Submission", "parse_statement", "mask", "BENCHMARK_HEADER", "COLLECTION", "HARNESS_HEARTBEATS",
    "MAX_CHARS", "PROFILES", "RL", "STATEMENT", "AcceptancePolicy", "Precheck", "Profile", "is_sorry_warning",
]
