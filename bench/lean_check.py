"""``python -m bench.lean_check`` (``make lean-check``): every Lean-side assumption of the project,
checked once on this machine, in one report.

Everything Lean-side was built against replays of recorded Lean output. A user with Lean runs this
first (``LEAN_PROJECT=path/to/lake/project make lean-check``, or with ``lake`` on ``PATH``); it is a
thin driver over the Verifier, the backends, the search and prm sessions, the judge and the
red-team fixtures, and re-implements none of them. Items (``--only`` runs a subset):

- ``discovery``: toolchain, Lean and Mathlib versions, the REPL build, which shipped recordings
  match that Lean version;
- ``lean_tests``: the ``lean``-marked tests (``pytest -m lean``);
- ``reverify``: a sample of the shipped recorded candidates, stratified by recorded verdict and
  error kind, re-verified under ``collection`` and ``rl``; agreement per category and every
  disagreement with its first error. A recorded-valid program that ``rl`` rejects is a harness
  defect unless explained: by a precheck's reason code (``rl``'s are stricter by design), by version
  drift the message itself names (an unknown or deprecated identifier), or by a timeout;
- ``fixtures``: the red-team exploits and the honest proof the rl tests use, under ``rl``, and the
  layer that decides each (extraction, precheck, Lean);
- ``timing``: seconds per candidate with ``fresh_process`` vs a shared REPL, pool throughput
  against the seed's Lean pool, the header pickle + unpickle overhead; as ratios;
- ``sessions``: search's ``ReplEnv`` and prm's ``IncrementalChecker`` in proof-state mode;
- ``judge``: comparator on one valid and one invalid program when comparator, landrun and
  lean4export are installed ("not installed" otherwise);
- ``tokens``: the shipped token table (``leanloop/lean/acceptance/token_table.json``) against the
  live one the benchmark header's environment reports: a live token the shipped table lacks that
  holds a letter, digit or quote after its first character (one that changes where an identifier
  or literal starts, ``[MOD``) fails the item; the others are listed.

Without Lean it runs the same items against the stand-ins the tests use (the replay backend for
recorded candidates, the stand-in REPL for sessions, fresh processes and timings, the stand-in
comparator) and says that nothing was checked against real Lean. Writes
``artifacts/lean_check/<run>/report.md`` and ``report.json``, prints a one-screen summary, and
exits 1 on an unexplained disagreement or a failed item (2 on a user mistake).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, ClassVar

from leanloop.lean.local import LocalBackend, LocalBackendConfig, standin_config
from leanloop.lean.acceptance import AcceptancePolicy
from leanloop.lean.acceptance import reasons as R
from leanloop.lean.recordings import KIMINA_MATCH_LEAN_VERSION, resolve_source
from leanloop.lean.replay import ReplayBackend
from leanloop.lean.types import Category, LeanBackend, VerifyRequest
from leanloop.lean.backends import BackendConfig
from leanloop.lean.check import LeanConfig
from leanloop.paths import REPO_ROOT, artifacts_root, resolve_shared

ITEMS = ("discovery", "lean_tests", "reverify", "fixtures", "timing", "sessions", "judge", "tokens")
# The seed's Lean pool (LLF, ../shared/seeds/000_8a041fc0978068ca.txt, Sec. 5.3 "Comparison with
# Lean"): "Our reference is the Lean pool that collected the benchmark: 64 parallel workers with
# environment reuse and incremental caching" ... "It handled 78,074 verification requests in
# 26.0 h, or 0.835 per second".
SEED_POOL_WORKERS = 64
SEED_POOL_PROGRAMS_PER_S = 0.835
SEED_POOL_QUOTE = ("LLF Sec. 5.3: \"It handled 78,074 verification requests in 26.0 h, or 0.835 per second\" "
                   "(64 parallel workers with environment reuse)")
# what a Lean message says when a name or syntax moved between versions (the only accepted evidence
# of version drift: the message has to say so)
VERSION_DRIFT = re.compile(r"unknown (identifier|constant|namespace|tactic|attribute)|deprecated|"
                           r"has been (renamed|removed)|unexpected token|unknown option", re.I)
# recorded REPL sessions the stand-in REPL replays: HEAD (lean-interact reads proofStatus) for the
# proof-state sessions, v4.15.0 for the pickled-header session fresh_process restores
STANDIN_SESSION_VERSION = "v4.33.0-rc2"
STANDIN_PROGRAM_VERSION = "v4.15.0"
PICKLED_HEADER = "import Mathlib\nopen BigOperators\nopen Real\nopen Nat"
PICKLE_PATH = "test/H20231215.olean"
FIXTURE_THEOREM = "mathd_algebra_478"
LEAN_TEST_FILES = ("tests/leanloop/lean", "tests/search/test_extract.py")


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
        return standin_config(self.standin_repl(version), lean_version=version,
                              timeout=min(self.config.lean.timeout, 30.0),
                              **options)

    def standin_repl(self, version: str) -> Path:
        from leanloop.lean.standins.repl import prepare_repl_dir

        if version not in self._repl_dirs:
            self._repl_dirs[version] = prepare_repl_dir(self.scratch / f"repl-{version}",
                                                        [resolve_shared("shared://lean_repl/repl_io_pairs.jsonl")],
                                                        lean_version=version)
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
    detail["repl"] = str(getattr(repl_config, "local_repl_path", None) or getattr(repl_config, "_cache_repl_dir", None)
                         or "(lean-interact's build)")
    detail["repl_rev"] = getattr(repl_config, "repl_rev", None)
    version = repl_config.lean_version
    matching = {name: versions for name, versions in recording_versions().items()
                if any(_version_key(v) == _version_key(version) for v in versions)}
    detail["recordings"] = recording_versions()
    detail["matching_recordings"] = sorted(matching)
    detail["summary"] = (f"Lean {version}; recordings of that version: {', '.join(sorted(matching)) or 'none'}"
                         + ("" if target.real else " (the stand-in REPL's version)"))
    return detail


# -- item 2: the lean-marked tests --------------------------------------------------------------

def check_lean_tests(target: Target) -> dict[str, Any]:
    env = dict(os.environ)
    if target.project:
        env["LEANLOOP_LEAN_PROJECT"] = target.project
    args = [sys.executable, "-m", "pytest", "-m", "lean", "-rs", *target.config.pytest_args,
            *[str(REPO_ROOT / p) for p in LEAN_TEST_FILES if (REPO_ROOT / p).exists()]]
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


# -- item 3: re-verifying recorded candidates ---------------------------------------------------

@dataclass
class Sampled:
    source: str
    record: str
    name: str | None
    program: str
    recorded: str  # valid | invalid | timeout
    kind: str  # the recorded first error's kind (first words), "-" for a valid program
    first_error: str | None


def error_kind(text: str | None) -> str:
    """A recorded error's kind: its first line up to the first colon, at most four words
    (``linarith failed to find``, ``unsolved goals``, ``omega could not prove``)."""
    if not text:
        return "-"
    head = text.strip().split("\n")[0].split(":")[0]
    words = [w.strip("'`\u2018\u2019\"") for w in head.split()[:4]]
    return " ".join(w for w in words if w) or "-"


def read_candidates(source: str) -> list[Sampled]:
    """RL-Lean rows (verdict_pass + compilation_result) or Kimina pairs (no error message = valid)."""
    path = resolve_source(source)
    opener = gzip.open if path.suffix == ".gz" else open
    out: list[Sampled] = []
    with opener(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if "compilation_result" in row:
                result = row.get("compilation_result") or {}
                errors = [e.get("data", "") for e in result.get("errors") or []]
                timed_out = bool(result.get("system_errors"))
                recorded = "timeout" if timed_out else ("valid" if row.get("verdict_pass") else "invalid")
                first = errors[0] if errors else (str(result.get("system_errors"))[:200] if timed_out else None)
                out.append(Sampled(source, f"{row.get('custom_id')} (line {number})", row.get("name"), row["code"],
                                   recorded, "timeout" if timed_out else error_kind(first) if recorded != "valid" else "-",
                                   first))
            elif "server_response" in row:
                for result in row["server_response"].get("results") or []:
                    messages = (result.get("response") or {}).get("messages") or []
                    errors = [m.get("data", "") for m in messages if m.get("severity") == "error"]
                    timed_out = "timed out" in str(result.get("error") or "")
                    recorded = "timeout" if timed_out else ("invalid" if errors or result.get("error") else "valid")
                    first = errors[0] if errors else result.get("error")
                    out.append(Sampled(source, f"{row.get('id')} (line {number})", None, row["code"], recorded,
                                       "timeout" if timed_out else error_kind(first) if recorded != "valid" else "-",
                                       first))
            else:
                raise UserError(f"{path}: not a recorded-candidate file (RL-Lean rows or Kimina pairs)")
    return out


def stratified_sample(rows: list[Sampled], size: int, seed: int) -> list[Sampled]:
    """``size`` rows: shared equally by the (source, recorded verdict) groups (a group smaller than
    its share is taken whole, its rest goes to the others), and within a group drawn round-robin
    over the recorded first-error kinds, so every verdict and the rare error kinds are represented."""
    rng = random.Random(seed)
    groups: dict[tuple[str, str], dict[str, list[Sampled]]] = {}
    for row in rows:
        groups.setdefault((row.source, row.recorded), {}).setdefault(row.kind, []).append(row)
    sizes = {key: sum(map(len, kinds.values())) for key, kinds in groups.items()}
    quota: dict[tuple[str, str], int] = {key: 0 for key in groups}
    left = min(size, len(rows))
    while left > 0:
        open_groups = [key for key in sorted(groups) if quota[key] < sizes[key]]
        share = max(1, left // len(open_groups))
        for key in open_groups:
            take = min(share, sizes[key] - quota[key], left)
            quota[key] += take
            left -= take
    out: list[Sampled] = []
    for key in sorted(groups):
        queues = []
        for kind in sorted(groups[key]):
            members = list(groups[key][kind])
            rng.shuffle(members)
            queues.append(members)
        taken = 0
        while taken < quota[key]:
            for queue in queues:
                if queue and taken < quota[key]:
                    out.append(queue.pop())
                    taken += 1
    return out


def _recorded_category(category: Category) -> str:
    if category is Category.VALID:
        return "valid"
    if category in (Category.INVALID, Category.PRECHECK_REJECTED):
        return "invalid"
    if category is Category.TIMEOUT:
        return "timeout"
    return "no_answer"


def explain(profile: str, row: Sampled, outcome: Any) -> str | None:
    """Why a disagreement is not a harness defect, or None."""
    if outcome.category is Category.PRECHECK_REJECTED:  # rl's prechecks are stricter than the recording's, by design
        return f"{profile} precheck (a text rule decides before Lean): " + ", ".join(
            sorted({R.code_of(r) for r in outcome.reasons}))
    if outcome.first_error and VERSION_DRIFT.search(outcome.first_error):
        return "version drift (the message says so)"
    if "timeout" in (row.recorded, _recorded_category(outcome.category)):
        return "time budget (one side timed out)"
    return None


def check_reverify(target: Target) -> dict[str, Any]:
    from leanloop.prover.statements import read_statements

    config = target.config
    rows = [row for source in config.candidates for row in read_candidates(source)]
    sample = stratified_sample(rows, config.sample_size, config.seed)
    trusted = {s.theorem: s for s in read_statements(config.statements).statements}
    per_profile: dict[str, Any] = {}
    disagreements: list[dict[str, Any]] = []
    recorded_versions = recording_versions()
    versions = {source: ", ".join(recorded_versions.get(source, ["(not stated)"])) for source in config.candidates}
    for profile in config.profiles:
        requests, kept = [], []
        for row in sample:
            statement = trusted.get(row.name or "")
            if profile != "collection" and (statement is None or not row.program.startswith(statement.header)):
                continue  # no trusted statement for it (Kimina's Lean Workbook proofs): collection only
            requests.append(VerifyRequest(program=row.program, name=row.name,
                                          statement=statement.statement if statement else None,
                                          header=statement.header if statement else None, id=row.record))
            kept.append(row)
        backend = target.candidate_backend(config.candidates, profile)
        verifier = config.lean.verifier(backend, config.lean.policy(profile))
        try:
            outcomes = verifier.check_sync(requests)
        finally:
            asyncio.run(backend.aclose())
        table: dict[str, dict[str, int]] = {}
        for row, outcome in zip(kept, outcomes):
            got = _recorded_category(outcome.category)
            cell = table.setdefault(f"{row.recorded} / {row.kind}", {"n": 0, "agree": 0, "no_answer": 0, "disagree": 0})
            cell["n"] += 1
            if got == "no_answer":
                cell["no_answer"] += 1
            elif got == row.recorded:
                cell["agree"] += 1
            else:
                cell["disagree"] += 1
                disagreements.append({
                    "profile": profile, "source": row.source, "record": row.record, "name": row.name,
                    "recorded_lean": versions.get(row.source),
                    "recorded": row.recorded, "recorded_first_error": (row.first_error or "")[:300],
                    "category": outcome.category.value, "reasons": outcome.reasons[:3],
                    "first_error": (outcome.first_error or "")[:300], "explanation": explain(profile, row, outcome)})
        answered = sum(c["agree"] + c["disagree"] for c in table.values())
        per_profile[profile] = {"checked": len(kept), "answered": answered,
                                "agree": sum(c["agree"] for c in table.values()),
                                "no_answer": sum(c["no_answer"] for c in table.values()), "by_category": table}
    unexplained = [d for d in disagreements if d["explanation"] is None]
    by_precheck = sum(1 for d in disagreements if d["category"] == Category.PRECHECK_REJECTED.value)
    parts = [f"{p}: {v['agree']}/{v['answered']} agree ({v['no_answer']} no answer)" for p, v in per_profile.items()]
    running = target.lean_version()
    detail = {"sampled": len(sample), "lean": running,
              "sources": {source: {"recorded_with": version,
                                   "matches_this_lean": any(_version_key(v) == _version_key(running)
                                                            for v in recorded_versions.get(source, []))}
                          for source, version in versions.items()},
              "profiles": per_profile, "disagreements": disagreements,
              "unexplained": len(unexplained),
              "summary": f"{len(sample)} recorded candidates; " + "; ".join(parts)
                         + f"; {len(disagreements)} disagreements ({by_precheck} by a precheck), "
                           f"{len(unexplained)} unexplained"}
    if unexplained:
        raise Failed(detail["summary"], detail)
    return detail


# -- item 4: the red-team fixtures under rl -----------------------------------------------------

def check_fixtures(target: Target) -> dict[str, Any]:
    from leanloop.prover.statements import read_statements
    from rl.reward_harness import RewardHarness, Stage

    from rl import exploits as redteam

    statements = {s.theorem: s for s in read_statements(target.config.statements).statements}
    statement = statements[FIXTURE_THEOREM]
    recorded = read_candidates("rl_lean")
    row = next(r for r in recorded if r.name == FIXTURE_THEOREM and r.recorded == "valid"
               and r.program.startswith(statement.prompt))
    proof = row.program[len(statement.prompt):]
    cases: list[tuple[str, str, str, str | None, Any]] = [  # (name, kind, completion, reason expected, statement)
        (name, "exploit", completion, code, statement)
        for name, (completion, code) in redteam.exploits(statement, proof).items()]
    cases += [(name, "exploit", completion, None, statement) for name, completion in redteam.NO_CODE.items()]
    # exploits only Lean can stop, as the rl and lean tests build them: a weaker statement of the
    # target's name (test_rl_redteam), the proof against a changed trusted statement, the target in a
    # namespace beside a section variable of its name (test_lean_verifier)
    changed = replace(statement, statement=statement.statement.replace("v = 65", "v = 66"))
    cases += [
        ("weaker statement in a code block", "exploit",
         f"```lean4\ntheorem {FIXTURE_THEOREM} (v : ℝ) : True := by\n  trivial\n```", None, statement),
        ("proof of another statement (v = 66)", "exploit", proof, None, changed),
        ("target in a namespace, a section variable of its name", "exploit",
         redteam.block(statement, proof, before="namespace Decoy\n\n")
         .replace("\n```\n", f"\nsection Inner\nvariable ({FIXTURE_THEOREM} : ∀ b h v : ℝ, False)\nend Inner\n"
                  "end Decoy\n```\n"), None, statement)]
    # benign: the honest proof as the tests write it (continuation, CRLF, chat code block), and the
    # recorded accepted proofs of a few other statements
    cases += [("honest proof (recorded valid)", "benign", proof, None, statement),
              ("honest proof, CRLF line ends", "benign", proof.replace("\n", "\r\n"), None, statement),
              ("honest proof in a lean code block", "benign", redteam.block(statement, proof), None, statement)]
    others: dict[str, Sampled] = {}
    for other in recorded:
        trusted = statements.get(other.name or "")
        if (other.recorded == "valid" and trusted is not None and other.name != FIXTURE_THEOREM
                and other.name not in others and other.program.startswith(trusted.prompt)):
            others[other.name] = other  # type: ignore[index]
        if len(others) == 3:
            break
    cases += [(f"recorded accepted proof of {name}", "benign", other.program[len(statements[name].prompt):], None,
               statements[name]) for name, other in others.items()]
    harness = RewardHarness("rl")
    candidates = [harness.build(problem, completion) for _, _, completion, _, problem in cases]
    ready = [c for c in candidates if c.stage is Stage.READY]
    backend = target.candidate_backend(["rl_lean"], "rl")
    verifier = target.config.lean.verifier(backend, target.config.lean.policy("rl"))
    try:
        outcomes = iter(verifier.check_sync([c.request for c in ready]))
    finally:
        asyncio.run(backend.aclose())
    results, wrong = [], []
    for (name, kind, _, expected, _), candidate in zip(cases, candidates):
        if candidate.stage is Stage.NO_CODE:
            layer, verdict, why = "extraction", "rejected", candidate.reason
        elif candidate.stage is Stage.PRECHECK:
            codes = sorted({R.code_of(r) for r in candidate.precheck_reasons})
            layer, verdict, why = "precheck", "rejected", ", ".join(codes)
        else:
            outcome = next(outcomes)
            layer = "lean"
            verdict = {True: "accepted", False: "rejected", None: "no answer"}[outcome.label]
            why = outcome.category.value + (f": {R.code_of(outcome.reasons[0])}" if outcome.reasons else "")
        ok = (verdict == "rejected") if kind == "exploit" else (verdict == "accepted")
        if kind == "exploit" and expected is not None and layer == "precheck" and expected not in why:
            ok = False  # stopped, but not by the layer the tests expect
        status = "ok" if ok else ("not checked" if verdict == "no answer" else "WRONG")
        results.append({"name": name, "kind": kind, "layer": layer, "verdict": verdict, "why": why, "status": status})
        if status == "WRONG" or (target.real and status == "not checked"):
            wrong.append(name)
    exploits = [r for r in results if r["kind"] == "exploit"]
    benign = [r for r in results if r["kind"] == "benign"]
    summary = (f"{sum(r['verdict'] == 'rejected' for r in exploits)}/{len(exploits)} exploits rejected, "
               f"{sum(r['verdict'] == 'no answer' for r in exploits)} without an answer "
               f"(precheck {sum(r['layer'] == 'precheck' for r in exploits)}, extraction "
               f"{sum(r['layer'] == 'extraction' for r in exploits)}, lean {sum(r['layer'] == 'lean' for r in exploits)}); "
               f"{sum(r['verdict'] == 'accepted' for r in benign)}/{len(benign)} benign programs accepted "
               f"({sum(r['verdict'] == 'no answer' for r in benign)} without an answer)")
    detail = {"fixtures": results, "summary": summary}
    if wrong:
        raise Failed(summary + f"; wrong: {', '.join(wrong)}", detail)
    return detail


# -- item 5: timing -----------------------------------------------------------------------------

def _timing_programs(target: Target) -> list[str]:
    """Real: recorded-valid RL-Lean programs (import Mathlib); stand-ins: the recorded standalone
    programs and the pickled-header program the stand-in REPL answers."""
    count = target.config.timing_programs
    if target.real:
        rows = [r for r in read_candidates("rl_lean") if r.recorded == "valid"]
        random.Random(target.config.seed).shuffle(rows)
        return [r.program for r in rows[:count]]
    programs: list[str] = []
    for line in resolve_source("repl_io").open(encoding="utf-8"):
        row = json.loads(line)
        if not str(row.get("lean_toolchain", "")).endswith(STANDIN_PROGRAM_VERSION):
            continue
        for request, reply in zip(row["inputs"], row["outputs"]):
            if set(request) == {"cmd"} and "env" in reply and not request["cmd"].startswith("import"):
                if request["cmd"] not in programs:
                    programs.append(request["cmd"])
    return programs[:count]


async def _timed(backend: LocalBackend, programs: list[str], warmup: list[str], timeout: float) -> tuple[float, list[Any]]:
    """Wall seconds for ``programs`` after ``warmup`` ran untimed on the same backend (the header
    elaborated or pickled once, as in a long run)."""
    try:
        await backend.run_many(warmup, timeout=timeout, concurrency=backend.config.workers)
        started = time.perf_counter()
        responses = await backend.run_many(programs, timeout=timeout, concurrency=backend.config.workers)
        return time.perf_counter() - started, responses
    finally:
        await backend.aclose()


def check_timing(target: Target) -> dict[str, Any]:
    programs = _timing_programs(target)
    if not programs:
        raise Skipped("no programs to time")
    timeout = target.config.lean.timeout
    pool = target.config.lean.concurrency
    one = dict(workers=1, all_tactics=False)
    shared_s, shared = asyncio.run(_timed(LocalBackend(target.local_config(fresh_process=False, **one)),
                                          programs, programs[:1], timeout))
    fresh_s, fresh = asyncio.run(_timed(LocalBackend(target.local_config(fresh_process=True, **one)),
                                        programs, programs[:1], timeout))
    # the same fresh processes unconfined (no sandbox, no resource limits): the sandbox's own cost
    from leanloop.lean.sandbox import SandboxConfig

    bare = SandboxConfig(kind="off", memory_limit_mb=None, cpu_limit_s=None)
    bare_s, _ = asyncio.run(_timed(LocalBackend(target.local_config(fresh_process=True, sandbox=bare, **one)),
                                   programs, programs[:1], timeout))
    # the pool as the seed's (environment reuse: shared REPLs), 4 programs per worker after a warm-up round
    batch = [programs[i % len(programs)] for i in range(4 * pool)]
    pool_s, pooled = asyncio.run(_timed(LocalBackend(target.local_config(fresh_process=False, workers=pool,
                                                                          all_tactics=False)),
                                        batch, batch[:pool], timeout))
    # the header pickle: one program with a pickled header in fresh processes, first (builds) then unpickles
    if target.real:
        header_program = programs[0]
        pickles: dict[str, str] = {}
    else:
        header_program = PICKLED_HEADER + "\n" + _pickled_body()
        pickles = {PICKLED_HEADER: PICKLE_PATH}
    backend = LocalBackend(target.local_config(fresh_process=True, header_pickles=pickles, **one))

    async def twice() -> tuple[float, float, list[Any]]:
        try:
            t0 = time.perf_counter()
            first = await backend.run(header_program, timeout)
            t1 = time.perf_counter()
            second = await backend.run(header_program, timeout)
            t2 = time.perf_counter()
        finally:
            await backend.aclose()
        return t1 - t0, t2 - t1, [first, second]

    build_s, unpickle_s, header_responses = asyncio.run(twice())
    header_statuses = [response.status.value for response in header_responses]
    n = len(programs)
    per_shared, per_fresh = shared_s / n, fresh_s / n
    throughput = len(batch) / pool_s
    seed_per_worker = SEED_POOL_PROGRAMS_PER_S / SEED_POOL_WORKERS
    statuses = {mode: _status_counts(responses) for mode, responses in
                (("shared", shared), ("fresh_process", fresh), ("pool", pooled))}
    detail = {
        "programs": n, "where": "real Lean" if target.real else "stand-in REPL (process plumbing, not Lean's cost)",
        "seconds_per_program": {"shared_repl": per_shared, "fresh_process": per_fresh,
                                "fresh_minus_shared (REPL start + header unpickle)": per_fresh - per_shared},
        "isolation_cost_ratio": per_fresh / per_shared if per_shared else None,
        "pool": {"workers": pool, "programs": len(batch), "programs_per_s": throughput,
                 "seed_programs_per_s": SEED_POOL_PROGRAMS_PER_S, "seed_workers": SEED_POOL_WORKERS,
                 "ratio_to_seed": throughput / SEED_POOL_PROGRAMS_PER_S,
                 "per_worker_ratio_to_seed": (throughput / pool) / seed_per_worker, "seed_quote": SEED_POOL_QUOTE},
        "header": {"first_run_s (pickle built)": build_s, "second_run_s (unpickled)": unpickle_s,
                   "build_over_unpickled_ratio": build_s / unpickle_s if unpickle_s else None,
                   "statuses": header_statuses},
        # every fresh_process reply came after the REPL answered the nonce probe (else candidate_failure)
        "channel_probe_answered": statuses_ok(fresh) + statuses_ok(header_responses),
        "sandbox": {"seconds_per_program_confined": per_fresh, "seconds_per_program_unconfined": bare_s / n,
                    "sandbox_cost_ratio": per_fresh / (bare_s / n) if bare_s else None,
                    "kind": LocalBackendConfig().sandbox.kind},
        "statuses": statuses,
    }
    detail["summary"] = (f"fresh_process/shared = {detail['isolation_cost_ratio']:.2f}x "
                         f"({per_fresh:.3f}s vs {per_shared:.3f}s per program); sandbox: "
                         f"{per_fresh / (bare_s / n) if bare_s else float('nan'):.2f}x unconfined; pool x{pool}: {throughput:.2f} programs/s "
                         f"= {detail['pool']['ratio_to_seed']:.2f}x the seed's 0.835/s at 64 workers, LLF Sec. 5.3 "
                         f"({detail['pool']['per_worker_ratio_to_seed']:.2f}x per worker); header: pickle-building run "
                         f"{build_s:.2f}s, unpickled run {unpickle_s:.2f}s" + ("" if target.real else " [stand-in timings]"))
    failures = [f"{mode}: {counts}" for mode, counts in statuses.items() if set(counts) - {"ok"}]
    if any(status != "ok" for status in header_statuses):
        failures.append(f"header runs: {header_statuses}")
    if failures:  # a time is only worth reporting for programs Lean answered
        raise Failed(detail["summary"] + "; not answered: " + "; ".join(failures), detail)
    return detail


def statuses_ok(responses: list[Any]) -> int:
    return sum(response.status.value == "ok" for response in responses)


def _status_counts(responses: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for response in responses:
        out[response.status.value] = out.get(response.status.value, 0) + 1
    return out


def _pickled_body() -> str:
    """The theorem the recorded v4.15.0 session runs after ``unpickleEnvFrom`` (Mathlib/test/H20231215_2)."""
    for line in resolve_source("repl_io").open(encoding="utf-8"):
        row = json.loads(line)
        if row["inputs"] and row["inputs"][0] == {"unpickleEnvFrom": PICKLE_PATH} \
                and str(row.get("lean_toolchain", "")).endswith(STANDIN_PROGRAM_VERSION):
            return row["inputs"][1]["cmd"]
    raise Skipped("no recorded session restoring the pickled header")


# -- item 6: search and prm proof-state sessions ------------------------------------------------

def _session_cases(target: Target) -> list[tuple[str, str, list[str]]]:
    """(header, statement ending in ``:= by``, tactics) per theorem. Real: recorded-valid RL-Lean
    proofs of miniF2F statements, one tactic per top-level proof line; stand-ins: the recorded HEAD
    REPL sessions (``assumption_proof``, ``readme``)."""
    if not target.real:
        return [("", "theorem aa (x : Nat) (h1 : x  = 2) : x = 2 := by", ["assumption"]),
                ("", "def f (x : Unit) : Nat := by", ["apply Int.natAbs", "exact -37"])]
    from leanloop.prover.statements import read_statements

    trusted = {s.theorem: s for s in read_statements(target.config.statements).statements}
    found: dict[str, tuple[str, str, list[str]]] = {}
    for row in read_candidates("rl_lean"):
        statement = trusted.get(row.name or "")
        if row.recorded != "valid" or statement is None or not row.program.startswith(statement.prompt):
            continue
        lines = [line for line in row.program[len(statement.prompt):].split("\n") if line.strip()]
        # one tactic per line, all at the proof's indentation: the same steps in a linear session
        if not lines or any(not line.startswith("  ") or line.startswith("   ") or line.strip().startswith(("--", "·"))
                            for line in lines):
            continue
        tactics = [line.strip() for line in lines]
        if row.name not in found or len(tactics) < len(found[row.name][2]):
            found[row.name] = (statement.header, statement.context + statement.statement, tactics)  # type: ignore[index]
    # a few steps each (a session, not one call), shortest first
    return sorted(found.values(), key=lambda case: (not 2 <= len(case[2]) <= 4, len(case[2]), case[1]))[
        :target.config.session_theorems]


def _session_config(target: Target) -> LocalBackendConfig:
    return target.local_config(**({} if target.real else {"lean_version": STANDIN_SESSION_VERSION}))


def search_env(target: Target) -> Any:
    """search's proof-state environment on this run's Lean."""
    from search.repl_env import ReplEnv

    # the recorded HEAD sessions were sent without lean-interact's Elab.async option
    return ReplEnv(replace(_session_config(target), timeout=target.config.lean.timeout,
                           parallel_elaboration=None if target.real else False))


def prm_checker(target: Target) -> Any:
    """prm's tactic-by-tactic checker on this run's Lean."""
    from prm.labelling import IncrementalChecker

    from leanloop.lean.session import LeanSession

    config = replace(_session_config(target), parallel_elaboration=None if target.real else False)
    return IncrementalChecker(LeanSession(config), timeout=target.config.lean.timeout)


def check_sessions(target: Target) -> dict[str, Any]:
    from prm.labelling import OK

    cases = _session_cases(target)
    results: list[dict[str, Any]] = []
    env, checker = search_env(target), prm_checker(target)
    try:
        for header, statement, tactics in cases:
            theorem = (header + statement).rstrip()
            start = env.start(theorem)
            closed, error = False, start.error
            if start.ok:
                goals = list(start.goals)
                for tactic in tactics:
                    if not goals:
                        break
                    step = env.apply(goals[0], tactic)
                    if not step.ok:
                        error = f"{step.status.value}: {step.error}"
                        break
                    goals = list(step.goals) + goals[1:]
                else:
                    closed = not goals
            search_status = "closed" if closed else (start.status.value if not start.ok else f"open ({error})")
            prm = checker.check(header, statement, tactics)
            prm_status = ("all steps pass" if prm.status == OK and prm.first_failure is None
                          else f"{prm.status}: first failure {prm.first_failure} {str(prm.output)[:160]}")
            results.append({"theorem": statement.split("\n")[-1][:80] or statement[:80], "tactics": len(tactics),
                            "search": search_status, "prm": prm_status,
                            "ok": closed and prm.status == OK and prm.first_failure is None})
    finally:
        env.close()
        checker.close()
    passed = sum(r["ok"] for r in results)
    detail = {"theorems": results, "summary": f"{passed}/{len(results)} recorded proofs closed in both the search "
                                              "ReplEnv and prm's IncrementalChecker"}
    if passed < len(results):
        raise Failed(detail["summary"], detail)
    return detail


# -- item 7: the judge --------------------------------------------------------------------------

def check_judge(target: Target) -> dict[str, Any]:
    from leanloop.lean.judge import ComparatorJudge, ComparatorProject, JudgeConfig, module_file

    config = target.config
    tools = {name: shutil.which(getattr(config, name)) for name in ("comparator", "landrun", "lean4export")}
    missing = sorted(name for name, path in tools.items() if path is None)
    projects = resolve_shared("shared://comparator/projects")
    cases = [("simple_match", "valid"), ("simple_mismatch", "invalid")]
    if target.real and missing:
        raise Skipped(f"not installed: {', '.join(missing)} (leanloop/lean/README.md 'Installing comparator')")
    if target.real:
        judge = ComparatorJudge(JudgeConfig(comparator=tools["comparator"], landrun=tools["landrun"],
                                            lean4export=tools["lean4export"], timeout=config.lean.timeout))
        where = "real comparator"
    else:
        from leanloop.lean.standins.comparator import prepare_comparator_dir

        stand_in = prepare_comparator_dir(target.scratch / "comparator", resolve_shared("shared://comparator"))
        judge = ComparatorJudge(JudgeConfig(comparator=str(stand_in / "comparator"), lake_path=str(stand_in / "lake")))
        where = "stand-in comparator (" + ("not installed: " + ", ".join(missing) if missing else "tools found") + ")"
    results = []
    for name, expected in cases:
        folder = projects / name
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        lakefile = folder / "lakefile.toml"
        project = ComparatorProject((folder / module_file(cfg["challenge_module"])).read_text(encoding="utf-8"),
                                    (folder / module_file(cfg["solution_module"])).read_text(encoding="utf-8"),
                                    cfg, lakefile.read_text(encoding="utf-8") if lakefile.exists() else None)
        outcome = asyncio.run(judge.run_project(project, name))
        results.append({"project": name, "expected": expected, "category": outcome.category.value,
                        "reasons": outcome.reasons[:2], "ok": outcome.category.value == expected})
    detail = {"where": where, "tools": tools, "projects": results,
              "summary": f"{where}: " + ", ".join(f"{r['project']} -> {r['category']}" for r in results)}
    if not all(r["ok"] for r in results):
        raise Failed(detail["summary"], detail)
    return detail


def _changes_lexing(token: str) -> bool:
    """Does ``token`` hold, after its first character, one that would otherwise start or continue
    an identifier, a number or a literal (so a table without it reads the text differently)?"""
    return any(c.isalnum() or c in "_'\"«" for c in token[1:])


def check_tokens(target: Target) -> dict[str, Any]:
    from leanloop.lean.acceptance import BENCHMARK_HEADER
    from leanloop.lean.acceptance.tokens import shipped

    table = shipped()
    live = LocalBackend(target.local_config(workers=1)).token_table(BENCHMARK_HEADER)
    if live is None:
        if target.real:
            raise Failed("the header environment reported no token table", {"shipped": table.manifest()})
        return {"shipped": table.manifest(), "summary": f"shipped table: {len(table.tokens)} tokens "
                f"(sha256 {table.sha256[:12]}); no live table here (the stand-in has no recording of it)"}
    missing = sorted(live.tokens - table.tokens)
    matters = [t for t in missing if _changes_lexing(t)]
    detail = {"shipped": table.manifest(), "live": live.manifest(), "missing": missing, "missing_that_matter": matters,
              "extra": sorted(table.tokens - live.tokens),
              "summary": f"live {len(live.tokens)} tokens, shipped {len(table.tokens)}: {len(missing)} missing, "
                         f"{len(matters)} of them change lexing" + (f" (e.g. {matters[:5]})" if matters else "")}
    if matters:
        raise Failed(detail["summary"], detail)
    return detail


# -- driver -------------------------------------------------------------------------------------

CHECKS: dict[str, Callable[[Target], dict[str, Any]]] = {
    "discovery": check_discovery, "lean_tests": check_lean_tests, "reverify": check_reverify,
    "fixtures": check_fixtures, "timing": check_timing, "sessions": check_sessions, "judge": check_judge,
    "tokens": check_tokens,
}


def run_item(name: str, target: Target) -> ItemResult:
    started = time.perf_counter()
    try:
        detail = CHECKS[name](target)
        status = "passed" if target.real else "standin"
        summary = detail.pop("summary", "")
    except Skipped as why:
        status, summary, detail = "skipped", str(why), {}
    except Failed as failure:
        status, summary, detail = "failed", str(failure), failure.detail
        detail.pop("summary", None)
    except UserError:
        raise
    except Exception as error:  # a crashed item is a failed item, with its traceback in the report
        status, summary = "failed", f"{type(error).__name__}: {error}"
        detail = {"traceback": traceback.format_exc()[-4000:]}
    return ItemResult(name, status, summary, time.perf_counter() - started, detail)


def render_markdown(report: dict[str, Any]) -> str:
    lines = [f"# make lean-check: {report['verdict']}", "", f"- against: **{report['mode']}**",
             f"- run: `{report['run']}`, {report['seconds']:.0f}s", ""]
    lines += ["| item | status | summary |", "|---|---|---|"]
    lines += [f"| {r['name']} | {r['status']} | {r['summary'].replace('|', '/')} |" for r in report["items"]]
    lines += ["", "`passed`: checked against real Lean; `standin`: ran against the stand-ins, which says nothing "
              "about Lean; `skipped`: could not run here (why); `failed`: the command exits 1. How to read the rest: "
              "leanloop/lean/README.md, section make lean-check."]
    for item in report["items"]:
        detail = item["detail"]
        if item["name"] == "reverify" and detail.get("profiles"):
            lines += ["", "## Re-verified recorded candidates", "", f"Lean here: {detail.get('lean')}; "
                      + "; ".join(f"`{k}` recorded with {v['recorded_with']}"
                                  + ("" if v["matches_this_lean"] else " (another version: expect drift)")
                                  for k, v in detail.get("sources", {}).items()), ""]
            for profile, values in detail["profiles"].items():
                lines += [f"### `{profile}`: {values['agree']}/{values['answered']} agree, {values['no_answer']} "
                          "without an answer", "", "| recorded / first error kind | n | agree | no answer | disagree |",
                          "|---|---|---|---|---|"]
                lines += [f"| {k} | {c['n']} | {c['agree']} | {c['no_answer']} | {c['disagree']} |"
                          for k, c in sorted(values["by_category"].items())]
                lines.append("")
            lines += ["### Disagreements", ""]
            lines += [f"- `{d['profile']}` {d['source']} {d['record']} ({d['name']}): recorded {d['recorded']}, "
                      f"now {d['category']} {d['reasons'][:1]}; first error: {d['first_error'][:160]!r}; "
                      f"**{d['explanation'] or 'UNEXPLAINED'}**" for d in detail["disagreements"]] or ["none"]
        if item["name"] == "fixtures" and detail.get("fixtures"):
            lines += ["", "## Red-team fixtures under `rl`", "", "| fixture | kind | stopped at | verdict | why | status |",
                      "|---|---|---|---|---|---|"]
            lines += [f"| {f['name'].replace('|', '/')} | {f['kind']} | {f['layer']} | {f['verdict']} | "
                      f"{str(f['why']).replace('|', '/')} | {f['status']} |" for f in detail["fixtures"]]
        if item["name"] in ("timing", "sessions", "judge", "discovery", "lean_tests") and detail:
            lines += ["", f"## {item['name']}", "", "```json", json.dumps(detail, indent=1, default=str)[:6000], "```"]
    return "\n".join(lines) + "\n"


def summary_screen(report: dict[str, Any]) -> str:
    out = [f"make lean-check: {report['verdict']} (against {report['mode']})"]
    for item in report["items"]:
        out.append(f"  {item['name']:<11} {item['status']:<8} {item['summary'][:240]}")
    out.append(f"report: {report['report_md']}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    from leanloop.tool import parse_config

    config, _ = parse_config(LeanCheckConfig, argv, prog="python -m bench.lean_check",
                             description="check every Lean-side assumption on this machine")
    try:
        unknown = sorted(set(config.only) - set(ITEMS))
        if unknown:
            raise UserError(f"unknown item(s) {unknown} in --only; choose from {', '.join(ITEMS)}")
        if config.sample_size < 1 or config.timing_programs < 1:
            raise UserError("sample_size and timing_programs must be >= 1")
        if config.lean.backend != BackendConfig() or config.lean.profile != LeanConfig().profile:
            raise UserError("lean.backend and lean.profile are not options here: the check runs real Lean "
                            "(lean_project, or lake on PATH) or else the stand-ins, under each of `profiles`")
        for source in config.candidates:
            try:
                resolve_source(source)
            except FileNotFoundError as error:
                raise UserError(str(error)) from error
        for profile in config.profiles:
            try:
                AcceptancePolicy(profile)
            except ValueError as error:
                raise UserError(f"profiles: {error}") from error
        run = config.run or time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        folder = artifacts_root() / "lean_check" / run
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="lean-check-") as scratch:
            target = Target(config, Path(scratch))
            items = [run_item(name, target) for name in ITEMS if not config.only or name in config.only]
    except UserError as error:
        print(f"lean-check: {error}", file=sys.stderr)
        return 2
    failed = [i.name for i in items if i.status == "failed"]
    verdict = ("FAILED: " + ", ".join(failed)) if failed else (
        "all checks passed against real Lean" if target.real
        else "ran against the stand-ins: NOTHING was checked against real Lean")
    folder.mkdir(parents=True, exist_ok=True)
    report = {"verdict": verdict, "mode": target.mode, "real_lean": target.real, "run": run,
              "seconds": time.perf_counter() - started, "config": asdict(config),
              "items": [asdict(i) for i in items], "report_md": str(folder / "report.md")}
    (folder / "report.json").write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
    (folder / "report.md").write_text(render_markdown(report), encoding="utf-8")
    print(summary_screen(report))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
