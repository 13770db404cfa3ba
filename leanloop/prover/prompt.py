"""How a prover sees a statement and what it is trained to answer, in one place for training and
sampling (a prompt rendered differently at sampling time than in training wastes the fine-tune).

- ``raw``: the prompt is the Lean program prefix (header, context, declaration ending in ``by``);
  the target is the proof that continues it, then EOS. DeepSeek-Prover-V1.5 style.
- ``chat``: the statement goes into a user turn inside a ```lean4 block; the assistant answers with
  the complete program in a ```lean4 block, then the end-of-turn token. Kimina / Goedel-V2 style.
  The tokenizer's own chat template is used (a real Qwen3 checkpoint ships one); the converted
  offline tokenizer has none, so a plain ChatML template (Qwen's turn format) stands in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass
class PromptConfig:
    style: Literal["raw", "chat"] = "raw"
    """raw: continue the Lean text; chat: a user turn with the statement, the program as answer."""
    instruction: str = "Complete the following Lean 4 code:"
    """chat only: the text before the statement's code block."""
    system: str | None = None
    """chat only: an optional system message."""
    end_of_turn: str = "<|im_end|>"
    """chat only: the token closing the assistant turn (trained as the last target token, and a stop
    token when sampling)."""


def render_prompt(statement_prompt: str, config: PromptConfig, tokenizer: Any) -> str:
    """The text given to the model for a statement whose program prefix is ``statement_prompt``."""
    if config.style == "raw":
        return statement_prompt
    messages = [{"role": "system", "content": config.system}] if config.system else []
    messages.append({"role": "user", "content": f"{config.instruction}\n\n```lean4\n{statement_prompt}\n```"})
    template = None if getattr(tokenizer, "chat_template", None) else CHATML_TEMPLATE
    return tokenizer.apply_chat_template(messages, chat_template=template, tokenize=False, add_generation_prompt=True)


def render_target(program: str, statement_prompt: str, config: PromptConfig) -> str:
    """What the model is trained to produce after the prompt (EOS / end-of-turn added separately:
    see :func:`stop_token`)."""
    if config.style == "raw":
        if not program.startswith(statement_prompt):
            raise ValueError("raw style needs the program to start with its statement prompt")
        return program[len(statement_prompt) :]
    return f"```lean4\n{program.rstrip()}\n```"


def stop_token(config: PromptConfig, tokenizer: Any) -> str:
    """The token that ends an answer: EOS for raw text, the end-of-turn token for chat."""
    return tokenizer.eos_token if config.style == "raw" else config.end_of_turn


def trained_prompt(spec: Any, configured: PromptConfig | None) -> PromptConfig:
    """The prompt format to use with a prover (``spec``: a leanloop.training.models.ModelSpec): the one
    its sft run recorded in its manifest, unless ``configured`` names one (which must then agree)."""
    from dataclasses import asdict

    from leanloop.artifacts import read_manifest

    run = spec.run_dir()
    trained = None
    if run is not None:
        recorded = read_manifest(run).get("model", {}).get("prompt")
        trained = PromptConfig(**recorded) if recorded else None
    if configured is None:
        return trained or PromptConfig()
    if trained is not None and asdict(trained) != asdict(configured):
        raise ValueError(
            f"prompt {asdict(configured)} differs from the one {run} was trained "
            f"with ({asdict(trained)}); leave `prompt` unset to use the trained one"
        )
    return configured
