"""Checking a stage's inputs against their manifests before any training starts."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from leanloop.artifacts import ManifestError, read_manifest


class InputMismatchError(ManifestError):
    """An input artifact was produced for another tokenizer, vocabulary or base model."""


_FINGERPRINTS: dict[tuple[int, int], str] = {}


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """A hash of the vocabulary (tokens in id order, added tokens included): equal iff the ids
    mean the same tokens. Memoized per tokenizer object and size (hashing 151k tokens takes ~1 s)."""
    key = (id(tokenizer), len(tokenizer))
    if key not in _FINGERPRINTS:
        vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
        text = json.dumps([[token, index] for token, index in vocab], ensure_ascii=False)
        _FINGERPRINTS[key] = "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:32]
    return _FINGERPRINTS[key]


def model_identity(model: Any, tokenizer: Any, base: str) -> dict[str, Any]:
    """The ``model`` section of a manifest."""
    config = model.config
    return {
        "base": base,
        "architecture": (config.architectures or [type(model).__name__])[0],
        "model_type": config.model_type,
        "vocab_size": int(config.vocab_size),
        "tokenizer": tokenizer_fingerprint(tokenizer) if tokenizer is not None else None,
        "tokenizer_size": len(tokenizer) if tokenizer is not None else None,
    }


def check_input(path: str | Path, stage: str | None = None) -> dict[str, Any]:
    """The manifest of a finished input artifact (from ``stage`` if given); clear error otherwise."""
    return read_manifest(path, stage=stage)


def check_model_run(
    run: str | Path,
    *,
    tokenizer: Any = None,
    expect_base: str | None = None,
    expect_vocab_size: int | None = None,
    stage: str | None = None,
) -> dict[str, Any]:
    """Check a previous model run before loading it; returns its manifest."""
    run = Path(run)
    manifest = check_input(run, stage)
    recorded = manifest.get("model")
    if not recorded:
        raise InputMismatchError(
            f"{run}/manifest.json has no `model` section, so it is not a model run (stage "
            f"'{manifest.get('stage')}'); point the model spec's `name` at a run that saved a model"
        )
    if not (run / "final" / "config.json").is_file():
        raise InputMismatchError(f"{run} finished but has no final/config.json: its model was not exported")
    if tokenizer is not None and recorded.get("tokenizer") is not None:
        ours = tokenizer_fingerprint(tokenizer)
        if ours != recorded["tokenizer"]:
            raise InputMismatchError(
                f"tokenizer mismatch: {run} was trained with tokenizer {recorded['tokenizer']} "
                f"({recorded.get('tokenizer_size')} tokens) but this stage uses {ours} "
                f"({len(tokenizer)} tokens). Leave the model spec's `tokenizer` unset to use the run's "
                "own, or train the input run with this tokenizer."
            )
    if expect_vocab_size is not None and recorded.get("vocab_size") != expect_vocab_size:
        raise InputMismatchError(
            f"vocabulary mismatch: {run} has an embedding of {recorded.get('vocab_size')} rows, "
            f"this stage expects {expect_vocab_size}"
        )
    if expect_base is not None:
        base = recorded.get("base")
        if checkpoint_name(str(base)).lower() != checkpoint_name(expect_base).lower():
            raise InputMismatchError(
                f"base model mismatch: {run} descends from '{base}', but this config expects "
                f"'{expect_base}' (model spec `expect_base`). Point the spec's `name` at a run trained from "
                f"'{expect_base}', or change `expect_base`."
            )
    return manifest


def checkpoint_name(path_or_id: str) -> str:
    """A checkpoint's name independent of where it lies: ``/models/Qwen3-8B-Base`` and the hub id
    ``Qwen/Qwen3-8B-Base`` are the same base model."""
    if path_or_id == "minilm":
        return "all-MiniLM-L6-v2"
    return Path(str(path_or_id).rstrip("/")).name


def check_tokenizer_fits(tokenizer: Any, model: Any, where: Any = None) -> None:
    """Every id the tokenizer can emit must have an embedding row."""
    rows = model.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > rows:
        raise InputMismatchError(
            f"tokenizer/vocabulary mismatch for model {where!r}: the tokenizer has {len(tokenizer)} "
            f"tokens but the model embeds only {rows}; use the model's own tokenizer or resize"
        )
