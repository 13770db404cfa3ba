"""lean-check's driver: parses the options, runs each item against the target, writes
``artifacts/lean_check/<run>/report.md`` and ``report.json``, prints the summary; exits 1 on a failed
item, 2 on a user mistake."""

from __future__ import annotations

import json
import sys
import tempfile
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from bench.lean_check.acceptance import check_fixtures, check_tokens
from bench.lean_check.judge import check_judge
from bench.lean_check.report import render_markdown, summary_screen
from bench.lean_check.reverify import check_reverify
from bench.lean_check.sessions import check_sessions
from bench.lean_check.target import ITEMS, Failed, ItemResult, LeanCheckConfig, Skipped, Target, UserError
from bench.lean_check.timing import check_timing
from bench.lean_check.toolchain import check_discovery, check_lean_tests
from leanloop.lean.acceptance import AcceptancePolicy
from leanloop.lean.backends import BackendConfig
from leanloop.lean.check import LeanConfig
from leanloop.lean.recordings import resolve_source
from leanloop.paths import artifacts_root

# -- driver -------------------------------------------------------------------------------------

CHECKS: dict[str, Callable[[Target], dict[str, Any]]] = {
    "discovery": check_discovery,
    "lean_tests": check_lean_tests,
    "reverify": check_reverify,
    "fixtures": check_fixtures,
    "timing": check_timing,
    "sessions": check_sessions,
    "judge": check_judge,
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


def main(argv: list[str] | None = None) -> int:
    from leanloop.tool import parse_config

    config, _ = parse_config(
        LeanCheckConfig,
        argv,
        prog="python -m bench.lean_check",
        description="check every Lean-side assumption on this machine",
    )
    try:
        unknown = sorted(set(config.only) - set(ITEMS))
        if unknown:
            raise UserError(f"unknown item(s) {unknown} in --only; choose from {', '.join(ITEMS)}")
        if config.sample_size < 1 or config.timing_programs < 1:
            raise UserError("sample_size and timing_programs must be >= 1")
        if config.lean.backend != BackendConfig() or config.lean.profile != LeanConfig().profile:
            raise UserError(
                "lean.backend and lean.profile are not options here: the check runs real Lean "
                "(lean_project, or lake on PATH) or else the stand-ins, under each of `profiles`"
            )
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
    verdict = (
        ("FAILED: " + ", ".join(failed))
        if failed
        else (
            "all checks passed against real Lean"
            if target.real
            else "ran against the stand-ins: NOTHING was checked against real Lean"
        )
    )
    folder.mkdir(parents=True, exist_ok=True)
    report = {
        "verdict": verdict,
        "mode": target.mode,
        "real_lean": target.real,
        "run": run,
        "seconds": time.perf_counter() - started,
        "config": asdict(config),
        "items": [asdict(i) for i in items],
        "report_md": str(folder / "report.md"),
    }
    (folder / "report.json").write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
    (folder / "report.md").write_text(render_markdown(report), encoding="utf-8")
    print(summary_screen(report))
    return 1 if failed else 0
