"""Typed configuration of the feedback-model stage.

Training (``python -m feedback_model.train``, LightningCLI) takes :class:`TraceFormat` in the model
and data sections; the evaluators, ``python -m feedback_model.cascade_eval`` (``make feedback-model-eval``) and
the benchmark take :class:`TraceGenerationConfig`, :class:`SelfConsistencyConfig` and
:class:`CascadeEvalConfig` (jsonargparse, configs under ``configs/feedback_model/eval/``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

FEEDBACK_FILE = "feedback.json"  # beside the weights in final/: how the model was trained to read input


@dataclass
class TraceFormat:
    """A training pair as raw text, no chat template (the seed's format): the prompt is the program
    (trailing whitespace removed) followed by ``separator``; the completion is the annotated program
    followed by the end-of-text token. The separator is a Lean line comment, so the prompt is still a
    Lean file, and the trace starts on a fresh line."""

    separator: str = "\n\n-- feedback trace:\n"

    def prompt(self, program: str) -> str:
        return program.rstrip() + self.separator


@dataclass
class FeedbackModelCard:
    """What ``final/feedback.json`` records, read back by the evaluators."""

    format: TraceFormat
    max_length: int  # tokens per packed training row = the longest pair (prompt + trace) trained on
    base: str | None = None

    def write(self, folder: str | Path) -> Path:
        path = Path(folder) / FEEDBACK_FILE
        path.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def read(cls, folder: str | Path) -> "FeedbackModelCard":
        path = Path(folder) / FEEDBACK_FILE
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} not found: {folder} is not a trained feedback model's final/ folder "
                "(train one with `make feedback-model`, then name artifacts/feedback_model/<run>/final)"
            )
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return cls(format=TraceFormat(**data["format"]), max_length=int(data["max_length"]), base=data.get("base"))


@dataclass
class TraceGenerationConfig:
    """How the feedback model generates its traces (every evaluator built on the feedback model)."""

    max_input_tokens: int = 4096
    """Longest program (prompt tokens, separator included) the evaluator reads. A longer program is
    rejected with a per-item reason (verdict None), never truncated: its trace would have to
    reproduce text the model never saw."""
    max_new_tokens: int = 4096
    """Output-token limit. A trace that reaches it without ending is invalid (App. B)."""
    draft_tokens: int = 8
    """Speculative copy-drafting: up to this many tokens copied from the span of the program (or of
    the trace so far) that follows the latest match of the last n-gram, checked by the model in one
    forward pass; 0 turns it off. transformers: prompt-lookup decoding; vLLM: n-gram speculation."""
    ngram_size: int = 3
    """Longest n-gram looked up to find the span to copy (transformers ``max_matching_ngram_size``,
    vLLM ``prompt_lookup_max``)."""
    backend: Literal["transformers", "vllm"] = "transformers"
    """``vllm`` needs the optional ``gpu`` extra (``pip install -e '.[gpu]'``); it runs on CPU too with
    vLLM's CPU build (``make test-vllm``'s venv)."""
    device: str = "cpu"
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    fp8: bool = False
    """vLLM only: FP8 weight quantization (``quantization="fp8"``)."""
    gpu_memory_utilization: float = 0.85
    """vLLM only: share of GPU memory vLLM may take (lower it when the gate shares the GPU)."""
    vllm_extra: dict[str, Any] = field(default_factory=dict)
    """vLLM only: any other ``vllm.LLM`` keyword (``enforce_eager: true`` skips graph compilation)."""

    def __post_init__(self) -> None:
        if self.max_input_tokens < 1 or self.max_new_tokens < 1:
            raise ValueError(
                f"max_input_tokens and max_new_tokens must be positive, got "
                f"{self.max_input_tokens} and {self.max_new_tokens}"
            )
        if self.draft_tokens < 0 or self.ngram_size < 1:
            raise ValueError(
                f"draft_tokens must be >= 0 and ngram_size >= 1, got {self.draft_tokens}, {self.ngram_size}"
            )
        if self.fp8 and self.backend != "vllm":
            raise ValueError("fp8 is a vLLM option: set backend: vllm (GPU, `gpu` extra) or fp8: false")


@dataclass
class SelfConsistencyConfig:
    """k traces sampled at temperature T; the program is accepted when at least m say valid.
    The score is the fraction of valid traces (seed defaults 5 / 0.8 / 4)."""

    samples: int = 5
    temperature: float = 0.8
    min_valid: int = 4
    top_p: float = 1.0
    seed: int = 0
    """Sample i of a program uses a seed derived from (seed, program text, i): the same program
    gets the same samples wherever it is scored (alone, in a batch, in the cascade)."""

    def __post_init__(self) -> None:
        if self.samples < 1 or not 1 <= self.min_valid <= self.samples:
            raise ValueError(f"self-consistency needs 1 <= min_valid <= samples, got {self.min_valid} / {self.samples}")
        if self.temperature <= 0:
            raise ValueError(
                f"temperature must be > 0 for sampling, got {self.temperature} (greedy is the plain feedback evaluator)"
            )


@dataclass
class CascadeConfig:
    """The one-token gate in front of the feedback model."""

    gate: str | None = None
    """A one-token (or encoder) classifier's run or its final/ folder (with classifier.json). No
    default: a config that loses it (a layer replacing the section) is an error, never the demo's gate."""
    threshold: float | None = 0.5
    """Gate threshold (LLF Section 5: 0.5); None uses the one the classifier calibrated on validation
    (classifier.json), which LLF reports as a separate row."""
    residency: Literal["auto", "sequential", "together"] = "auto"
    """``sequential``: gate loaded, run, released, then the feedback model (each batch pays the
    swap); ``together``: both stay loaded; ``auto``: together when both fit in free memory."""
    gate_batch_size: int = 16
    gate_dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """The gate's weights: ``auto`` is bf16 on a GPU (LLF Section 5) and fp32 on the CPU."""


@dataclass
class FeedbackEvaluatorOptions:
    """What an RL config gives the feedback model's evaluator (``model.evaluator.options``, read by
    :func:`feedback_model.factory.evaluator`). Typed, so that config layers merge keys and numbers
    given on the command line stay numbers."""

    mode: Literal["cascade", "feedback"] = "cascade"
    """cascade: the gate of ``cascade.gate`` first, the feedback model on its positives; feedback: alone."""
    generation: TraceGenerationConfig = field(default_factory=TraceGenerationConfig)
    self_consistency: SelfConsistencyConfig | None = None
    """None: one greedy trace; a section: the vote of sampled traces."""
    cascade: CascadeConfig = field(default_factory=CascadeConfig)


@dataclass
class CascadeEvalConfig:
    """``python -m feedback_model.cascade_eval`` (``make feedback-model-eval``): the seed's Table 3 on one split."""

    run: str = "default"
    """Output: artifacts/feedback_model_eval/<run>/."""
    corpus: str = "artifacts://data/default"
    split: str = "test"
    feedback: str = "artifacts://feedback_model/default"
    """The trained feedback model: a run (artifacts://feedback_model/<run>) or its final/ folder."""
    cascade: CascadeConfig = field(default_factory=CascadeConfig)
    generation: TraceGenerationConfig = field(default_factory=TraceGenerationConfig)
    self_consistency: SelfConsistencyConfig = field(default_factory=SelfConsistencyConfig)
    sample_programs: int | None = None
    """Evaluate on problems drawn at random (seeded) until this many labelled programs are in (all
    candidates of a drawn problem, or ``max_per_problem`` of them); None: the whole split."""
    max_per_problem: int | None = None
    """Keep at most this many candidates of each drawn problem (a seeded random subset): more problems,
    so tighter grouped intervals, for the same cost; the budget replay then runs on the subsets.
    None: all candidates (complete budget pools)."""
    batch_programs: int | None = 64
    """Programs per model call (a batch, as the RL stage sends them). The cascades score the whole
    split in one call, so the sequential one pays one load and one gate -> feedback transition (LLF
    Section 5). None: all in one batch."""
    feedback_per_prover_label: int = 50
    """Feedback-quality metrics on a sample stratified by prover x label: up to this many programs of
    the evaluated ones in each cell (LLF App. D: 334)."""
    n_resamples: int = 5000
    """Bootstrap resamples, groups = benchmark + problem (LLF: 5,000)."""
    seed: int = 42
    """Problem sampling, feedback-quality sample and bootstrap (LLF: 42)."""
    threads: int | None = None
    """torch intra-op threads of the evaluation process (None: torch's default). Tiny models on a
    busy CPU run faster on one: idle intra-op threads spin on shared cores."""
    overwrite: bool = False
