"""lean-check item ``judge``: comparator on one valid and one invalid recorded project (skipped
when comparator, landrun and lean4export are not installed)."""

from __future__ import annotations

import asyncio
import json
import shutil
from typing import Any

from bench.lean_check.target import Failed, Skipped, Target
from leanloop.paths import resolve_shared

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
        judge = ComparatorJudge(
            JudgeConfig(
                comparator=tools["comparator"],
                landrun=tools["landrun"],
                lean4export=tools["lean4export"],
                timeout=config.lean.timeout,
            )
        )
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
        project = ComparatorProject(
            (folder / module_file(cfg["challenge_module"])).read_text(encoding="utf-8"),
            (folder / module_file(cfg["solution_module"])).read_text(encoding="utf-8"),
            cfg,
            lakefile.read_text(encoding="utf-8") if lakefile.exists() else None,
        )
        outcome = asyncio.run(judge.run_project(project, name))
        results.append(
            {
                "project": name,
                "expected": expected,
                "category": outcome.category.value,
                "reasons": outcome.reasons[:2],
                "ok": outcome.category.value == expected,
            }
        )
    detail = {
        "where": where,
        "tools": tools,
        "projects": results,
        "summary": f"{where}: " + ", ".join(f"{r['project']} -> {r['category']}" for r in results),
    }
    if not all(r["ok"] for r in results):
        raise Failed(detail["summary"], detail)
    return detail
