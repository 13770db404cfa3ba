"""Build the configured Evaluator (``leanloop.evaluator.Evaluator``) for the rewards.

The evaluator is named explicitly: a finished classifiers run (its manifest is checked) or a
factory for other evaluators (the feedback model's cascade). ``untrained_onetoken`` builds a
one-token classifier with random weights: it exists so the debug config runs with no other stage,
and every log line of such a run says the evaluator is untrained.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from leanloop.artifacts import resolve_artifact
from leanloop.evaluator import DescribedEvaluator
from rl.config import EvaluatorConfig


def _device(name: str) -> str:
    if name != "auto":
        return name
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def build_evaluator(config: EvaluatorConfig) -> tuple[Any | None, dict[str, Any]]:
    """The evaluator and a description of it (for logs, manifest and report)."""
    if config.kind == "none":
        return None, {"kind": "none"}
    device = _device(config.device)
    if config.kind == "classifier":
        from classifiers.evaluator import ClassifierEvaluator

        if not config.path:
            raise ValueError(
                "evaluator.kind classifier needs evaluator.path (e.g. artifacts://classifiers/onetoken_default)"
            )
        try:
            found = resolve_artifact(config.path, "classifiers")
        except FileNotFoundError as error:
            raise FileNotFoundError(
                f"evaluator {config.path!r}: {error}. Train it first (`make classifiers` makes "
                "artifacts/classifiers/onetoken_default)"
            ) from None
        final, run = found.outputs, found.run
        evaluator = ClassifierEvaluator.load(
            final, batch_size=config.batch_size, device=device, threshold=config.threshold
        )
        return evaluator, {
            "kind": "classifier",
            "classifier": evaluator.spec.kind,
            "path": str(final),
            "run": str(run) if run else None,
            "threshold": evaluator.threshold,
            "trained": True,
        }
    if config.kind == "history":
        from classifiers.evaluator import History, load_history_evaluator

        if not config.path:
            raise ValueError("evaluator.kind history needs evaluator.path (a classifiers run that saved its stacker)")
        try:
            found = resolve_artifact(config.path, "classifiers")
        except FileNotFoundError as error:
            raise FileNotFoundError(f"evaluator {config.path!r}: {error}") from None
        history = History.from_corpus(config.history) if config.history else History()
        evaluator = load_history_evaluator(
            found.outputs, history=history, threshold=config.threshold, batch_size=config.batch_size, device=device
        )
        return evaluator, {
            **evaluator.describe(),
            "kind": "history",
            "path": str(found.outputs),
            "run": str(found.run) if found.run else None,
            "history": config.history,
            "trained": True,
        }
    if config.kind == "factory":
        if not config.factory or ":" not in config.factory:
            raise ValueError("evaluator.kind factory needs evaluator.factory: 'module:callable'")
        module, _, name = config.factory.partition(":")
        target: Any = importlib.import_module(module)
        for part in name.split("."):
            target = getattr(target, part)
        o = config.options
        options = {
            "mode": o.mode,
            "generation": o.generation,
            "self_consistency": o.self_consistency,
            "cascade": o.cascade,
        }
        evaluator = target(config.path, **options) if config.path else target(**options)
        described = evaluator.describe() if isinstance(evaluator, DescribedEvaluator) else {}
        return evaluator, {
            **described,
            "kind": "factory",
            "factory": config.factory,
            "path": config.path,
            "trained": True,
        }
    if config.kind == "untrained_onetoken":
        from classifiers.evaluator import ClassifierEvaluator, ClassifierSpec
        from leanloop.training.models import load_model, load_tokenizer

        tokenizer = load_tokenizer(config.base)
        model = load_model(config.base, tokenizer=tokenizer)
        spec = ClassifierSpec.onetoken(
            config.max_length,
            0.5 if config.threshold is None else config.threshold,
            "untrained (random weights): debug only",
        )
        evaluator = ClassifierEvaluator(spec, model, tokenizer, batch_size=config.batch_size, device=device)
        return evaluator, {
            "kind": "untrained_onetoken",
            "base": config.base.name,
            "threshold": spec.threshold,
            "trained": False,
        }
    raise ValueError(f"unknown evaluator.kind {config.kind!r}")
