"""Typed configuration of the classifiers stage (parsed by LightningCLI from configs/classifiers/*.yaml).

The model side (:mod:`classifiers.module`) takes ``base`` (a :class:`leanloop.training.models.ModelSpec`),
``optim`` (:class:`leanloop.training.optim.OptimConfig`) and the dataclasses below; the data side
(:mod:`classifiers.data`) takes the corpus run and batch sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from classifiers.baselines import TfidfConfig
from classifiers.model_io import FALSE_TOKEN, ONETOKEN_SUFFIX, TRUE_TOKEN, Preamble
from classifiers.truncation import HEAD_FRACTION


@dataclass
class InputConfig:
    """How a program becomes model input (both classifiers)."""

    max_length: int = 512
    """Context in tokens, special tokens / prompt suffix included (paper: 8,192)."""
    head_fraction: float = HEAD_FRACTION
    """Share of the program budget kept from the start when a program is too long (paper: 2,048 of
    8,192); the rest comes from the end."""
    program_tokens: int | None = None
    """The program's own budget, with special tokens / the prompt suffix on top (LLF Section 4.1:
    8,192 = 2,048 head + 6,144 tail program tokens; max_length must then hold them all). None: what
    ``max_length`` leaves after them."""
    preamble: Preamble = "keep"
    """What of each program's start is dropped before tokenizing: ``drop_header`` its leading
    import / open / set_option lines (the same in every program of the default corpus),
    ``drop_header_and_docstring`` the informal ``/-- -/`` docstring after them too, so a truncated
    view's head starts at the theorem (:func:`classifiers.model_io.strip_preamble`). Training and
    scoring alike (recorded in classifier.json); the baselines read the whole program. Measured in
    docs/results/classifiers.md (2026-12-04)."""
    pack_tokens: int | None = None
    """One-token training only: the training programs packed into rows of up to this many tokens,
    each program attending to itself alone and scored at its own verdict position (LLF Section 4.1:
    32,768). ``data.batch_size`` must then be 1 (a batch is one packed row). None: one program per row."""


@dataclass
class OneTokenFormat:
    """The one-token classifier's prompt: raw program, then ``suffix``; the model emits one token."""

    suffix: str = ONETOKEN_SUFFIX
    """Appended after the (right-stripped) program; a Lean comment, so the prompt stays Lean."""
    true_token: str = TRUE_TOKEN
    false_token: str = FALSE_TOKEN


@dataclass
class EvaluationConfig:
    """Threshold choice on validation and the test-time comparison (run after fit)."""

    threshold_criterion: Literal["mcc", "fpr", "recall"] = "mcc"
    """``mcc``: best validation MCC; ``fpr`` / ``recall``: matched to ``threshold_target``."""
    threshold_target: float | None = None
    n_resamples: int = 5000
    """Grouped bootstrap resamples (group = theorem name) for the test intervals."""
    baselines: bool = True
    """Majority class and TF-IDF + logistic regression, fit on train, in the same report."""
    tfidf: TfidfConfig = field(default_factory=TfidfConfig)
