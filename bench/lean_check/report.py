"""lean-check's report: ``report.md`` and the one-screen summary, from the report's data."""

from __future__ import annotations

import json
from typing import Any


def render_markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# make lean-check: {report['verdict']}",
        "",
        f"- against: **{report['mode']}**",
        f"- run: `{report['run']}`, {report['seconds']:.0f}s",
        "",
    ]
    lines += ["| item | status | summary |", "|---|---|---|"]
    lines += [f"| {r['name']} | {r['status']} | {r['summary'].replace('|', '/')} |" for r in report["items"]]
    lines += [
        "",
        "`passed`: checked against real Lean; `standin`: ran against the stand-ins, which says nothing "
        "about Lean; `skipped`: could not run here (why); `failed`: the command exits 1. How to read the rest: "
        "leanloop/lean/README.md, section make lean-check.",
    ]
    for item in report["items"]:
        detail = item["detail"]
        if item["name"] == "reverify" and detail.get("profiles"):
            lines += [
                "",
                "## Re-verified recorded candidates",
                "",
                f"Lean here: {detail.get('lean')}; "
                + "; ".join(
                    f"`{k}` recorded with {v['recorded_with']}"
                    + ("" if v["matches_this_lean"] else " (another version: expect drift)")
                    for k, v in detail.get("sources", {}).items()
                ),
                "",
            ]
            for profile, values in detail["profiles"].items():
                lines += [
                    f"### `{profile}`: {values['agree']}/{values['answered']} agree, {values['no_answer']} "
                    "without an answer",
                    "",
                    "| recorded / first error kind | n | agree | no answer | disagree |",
                    "|---|---|---|---|---|",
                ]
                lines += [
                    f"| {k} | {c['n']} | {c['agree']} | {c['no_answer']} | {c['disagree']} |"
                    for k, c in sorted(values["by_category"].items())
                ]
                lines.append("")
            lines += ["### Disagreements", ""]
            lines += [
                f"- `{d['profile']}` {d['source']} {d['record']} ({d['name']}): recorded {d['recorded']}, "
                f"now {d['category']} {d['reasons'][:1]}; first error: {d['first_error'][:160]!r}; "
                f"**{d['explanation'] or 'UNEXPLAINED'}**"
                for d in detail["disagreements"]
            ] or ["none"]
        if item["name"] == "fixtures" and detail.get("fixtures"):
            lines += [
                "",
                "## Red-team fixtures under `rl`",
                "",
                "| fixture | kind | stopped at | verdict | why | status |",
                "|---|---|---|---|---|---|",
            ]
            lines += [
                f"| {f['name'].replace('|', '/')} | {f['kind']} | {f['layer']} | {f['verdict']} | "
                f"{str(f['why']).replace('|', '/')} | {f['status']} |"
                for f in detail["fixtures"]
            ]
        if item["name"] in ("timing", "sessions", "judge", "discovery", "lean_tests") and detail:
            lines += ["", f"## {item['name']}", "", "```json", json.dumps(detail, indent=1, default=str)[:6000], "```"]
    return "\n".join(lines) + "\n"


def summary_screen(report: dict[str, Any]) -> str:
    out = [f"make lean-check: {report['verdict']} (against {report['mode']})"]
    for item in report["items"]:
        out.append(f"  {item['name']:<11} {item['status']:<8} {item['summary'][:240]}")
    out.append(f"report: {report['report_md']}")
    return "\n".join(out)
