"""lean-check items ``discovery`` (toolchain, Lean and Mathlib versions, the REPL build, which
shipped recordings match that Lean) and ``lean_tests`` (the ``lean``-marked tests)."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.lean_check.target import Failed, Skipped, Target
from leanloop.lean.local import LocalBackend
from leanloop.lean.recordings import KIMINA_MATCH_LEAN_VERSION, resolve_source
from leanloop.paths import REPO_ROOT

LEAN_TEST_FILES = ("tests/leanloop/lean", "tests/search/test_extract.py")


# -- item 1: discovery --------------------------------------------------------------------------


def _version_key(version: str | None) -> str:
    """``v4.15.0`` / ``leanprover/lean4:v4.9.0-rc1`` -> ``4.15`` (the minor version recordings are matched on)."""
    text = str(version or "").rsplit(":", 1)[-1].lstrip("v")
    parts = text.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else text


def recording_versions() -> dict[str, list[str]]:
    """Shipped recording -> the Lean versions it was recorded with (read from the files)."""
    out: dict[str, list[str]] = {"rl_lean": [], "kimina_match": [KIMINA_MATCH_LEAN_VERSION]}
    with gzip.open(resolve_source("rl_lean"), "rt", encoding="utf-8") as handle:
        first = json.loads(handle.readline())
    out["rl_lean"] = [str(first.get("lean_version") or "v4.9.0-rc1")]
    for alias in ("repl_io", "repl_all_versions"):
        try:
            path = resolve_source(alias)
        except FileNotFoundError:
            continue
        versions: set[str] = set()
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                row = json.loads(line)
                if row.get("lean_toolchain"):
                    versions.add(str(row["lean_toolchain"]).rsplit(":", 1)[-1])
        out[alias] = sorted(versions)
    return out


def _run_text(args: list[str], cwd: str | None = None) -> str:
    try:
        done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"({type(error).__name__}: {error})"
    return (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr).strip() else ""


def check_discovery(target: Target) -> dict[str, Any]:
    detail: dict[str, Any] = {"mode": target.mode}
    if target.real:
        project = Path(target.project) if target.project else None
        detail["lake"] = target.lake or "(not on PATH)"
        if project is not None:
            toolchain = project / "lean-toolchain"
            detail["toolchain"] = toolchain.read_text().strip() if toolchain.is_file() else "(no lean-toolchain)"
            manifest = project / "lake-manifest.json"
            if manifest.is_file():
                packages = {p.get("name"): p.get("rev") for p in json.loads(manifest.read_text()).get("packages", [])}
                detail["mathlib"] = packages.get("mathlib", "(not a dependency)")
            detail["lean"] = _run_text([target.lake or "lake", "env", "lean", "--version"], cwd=str(project))
        else:
            detail["lean"] = _run_text([target.lake, "env", "lean", "--version"])
            detail["mathlib"] = "(lean-interact's temporary project: the Mathlib tag of the configured Lean)"
    repl_config = LocalBackend(target.local_config()).repl_config()  # builds the REPL when it is not built
    target._lean_version = repl_config.lean_version
    detail["repl_lean_version"] = repl_config.lean_version
    detail["repl"] = str(
        getattr(repl_config, "local_repl_path", None)
        or getattr(repl_config, "_cache_repl_dir", None)
        or "(lean-interact's build)"
    )
    detail["repl_rev"] = getattr(repl_config, "repl_rev", None)
    version = repl_config.lean_version
    matching = {
        name: versions
        for name, versions in recording_versions().items()
        if any(_version_key(v) == _version_key(version) for v in versions)
    }
    detail["recordings"] = recording_versions()
    detail["matching_recordings"] = sorted(matching)
    detail["summary"] = f"Lean {version}; recordings of that version: {', '.join(sorted(matching)) or 'none'}" + (
        "" if target.real else " (the stand-in REPL's version)"
    )
    return detail


# -- item 2: the lean-marked tests --------------------------------------------------------------


def check_lean_tests(target: Target) -> dict[str, Any]:
    env = dict(os.environ)
    if target.project:
        env["LEANLOOP_LEAN_PROJECT"] = target.project
    args = [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        "lean",
        "-rs",
        *target.config.pytest_args,
        *[str(REPO_ROOT / p) for p in LEAN_TEST_FILES if (REPO_ROOT / p).exists()],
    ]
    done = subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=3600)
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|deselected|error)", tail)}
    detail = {"command": " ".join(args[1:]), "exit_code": done.returncode, "result": tail, "counts": counts}
    if counts.get("failed") or counts.get("error") or done.returncode not in (0, 5):
        raise Failed(f"lean-marked tests: {tail}", {**detail, "output": done.stdout[-4000:]})
    if not target.real:
        raise Skipped(f"no Lean toolchain, so the lean-marked tests skip: {tail}")
    detail["summary"] = f"lean-marked tests: {tail}"
    return detail
