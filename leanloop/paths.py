"""Where things live: the repository, the shared real-data folder, the artifacts root.

Environment variables override the defaults so a cluster job or a test can point elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def shared_data_dir() -> Path:
    """The folder of real recorded Lean output (``../shared/data`` beside the checkout)."""
    env = os.environ.get("LEANLOOP_SHARED_DATA")
    path = Path(env) if env else REPO_ROOT.parent / "shared" / "data"
    if not path.is_dir():
        raise FileNotFoundError(
            f"shared data folder not found at {path}; set LEANLOOP_SHARED_DATA to the folder "
            "holding lean_repl/, candidates/, statements/ (see README)"
        )
    return path


def artifacts_root() -> Path:
    """Root of ``artifacts/<stage>/<run>/`` (gitignored)."""
    env = os.environ.get("LEANLOOP_ARTIFACTS")
    return Path(env) if env else REPO_ROOT / "artifacts"


def repo_file(path: str | os.PathLike, what: str = "file") -> Path:
    """A file named as given or relative to the repository root (how stages read config files)."""
    path = Path(path)
    for candidate in (path, REPO_ROOT / path):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{what} {path} not found (relative paths start at the repository root {REPO_ROOT})")


def resolve_shared(path: str | os.PathLike) -> Path:
    """Resolve a config path: ``shared://x/y`` means ``<shared data>/x/y``; others are as given."""
    text = str(path)
    if text.startswith("shared://"):
        return shared_data_dir() / text[len("shared://") :]
    return Path(text)
