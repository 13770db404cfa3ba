"""Typed configuration of the corpus build (``configs/data/*.yaml``, ``python -m data.build``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from leanloop.lean.check import LeanConfig


@dataclass
class SourceConfig:
    """One file of candidate programs (JSONL, JSONL.gz or parquet).

    Each row gives a theorem ``name`` and either a full ``program`` or a ``proof`` body that is
    joined to the trusted ``statement`` (and ``header``) to make one. Field names are configurable
    because public prover dumps all spell them differently; a dotted name reads a nested field
    (``compilation_result.system_messages``)."""

    path: str
    """File to read; ``shared://...`` resolves into the shared real-data folder."""
    name: str
    """Label of this source in the corpus's ``source`` column and the manifest (e.g. ``rl_lean``)."""
    program_field: str | None = "program"
    proof_field: str | None = "proof"
    name_field: str = "name"
    header_field: str | None = "header"
    statement_field: str | None = "statement"
    prover_field: str | None = "prover"
    prover: str | None = None
    """Prover identity when the rows carry none."""
    origin_field: str | None = "source"
    """Row field with the row's own provenance (kept in the ``origin`` column)."""
    recorded_verdict_field: str | None = None
    """Row field holding a verdict recorded with the candidate (true = passed), for reconciliation."""
    recorded_verdict: str | None = None
    """The same for a whole file of claimed results: ``pass`` (e.g. published accepted proofs)."""
    recorded_system_error_field: str | None = None
    """Row field that is non-empty when the recorded check failed for system reasons (timeouts)."""
    limit: int | None = None
    """Read only the first N rows (debug configs)."""


@dataclass
class SplitConfig:
    """Theorem-disjoint splits: a theorem's split is a hash of its name, so all of its programs,
    from every source and every rebuild, land in the same split."""

    train: float = 0.8
    valid: float = 0.1
    test: float = 0.1
    salt: str = "leanloop-data-v1"


@dataclass
class DataConfig:
    RENAMED_KEYS: ClassVar[dict[str, str]] = {
        "backend": "lean.backend",
        "profile": "lean.profile",
        "concurrency": "lean.concurrency",
        "timeout": "lean.timeout",
    }

    sources: list[SourceConfig] = field(default_factory=list)
    run: str = "default"
    """Output folder: artifacts/data/<run>/."""
    statements: list[str] = field(default_factory=list)
    """Trusted statement files (JSONL with ``name``, ``formal_statement`` or ``statement``, ``header``):
    they supply the statement and header for rows that carry none (earlier files win)."""
    header: str | None = None
    """Benchmark header when neither the row nor a statement file gives one; None = the seed's
    miniF2F header (leanloop.lean.acceptance.BENCHMARK_HEADER)."""
    lean: LeanConfig = field(default_factory=lambda: LeanConfig(concurrency=16))
    """How programs are checked (:class:`leanloop.lean.check.LeanConfig`): the profile is
    ``collection`` (the seed's, verbatim: what replay recordings answer), ``collection_llf`` (LLF's;
    a real Lean backend) or ``rl`` (hardened); 16 programs in flight; LLF collects with a 180 s timeout."""
    timeout_retries: int = 0
    """Further attempts for a candidate that timed out (LLF's pool comparison gives it a second one:
    1). Only candidates verified in this build are retried: one resumed from the journal keeps its
    journaled outcome."""
    max_input_chars: int = 1_048_576
    """Rows with a longer program are bad input (``input_error``). Programs between the policy's
    262,144-character limit and this one are real candidates and get ``precheck_rejected``."""
    splits: SplitConfig = field(default_factory=SplitConfig)
    traces: bool = True
    """Write ``reference_trace`` (leanloop.traces.annotate) for programs Lean answered."""
    fresh: bool = False
    """Discard the journal of an earlier, unfinished build of this run instead of resuming it."""
    shard: str | None = None
    """``I/N``: build only shard I of N (a stable hash of each program's dedup key picks its shard)
    as the run ``<run>/shards/<I>-of-<N>/``; ``python -m data.merge`` merges the N into ``<run>``."""
    min_eligible_share: float = 0.5
    """Fail the build (non-zero exit, no manifest; the journal is kept for a resume) when fewer than
    this share of the distinct programs got an outcome other than an infrastructure failure
    (``infra_error``): a build whose Lean was missing or broken must not look finished."""
