"""The acceptance policy (one object, two profiles): see ``data.policy.policy``."""

from data.policy.axioms import ALLOWED_AXIOMS, AxiomReply, parse_axioms_reply
from data.policy.harness import HARNESS_NAMESPACE, Signature, StatementError, Submission, parse_statement
from data.policy.masking import mask
from data.policy.policy import (
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
