"""``judge``: Lean FRO's ``comparator`` as the final word on a proof."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from leanloop.jsonl import read_jsonl, write_jsonl
from leanloop.lean.acceptance import reasons as R
from leanloop.lean.acceptance.submission import StatementError, parse_statement
from leanloop.lean.replies import NO_RECORDED_ANSWER

# Lean's module-name -> source-path rule lives in the stand-in (standard library only, it cannot
# import this module); the judge writes the projects the stand-in (or the real tool) reads
from leanloop.lean.standins.comparator import STANDIN_PREFIX, UNAVAILABLE_EXIT, module_file
from leanloop.lean.types import Category, Outcome, VerifyRequest

DEFAULT_LAKEFILE = (
    'name = "leanloopjudge"\nversion = "0.1.0"\n\n[[lean_lib]]\nname = "Solution"\n\n[[lean_lib]]\nname = "Challenge"\n'
)


@dataclass
class JudgeConfig:
    """Options of the ``judge`` (comparator). README "The judge" says how to install the tools."""

    comparator: str = "comparator"  # the comparator binary (a path, or a name on PATH)
    landrun: str | None = None  # COMPARATOR_LANDRUN; None: `landrun` on PATH
    lean4export: str | None = None  # COMPARATOR_LEAN4EXPORT; None: `lean4export` on PATH
    nanoda: bool = False  # also replay the Solution through the nanoda kernel (enable_nanoda)
    nanoda_bin: str | None = None  # COMPARATOR_NANODA; None: `nanoda_bin` on PATH
    permitted_axioms: list[str] = field(default_factory=lambda: ["propext", "Quot.sound", "Classical.choice"])
    # A Lake project whose dependencies are built (e.g. Mathlib): its lakefile.toml and
    # lean-toolchain are copied into every judged project and its .lake/packages linked there.
    # None: a bare project (Lean core only), as comparator's own tests use.
    project_template: str | None = None
    lake_path: str = "lake"
    workdir: str | None = None  # where projects are written (default: a temporary directory)
    keep_projects: bool = False  # leave each judged project on disk (for inspection)
    timeout: float = 900.0  # seconds per project (two builds, two exports, a kernel replay)
    concurrency: int = 2  # projects judged at once


@dataclass(frozen=True)
class ComparatorProject:
    """What comparator is given: the two modules' text and its config."""

    challenge: str
    solution: str
    config: dict[str, Any]
    lakefile: str | None = None  # the project's own lakefile.toml (None: the judge's default)


def challenge_text(request: VerifyRequest) -> str:
    """The Challenge module: trusted header (and context), the trusted statement with ``sorry``."""
    statement = (request.statement or "").replace("\r\n", "\n")
    signature = parse_statement(statement, request.name)  # raises StatementError
    # the statement's own text up to its top-level `:=` (kept verbatim: binders, notation, layout)
    head = statement[: signature.head_end].rstrip()
    header = (request.header or "").replace("\r\n", "\n")
    if header and not header.endswith("\n"):
        header += "\n"
    return f"{header}{head} := by\n  sorry\n"


class ComparatorJudge:
    """``ComparatorJudge(JudgeConfig(...)).check_sync([VerifyRequest(...)])`` -> one Outcome each."""

    name = "judge"

    def __init__(self, config: JudgeConfig | None = None, **options: Any):
        if config is not None and options:
            raise TypeError("give either a JudgeConfig or keyword options, not both")
        self.config = config or JudgeConfig(**options)
        if self.config.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.config.concurrency}")

    def __repr__(self) -> str:
        return f"ComparatorJudge(comparator={self.config.comparator!r}, nanoda={self.config.nanoda})"

    # -- the project ------------------------------------------------------------------------------
    def project(self, request: VerifyRequest) -> ComparatorProject:
        """The project for one request (raises StatementError for a statement that does not parse)."""
        if not request.name:
            raise StatementError("the judge needs the target theorem's name (VerifyRequest.name)")
        config: dict[str, Any] = {
            "challenge_module": "Challenge",
            "solution_module": "Solution",
            "theorem_names": [request.name],
            "permitted_axioms": list(self.config.permitted_axioms),
            "enable_nanoda": bool(self.config.nanoda),
        }
        solution = request.program.replace("\r\n", "\n")
        if not solution.endswith("\n"):  # a file ends with a newline; Lean reads the same program
            solution += "\n"
        return ComparatorProject(challenge_text(request), solution, config)

    def _write(self, project: ComparatorProject, where: Path) -> Path:
        where.mkdir(parents=True, exist_ok=True)
        config = {**project.config, "json_output_path": "report.json"}
        for module, text in (
            (config["challenge_module"], project.challenge),
            (config["solution_module"], project.solution),
        ):
            path = where / module_file(module)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        (where / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
        template = Path(self.config.project_template) if self.config.project_template else None
        lakefile = project.lakefile or DEFAULT_LAKEFILE
        if template is not None:
            if project.lakefile is None:  # the template's requirements (Mathlib) plus the two modules
                lakefile = (
                    (template / "lakefile.toml").read_text(encoding="utf-8").rstrip()
                    + "\n\n"
                    + DEFAULT_LAKEFILE.split("\n\n", 1)[1]
                )
            shutil.copy(template / "lean-toolchain", where / "lean-toolchain")
            if (template / "lake-manifest.json").exists():  # the dependency revisions the template built
                shutil.copy(template / "lake-manifest.json", where / "lake-manifest.json")
            packages = template / ".lake" / "packages"
            if packages.exists():
                (where / ".lake").mkdir(exist_ok=True)
                (where / ".lake" / "packages").symlink_to(packages.resolve(), target_is_directory=True)
        (where / "lakefile.toml").write_text(lakefile, encoding="utf-8")
        return where

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        for var, value in (
            ("COMPARATOR_LANDRUN", self.config.landrun),
            ("COMPARATOR_LEAN4EXPORT", self.config.lean4export),
            ("COMPARATOR_NANODA", self.config.nanoda_bin),
        ):
            if value:
                env[var] = value
        return env

    # -- running ----------------------------------------------------------------------------------
    async def run_project(self, project: ComparatorProject, label: str = "project") -> Outcome:
        """Judge one project (the Challenge/Solution/config as given)."""
        base = Path(self.config.workdir) if self.config.workdir else None
        if base is not None:
            base.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f"judge-{label[:40]}-", dir=base))
        started = time.perf_counter()
        try:
            self._write(project, folder)
            try:
                process = await asyncio.create_subprocess_exec(
                    self.config.lake_path,
                    "env",
                    self.config.comparator,
                    "config.json",
                    cwd=folder,
                    env=self._env(),
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,
                )
            except FileNotFoundError as error:
                return Outcome(
                    Category.UNAVAILABLE,
                    backend=self.name,
                    reasons=[
                        R.reason(
                            R.NO_RECORDING,
                            f"comparator cannot run here ({error}); see leanloop/lean/README.md 'The judge'",
                        )
                    ],
                )
            try:
                output, _ = await asyncio.wait_for(process.communicate(), self.config.timeout)
            except asyncio.TimeoutError:
                _kill_group(process)
                await process.wait()
                return Outcome(
                    Category.TIMEOUT,
                    backend=self.name,
                    time_s=time.perf_counter() - started,
                    reasons=[R.reason(R.LEAN_TIMEOUT, f"comparator ran past {self.config.timeout:g}s")],
                )
            except asyncio.CancelledError:
                _kill_group(process)
                raise
            text = output.decode("utf-8", errors="replace")
            return self._outcome(
                process.returncode,
                text,
                folder / "report.json",
                time.perf_counter() - started,
                project.config.get("solution_module", "Solution"),
            )
        finally:
            if not self.config.keep_projects:
                shutil.rmtree(folder, ignore_errors=True)

    def _outcome(
        self, code: int | None, output: str, report_path: Path, elapsed: float, solution_module: str = "Solution"
    ) -> Outcome:
        tail = output.strip()[-2000:]
        outcome = Outcome(Category.INFRA_ERROR, backend=self.name, time_s=elapsed)
        lines = output.splitlines()
        standin = [line for line in lines if line.startswith(STANDIN_PREFIX)]
        # the stand-in's own "no recording" (its exit code, its line prefix); the Solution's build
        # messages, which the candidate writes, can say anything
        if code == UNAVAILABLE_EXIT and any(NO_RECORDED_ANSWER in line for line in standin):
            outcome.category = Category.UNAVAILABLE
            outcome.reasons = [R.reason(R.NO_RECORDING, tail)]
            return outcome
        if code == 0:
            outcome.category = Category.VALID
            return outcome
        if code == 1:
            # comparator exits 1 on ANY uncaught error (no landrun / lean4export, the Challenge does
            # not build, a lake workspace error). A rejection: the JSON report's reasons, its own
            # "Some targets failed:" line, a failure once it built the Solution (the candidate's
            # code; Main.lean builds and exports the Challenge first), or the stand-in's recorded
            # verdict. Anything else is the infrastructure's.
            reasons = report_reasons(report_path)
            rejected = (
                bool(reasons)
                or any("Some targets failed:" in line for line in lines)
                or any(line.strip() == f"Building {solution_module}" for line in lines)
                or any(line.startswith(STANDIN_PREFIX + "recorded verdict") for line in standin)
            )
            if rejected:
                outcome.category = Category.INVALID
                outcome.reasons = reasons or [R.reason(R.JUDGE_REJECTED, tail[-500:])]
                outcome.first_error = tail[-2000:] or None
                return outcome
        outcome.reasons = [R.reason(R.INFRA_FAILURE, f"comparator exited with {code}: {tail[-500:]}")]
        return outcome

    async def check_one(self, request: VerifyRequest) -> Outcome:
        try:
            project = self.project(request)
        except StatementError as error:
            return Outcome(
                Category.INPUT_ERROR, backend=self.name, reasons=[R.reason(R.TRUSTED_STATEMENT_ERROR, str(error))]
            )
        return await self.run_project(project, request.id or request.name or "project")

    async def check(self, requests: Sequence[VerifyRequest]) -> list[Outcome]:
        gate = asyncio.Semaphore(self.config.concurrency)

        async def one(request: VerifyRequest) -> Outcome:
            async with gate:
                return await self.check_one(request)

        return list(await asyncio.gather(*(one(r) for r in requests)))

    def check_sync(self, requests: Sequence[VerifyRequest]) -> list[Outcome]:
        return asyncio.run(self.check(requests))


def report_reasons(path: Path) -> list[str]:
    """Reasons from comparator's JSON report (``json_output_path``), when it wrote one."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    reasons = []
    for entry in report.get("reports") or []:
        if entry.get("unpermittedAxioms"):
            reasons += [
                R.reason(R.AXIOM_NOT_ALLOWED, f"{entry.get('target')}: {axiom}") for axiom in entry["unpermittedAxioms"]
            ]
        if entry.get("failureCategory") or entry.get("failureMessage"):
            reasons.append(
                R.reason(
                    R.JUDGE_REJECTED,
                    f"{entry.get('target')}: {entry.get('failureCategory')}: {str(entry.get('failureMessage'))[:300]}",
                )
            )
    for kernel in ("kernel", "nanoda"):
        if report.get(f"{kernel}Accepted") is False:
            reasons.append(
                R.reason(
                    R.JUDGE_REJECTED,
                    f"the {kernel} kernel rejects the solution: {str(report.get(f'{kernel}FailureMessage'))[:300]}",
                )
            )
    return reasons


def _kill_group(process: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def judge_rows(rows: list[dict], judge: ComparatorJudge, only_valid: bool = True) -> tuple[list[dict], dict]:
    """Judge JSONL rows (``program``, ``name``, ``statement``, ``header``: a data corpus, sampled
    candidates); ``only_valid``: only rows whose ``category`` is ``valid`` (the labels a user quotes).
    Returns the rows with ``judge_category`` / ``judge_reasons`` added, and a summary."""
    from tqdm import tqdm

    chosen = [i for i, r in enumerate(rows) if not only_valid or r.get("category") == Category.VALID.value]
    requests = [
        VerifyRequest(
            program=rows[i]["program"],
            name=rows[i].get("theorem") or rows[i].get("name"),
            statement=rows[i].get("statement"),
            header=rows[i].get("header") or "",
            id=str(rows[i].get("id") or i),
        )
        for i in chosen
    ]
    outcomes: list[Outcome] = []
    with tqdm(total=len(requests), desc="judge", unit="program") as bar:
        for start in range(0, len(requests), judge.config.concurrency):
            outcomes += judge.check_sync(requests[start : start + judge.config.concurrency])
            bar.update(len(requests[start : start + judge.config.concurrency]))
    out = [dict(r) for r in rows]
    summary = {"judged": len(chosen), "agreed": 0, "disagreed": 0, "undecided": 0}
    for i, outcome in zip(chosen, outcomes):
        out[i].update(judge_category=outcome.category.value, judge_reasons=list(outcome.reasons))
        before = out[i].get("label")
        if outcome.label is None or before is None:
            summary["undecided"] += 1
        else:
            summary["agreed" if bool(before) == outcome.label else "disagreed"] += 1
    return out, summary


@dataclass
class JudgeRowsConfig(JudgeConfig):
    """``python -m leanloop.lean.judge ROWS OUT [--all true] [judge options]``."""

    rows: str = ""
    """JSONL or parquet rows with program / name / statement / header (e.g.
    artifacts/data/<run>/final/corpus.parquet)."""
    out: str = ""
    """Where to write the rows with judge_category / judge_reasons."""
    all: bool = False
    """Judge every row, not only category == valid."""


def main(argv: list[str] | None = None) -> None:
    """``python -m leanloop.lean.judge IN.jsonl OUT.jsonl``: re-check rows with comparator."""
    import sys
    from dataclasses import fields

    from leanloop.tool import parse_config

    args, _ = parse_config(
        JudgeRowsConfig,
        argv,
        prog="python -m leanloop.lean.judge",
        description="Re-check proofs with Lean FRO's comparator (the judge).",
        positional=("rows", "out"),
    )
    options = {f.name: getattr(args, f.name) for f in fields(JudgeConfig)}
    judge = ComparatorJudge(JudgeConfig(**options))
    if args.rows.endswith(".parquet"):  # a data corpus (artifacts/data/<run>/final/corpus.parquet)
        import pyarrow.parquet as pq

        rows = pq.read_table(args.rows).to_pylist()
    else:
        rows = list(read_jsonl(args.rows))
    judged, summary = judge_rows(rows, judge, only_valid=not args.all)
    write_jsonl(args.out, judged)
    print(f"[judge] {json.dumps(summary)} -> {args.out}", file=sys.stderr)


__all__ = [
    "ComparatorJudge",
    "ComparatorProject",
    "JudgeConfig",
    "challenge_text",
    "judge_rows",
    "module_file",
    "report_reasons",
]


if __name__ == "__main__":
    from leanloop.tool import cli_entry

    raise SystemExit(cli_entry(main, prog="python -m leanloop.lean.judge"))
