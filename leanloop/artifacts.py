"""The artifact contract: ``artifacts/<stage>/<run>/`` with ``config.yaml`` and ``manifest.json``.

A manifest records what a run read (paths and content hashes of the input manifests or files),
the code (git rev, dirty flag), library versions, the seed, counts and final metrics. A stage names
its inputs explicitly and checks them with :func:`read_manifest`; nothing guesses "the latest run".
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import time
from dataclasses import dataclass, field
from importlib import metadata
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from leanloop.paths import REPO_ROOT, artifacts_root

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
TRACKED_LIBRARIES = (
    "torch", "transformers", "tokenizers", "accelerate", "peft", "trl", "datasets", "lightning",
    "bitsandbytes", "deepspeed", "wandb", "lean-interact", "sentence-transformers", "bm25s",
)


class ManifestError(RuntimeError):
    """An input artifact is missing, unfinished, or does not match what the stage expects."""


def content_hash(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """sha256 of a file, or of a folder's files (relative names and contents, sorted)."""
    path = Path(path)
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    if not files:
        raise ManifestError(f"cannot hash {path}: no such file or empty folder")
    for file in files:
        if path.is_dir():
            digest.update(str(file.relative_to(path)).encode())
        with open(file, "rb") as handle:
            while block := handle.read(chunk):
                digest.update(block)
    return "sha256:" + digest.hexdigest()


def git_state() -> dict[str, Any]:
    """The code a run used: revision and whether the tree had uncommitted changes."""
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain"], cwd=REPO_ROOT,
                                    capture_output=True, text=True, check=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        return {"rev": None, "dirty": None}
    return {"rev": rev, "dirty": dirty}


def library_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in TRACKED_LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def describe_input(path: str | os.PathLike) -> dict[str, str]:
    """An input entry: an artifact folder is identified by its manifest's hash, a file by its own."""
    path = Path(path)
    target = path / MANIFEST if (path / MANIFEST).is_file() else path
    return {"path": str(path), "hash": content_hash(target)}


def run_dir(stage: str, run: str, root: str | os.PathLike | None = None) -> Path:
    return Path(root) if root is not None else artifacts_root() / stage / run


def default_run_name(config_files: Iterable[Any]) -> str:
    """The run a stage writes when no ``--run`` is given: the config files' stems joined by '+'
    (``--config configs/sft/paper.yaml --config configs/strategy/zero2.yaml`` -> ``paper+zero2``),
    each stem once. One rule for the stage CLI and the cluster tools, so that a submitted or swept
    run lands in the folder the stage itself would pick. Accepts str / Path / jsonargparse paths.
    """
    stems = [Path(str(getattr(f, "relative", f))).stem for f in (config_files or [])]
    if not stems:
        raise ValueError("name the run: pass --config configs/<stage>/X.yaml or --run NAME")
    return "+".join(dict.fromkeys(stems))


@dataclass
class Manifest:
    """What a finished run writes beside its outputs."""

    stage: str
    run: str
    inputs: dict[str, dict[str, str]] = field(default_factory=dict)
    seed: int | None = None
    counts: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def add_input(self, role: str, path: str | os.PathLike) -> None:
        self.inputs[role] = describe_input(path)

    def write(self, folder: str | os.PathLike) -> Path:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        body = {
            "stage": self.stage,
            "run": self.run,
            "schema_version": SCHEMA_VERSION,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "inputs": self.inputs,
            "git": git_state(),
            "versions": library_versions(),
            "seed": self.seed,
            "counts": self.counts,
            "metrics": self.metrics,
            **self.extra,
        }
        target = folder / MANIFEST
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(body, indent=2, sort_keys=False, default=str) + "\n")
        os.replace(tmp, target)  # a manifest exists only for a finished run
        return target


def read_manifest(folder: str | os.PathLike, stage: str | None = None) -> dict[str, Any]:
    """Load an input artifact's manifest, failing clearly if it is absent or from another stage."""
    folder = Path(folder)
    path = folder / MANIFEST
    if not path.is_file():
        raise ManifestError(
            f"{folder} has no {MANIFEST}: the run that should produce it did not finish "
            "(run its make target first, or point the config at a finished run)"
        )
    manifest = json.loads(path.read_text())
    if stage is not None and manifest.get("stage") != stage:
        raise ManifestError(f"{folder} is a '{manifest.get('stage')}' artifact, expected '{stage}'")
    return manifest
