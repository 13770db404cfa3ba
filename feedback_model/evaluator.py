"""The feedback model as an :class:`leanloop.evaluator.Evaluator`: program in, annotated program and
verdict out.

    evaluator = FeedbackEvaluator.load("artifacts://feedback_model/default", TraceGenerationConfig())
    predictions = evaluator.score(programs, deadline=deadline_in(30.0))
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from feedback_model.config import FeedbackModelCard, TraceFormat, TraceGenerationConfig
from feedback_model.config import FeedbackEvaluatorOptions  # noqa: F401  (rl types evaluator.options with it)
from feedback_model.generate import GeneratedTrace, HFTraceGenerator, TraceGenerator
from leanloop.artifacts import locate_run, resolve_model
from leanloop.evaluator import Prediction
from leanloop.traces import trace_verdict


@dataclass(frozen=True)
class FeedbackPrediction(Prediction):
    """A :class:`Prediction` with why: the verdict rule's reason (``no_error``, ``error_message``,
    ``ends_in_proof_state``, ``output_limit``, ``validity_tag``), a vote summary, or why the program
    was not judged (``input_too_long: ...``, ``deadline``)."""

    reason: str | None = None
    truncated: bool = False
    new_tokens: int = 0
    votes: tuple[bool, ...] | None = None
    cost: dict[str, float] | None = None
    """A cascade's per-candidate cost terms (LLF Eq. 13): ``gate_s`` (this program's gate time),
    ``load_s`` (its share of loading and the gate -> feedback transition), ``feedback_s`` (stage two's
    time on it, 0 when the gate rejected it), ``other_s`` (its share of the call's other driver work,
    C_other / N)."""


def unscored(reason: str, time_s: float = 0.0) -> FeedbackPrediction:
    return FeedbackPrediction(verdict=None, score=None, trace=None, time_s=time_s, reason=reason)


TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "added_tokens.json",
    "chat_template.jinja",
)
_TOKENIZERS: dict[str, Any] = {}  # content hash of the tokenizer files -> the loaded tokenizer


def folder_tokenizer(folder: str | Path) -> Any:
    """A model folder's tokenizer, loaded once per process per distinct set of tokenizer files
    (151k-token vocabularies take seconds: a sequential cascade would otherwise reload it on every
    swap, and the gate and the feedback model of the embedded default share the Qwen vocabulary).
    Shared: do not mutate it."""
    import hashlib

    from transformers import AutoTokenizer

    digest = hashlib.sha256()
    for name in TOKENIZER_FILES:
        path = Path(folder) / name
        if path.is_file():
            digest.update(name.encode() + b"\0" + path.read_bytes())
    key = digest.hexdigest()
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = AutoTokenizer.from_pretrained(str(folder))
    return _TOKENIZERS[key]


def load_generator(final_dir: Path, tokenizer: Any, config: TraceGenerationConfig) -> TraceGenerator:
    if config.backend == "vllm":
        from feedback_model.speculative import VLLMTraceGenerator

        return VLLMTraceGenerator(final_dir, tokenizer, config)
    return HFTraceGenerator.load(final_dir, tokenizer, config)


class TraceEvaluator:
    """What greedy and self-consistency share: prompts, the input limit, order and the deadline."""

    samples: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    source: Path | None = None  # the final/ folder it was loaded from (None: built in memory)

    def __init__(
        self, generator: TraceGenerator, tokenizer: Any, format: TraceFormat, config: TraceGenerationConfig
    ) -> None:
        self.generator = generator
        self.tokenizer = tokenizer
        self.format = format
        self.config = config
        context = getattr(generator, "context_length", None)
        if context is not None and config.max_input_tokens + config.max_new_tokens > context:
            raise ValueError(
                f"max_input_tokens ({config.max_input_tokens}) + max_new_tokens ({config.max_new_tokens}) exceed "
                f"the model's context of {context} tokens; lower one of them"
            )

    @classmethod
    def load(cls, ref: str | Path, generation: TraceGenerationConfig | None = None, **kwargs: Any):
        """From a finished feedback run (``artifacts://feedback_model/<run>``) or its final/ folder."""
        generation = generation or TraceGenerationConfig()
        if generation.backend == "vllm":
            from leanloop.vllm_engine import import_vllm

            import_vllm()  # fail before loading anything when the optional extra is missing
        final_dir = resolve_model(ref, "feedback_model")
        card = FeedbackModelCard.read(final_dir)
        tokenizer = folder_tokenizer(final_dir)
        evaluator = cls(load_generator(final_dir, tokenizer, generation), tokenizer, card.format, generation, **kwargs)
        evaluator.source = final_dir
        return evaluator

    def describe(self) -> dict[str, Any]:
        """What a caller records about this evaluator (the RL stage's manifest and logs)."""
        run = locate_run(self.source) if self.source is not None else None
        return {
            "evaluator": type(self).__name__,
            "path": str(self.source) if self.source else None,
            "run": str(run) if run else None,
            "max_input_tokens": self.config.max_input_tokens,
            "max_new_tokens": self.config.max_new_tokens,
            "draft_tokens": self.config.draft_tokens,
            "backend": self.config.backend,
            "samples": self.samples,
            "temperature": self.temperature,
        }

    def encode(self, program: str) -> list[int]:
        return self.tokenizer(self.format.prompt(program), add_special_tokens=False)["input_ids"]

    def seeds(self, program: str) -> list[int] | None:
        return None

    def judge(self, traces: list[GeneratedTrace]) -> FeedbackPrediction:
        raise NotImplementedError

    def score(self, programs: Sequence[str], deadline: float | None = None) -> list[FeedbackPrediction]:
        began = time.perf_counter()
        predictions: list[FeedbackPrediction | None] = [None] * len(programs)
        prompts: dict[int, list[int]] = {}
        for index, program in enumerate(programs):
            ids = self.encode(program)
            if len(ids) > self.config.max_input_tokens:
                predictions[index] = unscored(
                    f"input_too_long: the prompt has {len(ids)} tokens, over max_input_tokens="
                    f"{self.config.max_input_tokens}; the feedback model does not truncate (its trace must "
                    "reproduce the whole program), so check this program with Lean"
                )
            else:
                prompts[index] = ids
        order = sorted(prompts, key=lambda i: len(prompts[i]))
        seeds = [self.seeds(programs[i]) for i in order]
        results = self.generator.generate(
            [prompts[i] for i in order],
            samples=self.samples,
            temperature=self.temperature,
            top_p=self.top_p,
            seeds=None if any(s is None for s in seeds) else seeds,
            deadline=deadline,
        )
        for index, traces in zip(order, results):
            if traces is None or any(t.stopped for t in traces):
                spent = sum(t.time_s for t in traces) if traces else 0.0
                predictions[index] = unscored("deadline: not finished before the deadline", spent)
            else:
                predictions[index] = self.judge(traces)
        overhead = (time.perf_counter() - began - sum(p.time_s for p in predictions if p)) / max(len(programs), 1)
        # encoding and bookkeeping are shared out evenly, so the item times add up to the batch's wall time
        return [
            FeedbackPrediction(
                p.verdict, p.score, p.trace, p.time_s + max(overhead, 0.0), p.reason, p.truncated, p.new_tokens, p.votes
            )
            for p in predictions
        ]  # type: ignore[union-attr]


class FeedbackEvaluator(TraceEvaluator):
    """One greedy trace per program; verdict by the seed's rule; score 1.0 (valid) or 0.0."""

    def judge(self, traces: list[GeneratedTrace]) -> FeedbackPrediction:
        trace = traces[0]
        verdict = trace_verdict(trace.text, truncated=trace.truncated)
        return FeedbackPrediction(
            verdict.valid,
            1.0 if verdict.valid else 0.0,
            trace.text,
            trace.time_s,
            verdict.reason,
            trace.truncated,
            trace.new_tokens,
        )
