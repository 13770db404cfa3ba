"""Speculative copy-drafting: most of a feedback trace repeats the program, so drafts are copied."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

from feedback_model.config import TraceGenerationConfig
from feedback_model.generate import GeneratedTrace, split_completion


def vllm_speculative_config(config: TraceGenerationConfig) -> dict[str, Any] | None:
    if config.draft_tokens <= 0:
        return None
    return {
        "method": "ngram",
        "num_speculative_tokens": config.draft_tokens,
        "prompt_lookup_max": config.ngram_size,
        "prompt_lookup_min": 1,
    }


class VLLMTraceGenerator:
    """:class:`feedback_model.generate.TraceGenerator` on vLLM: the whole batch goes to the engine at
    once (it schedules the sequences itself), so the deadline is checked before the batch only."""

    def __init__(self, final_dir: str | Path, tokenizer: Any, config: TraceGenerationConfig) -> None:
        from leanloop.vllm_engine import VLLMEngineConfig, start_engine

        self.config = config
        self.tokenizer = tokenizer
        self.eos_id = tokenizer.eos_token_id
        # inside rl's training ranks this engine follows TRL's colocate rules (leanloop.vllm_engine)
        engine = VLLMEngineConfig(
            gpu_memory_utilization=config.gpu_memory_utilization,
            max_model_len=config.max_input_tokens + config.max_new_tokens,
            extra=config.vllm_extra,
        )
        self.llm = start_engine(
            str(final_dir),
            engine,
            dtype="auto" if config.dtype == "float32" else config.dtype,
            quantization="fp8" if config.fp8 else None,
            seeded=True,
            speculative_config=vllm_speculative_config(config),
        )
        self.context_length = config.max_input_tokens + config.max_new_tokens

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        samples: int = 1,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seeds: Sequence[Sequence[int]] | None = None,
        deadline: float | None = None,
    ):
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        if deadline is not None and time.monotonic() >= deadline:
            return [None] * len(prompts)
        requests, params = [], []
        for index, prompt in enumerate(prompts):
            for j in range(samples):
                requests.append(TokensPrompt(prompt_token_ids=list(prompt)))
                params.append(
                    SamplingParams(
                        n=1,
                        temperature=temperature,
                        top_p=top_p if temperature > 0 else 1.0,
                        max_tokens=self.config.max_new_tokens,
                        stop_token_ids=[self.eos_id],
                        seed=None if seeds is None else int(seeds[index][j]),
                        skip_special_tokens=False,
                        detokenize=False,
                    )
                )
        began = time.perf_counter()
        outputs = self.llm.generate(requests, params, use_tqdm=False)
        share = (time.perf_counter() - began) / max(len(requests), 1)
        results = []
        for index in range(len(prompts)):
            traces = []
            for output in outputs[index * samples : (index + 1) * samples]:
                completion = output.outputs[0]
                ids, finished, truncated = split_completion(
                    completion.token_ids, self.eos_id, self.config.max_new_tokens
                )
                # vLLM drops the stop token from token_ids; a "stop" finish is the end-of-text token
                finished = finished or completion.finish_reason == "stop"
                truncated = not finished and completion.finish_reason == "length"
                text = self.tokenizer.decode(ids, skip_special_tokens=False)
                traces.append(GeneratedTrace(text, finished, truncated, len(ids) + finished, share))
            results.append(traces)
        return results
