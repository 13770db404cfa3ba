"""Typed configuration of the pretraining stage (``configs/pretrain/*.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class JsonlSource:
    """Documents from a JSONL file: each row's ``fields`` joined by a blank line."""

    path: str
    fields: list[str]
    """Row fields in order; a trailing ``?`` marks one optional (``informal_prefix?``). A row
    missing a required field is counted as ``missing_field``."""
    name_field: str | None = "name"
    """Row field naming the theorem (used by ``holdout``); None when rows have no name."""


@dataclass
class CorpusConfig:
    """What text goes in. Either ``prebuilt`` (a corpus built by ``python -m pretrain.documents``)
    or the sources below, collected in-process (small corpora such as the embedded default)."""

    prebuilt: str | None = None
    """``artifacts://pretrain_corpus/<run>`` or its path; when set, the sources are ignored."""
    text_dirs: list[str] = field(default_factory=list)
    """Folders searched recursively for ``extensions`` files (a Mathlib checkout, Lean docs)."""
    extensions: list[str] = field(default_factory=lambda: [".lean", ".md"])
    jsonl: list[JsonlSource] = field(default_factory=list)
    """Statements and accepted proofs (JSONL / JSONL.gz)."""
    holdout: str | None = None
    """A data-stage corpus (``artifacts://data/<run>``): theorems in its non-train splits are left
    out of the JSONL sources, so that no evaluated theorem's proof is pretrained on."""
    validation_fraction: float = 0.02
    """Share of documents held out for validation loss (by a hash of the text: stable)."""
    max_documents: int | None = None
    """Keep only the first N documents (debug runs)."""


@dataclass
class CorpusBuild:
    """``python -m pretrain.documents``: materialize a corpus once, reuse it across runs."""

    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    run: str = "default"
    """Output: artifacts/pretrain_corpus/<run>/ (documents.parquet + manifest.json)."""
