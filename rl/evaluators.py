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

from leanloop.artifacts import read_manifest
from leanloop.paths import artifacts_root, resolve_shared
from rl.config import EvaluatorConfig

ARTIFACTS = "artifacts://"


def _device(name: str) -> str:
    if name != "auto":
        return name
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_run(path: str) -> tuple[Path, Path | None]:
    """(final folder, run folder or None) for ``artifacts://<stage>/<run>``, a run folder or a final/ folder."""
    folder = artifacts_root() / path[len(ARTIFACTS):] if path.startswith(ARTIFACTS) else resolve_shared(path)
    if (folder / "manifest.json").is_file() and (folder / "final").is_dir():
        return folder / "final", folder
    if folder.name == "final" and (folder.parent / "manifest.json").is_file():
        return folder, folder.parent
    if folder.is_dir():
        return folder, None
    raise FileNotFoundError(f"evaluator {path!r}: {folder} does not exist. Train it first (`make classifiers` makes "
                            "artifacts/classifiers/onetoken_default) or point evaluator.path at a finished run")


def build_evaluator(config: EvaluatorConfig) -> tuple[Any | None, dict[str, Any]]:
    """The evaluator and a description of it (for logs, manifest and report)."""
    if config.kind == "none":
        return None, {"kind": "none"}
    device = _device(config.device)
    if config.kind == "classifier":
        from classifiers.evaluator import ClassifierEvaluator

        if not config.path:
            raise ValueError("evaluator.kind classifier needs evaluator.path (e.g. artifacts://classifiers/onetoken_default)")
        final, run = resolve_run(config.path)
        if run is not None:
            read_manifest(run, stage="classifiers")
        evaluator = ClassifierEvaluator.load(final, batch_size=config.batch_size, device=device,
                                             threshold=config.threshold)
        return evaluator, {"kind": "classifier", "classifier": evaluator.spec.kind, "path": str(final),
                           "run": str(run) if run else None, "threshold": evaluator.threshold, "trained": True}
    if config.kind == "factory":
        if not config.factory or ":" not in config.factory:
            raise ValueError("evaluator.kind factory needs evaluator.factory: 'module:callable'")
        module, _, name = config.factory.partition(":")
        target: Any = importlib.import_module(module)
        for part in name.split("."):
            target = getattr(target, part)
        evaluator = target(config.path, **config.options) if config.path else target(**config.options)
        described = evaluator.describe() if callable(getattr(evaluator, "describe", None)) else {}
        return evaluator, {**described, "kind": "factory", "factory": config.factory, "path": config.path,
                           "trained": True}
    if config.kind == "untrained_onetoken":
        from classifiers.evaluator import ClassifierEvaluator, ClassifierSpec
        from classifiers.scoring import FALSE_TOKEN, ONETOKEN_SUFFIX, TRUE_TOKEN
        from classifiers.truncation import HEAD_FRACTION
        from leanloop.training.models import load_model, load_tokenizer

        tokenizer = load_tokenizer(config.base)
        model = load_model(config.base, tokenizer=tokenizer)
        spec = ClassifierSpec(kind="onetoken", max_length=config.max_length, head_fraction=HEAD_FRACTION,
                              threshold=0.5 if config.threshold is None else config.threshold,
                              threshold_source="untrained (random weights): debug only",
                              suffix=ONETOKEN_SUFFIX, true_token=TRUE_TOKEN, false_token=FALSE_TOKEN)
        evaluator = ClassifierEvaluator(spec, model, tokenizer, batch_size=config.batch_size, device=device)
        return evaluator, {"kind": "untrained_onetoken", "base": config.base.name, "threshold": spec.threshold,
                           "trained": False}
    raise ValueError(f"unknown evaluator.kind {config.kind!r}")
