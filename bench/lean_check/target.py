"""lean-check's options, the Lean a run talks to (real Lean or the stand-ins, and every backend the
items use), and how an item reports a skip, a failure or a user mistake."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from leanloop.lean.check import LeanConfig
from leanloop.lean.local import LocalBackend, LocalBackendConfig, standin_config
from leanloop.lean.replay import ReplayBackend
from leanloop.lean.types import LeanBackend
from leanloop.paths import resolve_shared

ITEMS = ("discovery", "lean_tests", "reverify", "fixtures", "timing", "sessions", "judge", "tokens")
# recorded REPL sessions the stand-in REPL replays: HEAD (lean-interact reads proofStatus) for the
# proof-state sessions, v4.15.0 for the pickled-header session fresh_process restores
STANDIN_SESSION_VERSION = "v4.33.0-rc2"
STANDIN_PROGRAM_VERSION = "v4.15.0"


@dataclass
class LeanCheckConfig:
    """Options of ``make lean-check`` (configs/lean_check/default.yaml)."""

    RENAMED_KEYS: ClassVar[dict[str, str]] = {"workers": "lean.concurrency", "timeout": "lean.timeout"}

    lean_project: str | None = None  # a built Lake project with Mathlib; default $LEAN_PROJECT / $LEANLOOP_LEAN_PROJECT
    run: str | None = None  # artifacts/lean_check/<run>/; default: the UTC time
    only: list[str] = field(default_factory=list)  # a subset of ITEMS; empty: all
    sample_size: int = 300  # recorded candidates re-verified (stratified)
    seed: int = 0
    # recorded candidate files: `rl_lean` / `kimina_match` (aliases) or RL-Lean-format JSONL(.gz) paths
    candidates: list[str] = field(default_factory=lambda: ["rl_lean", "kimina_match"])
    statements: str = "shared://statements/minif2f_deepseek_prover_v1.5.jsonl"  # trusted statements for `rl`
    profiles: list[str] = field(default_factory=lambda: ["collection", "rl"])
    # lean.concurrency: checks in flight, the local backend's REPL workers and the pool-throughput
    # measurement's; lean.timeout: seconds per program. Which Lean runs is the check's own choice
    # (lean_project or lake, else the stand-ins) and `profiles` the profiles compared.
    lean: LeanConfig = field(default_factory=lambda: LeanConfig(timeout=300.0))
    timing_programs: int = 16  # programs per timing measurement
    session_theorems: int = 3  # recorded theorems run in the search and prm sessions
    pytest_args: list[str] = field(default_factory=lambda: ["-q", "-n", "0"])  # for the lean-marked tests
    comparator: str = "comparator"
    landrun: str = "landrun"
    lean4export: str = "lean4export"


@dataclass
class ItemResult:
    name: str
    status: str  # passed | failed | standin | skipped
    summary: str = ""
    seconds: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)


class Skipped(Exception):
    """The item cannot run here; the message says why."""


class Failed(Exception):
    """The item ran and found a problem; ``detail`` is kept in the report."""

    def __init__(self, summary: str, detail: dict[str, Any]):
        super().__init__(summary)
        self.detail = detail


# -- the Lean this run talks to ---------------------------------------------------------------------


class Target:
    """Real Lean (a project, or lake on PATH) or the stand-ins; builds every backend the items use."""

    def __init__(self, config: LeanCheckConfig, scratch: Path):
        self.config = config
        self.scratch = scratch
        self.project = config.lean_project or os.environ.get("LEAN_PROJECT") or os.environ.get("LEANLOOP_LEAN_PROJECT")
        self.lake = shutil.which("lake")
        self.real = bool(self.project or self.lake)
        if self.project and not Path(self.project).is_dir():
            raise UserError(f"LEAN_PROJECT={self.project} is not a folder (give a built Lake project with Mathlib)")
        self._repl_dirs: dict[str, Path] = {}

    @property
    def mode(self) -> str:
        return "real Lean" if self.real else "the stand-ins (replayed recordings; no Lean here)"

    def lean_version(self) -> str | None:
        """The Lean version the REPL reports (set up once; builds the REPL when it is not built)."""
        if "_lean_version" not in self.__dict__:
            self._lean_version = LocalBackend(self.local_config()).repl_config().lean_version
        return self._lean_version

    def local_config(self, **options: Any) -> LocalBackendConfig:
        """Real: the user's project (or lean-interact's Mathlib project); stand-in: the REPL replay."""
        if self.real:
            base: dict[str, Any] = {"project_dir": self.project} if self.project else {}
            return LocalBackendConfig(**base, timeout=self.config.lean.timeout, **options)
        version = options.pop("lean_version", STANDIN_PROGRAM_VERSION)
        return standin_config(
            self.standin_repl(version), lean_version=version, timeout=min(self.config.lean.timeout, 30.0), **options
        )

    def standin_repl(self, version: str) -> Path:
        from leanloop.lean.standins.repl import prepare_repl_dir

        if version not in self._repl_dirs:
            self._repl_dirs[version] = prepare_repl_dir(
                self.scratch / f"repl-{version}",
                [resolve_shared("shared://lean_repl/repl_io_pairs.jsonl")],
                lean_version=version,
            )
        return self._repl_dirs[version]

    def candidate_backend(self, sources: list[str], profile: str) -> LeanBackend:
        """What re-verifies recorded candidates: the local pool as the stages run it (``rl``: a fresh
        REPL per program, as the rl stage turns on; else shared REPLs, as the corpus build), or
        (stand-ins) the candidates' own recordings."""
        if self.real:
            return LocalBackend(self.local_config(workers=self.config.lean.concurrency, fresh_process=profile == "rl"))
        return ReplayBackend(sources)


class UserError(Exception):
    """A mistake in the command line: one line, exit 2."""
