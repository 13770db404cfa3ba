"""lean-check item ``reverify``: a stratified sample of the shipped recorded candidates re-verified
under each profile, agreement per recorded verdict and error kind, every disagreement explained or
not; and the reader of recorded-candidate files the other items share."""

from __future__ import annotations

import asyncio
import gzip
import json
import random
import re
from dataclasses import dataclass
from typing import Any

from bench.lean_check.target import Failed, Target, UserError
from bench.lean_check.toolchain import _version_key, recording_versions
from leanloop.lean.acceptance import reasons as R
from leanloop.lean.recordings import resolve_source
from leanloop.lean.types import Category, VerifyRequest

# what a Lean message says when a name or syntax moved between versions (the only accepted evidence
# of version drift: the message has to say so)
VERSION_DRIFT = re.compile(
    r"unknown (identifier|constant|namespace|tactic|attribute)|deprecated|"
    r"has been (renamed|removed)|unexpected token|unknown option",
    re.I,
)


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
                out.append(
                    Sampled(
                        source,
                        f"{row.get('custom_id')} (line {number})",
                        row.get("name"),
                        row["code"],
                        recorded,
                        "timeout" if timed_out else error_kind(first) if recorded != "valid" else "-",
                        first,
                    )
                )
            elif "server_response" in row:
                for result in row["server_response"].get("results") or []:
                    messages = (result.get("response") or {}).get("messages") or []
                    errors = [m.get("data", "") for m in messages if m.get("severity") == "error"]
                    timed_out = "timed out" in str(result.get("error") or "")
                    recorded = "timeout" if timed_out else ("invalid" if errors or result.get("error") else "valid")
                    first = errors[0] if errors else result.get("error")
                    out.append(
                        Sampled(
                            source,
                            f"{row.get('id')} (line {number})",
                            None,
                            row["code"],
                            recorded,
                            "timeout" if timed_out else error_kind(first) if recorded != "valid" else "-",
                            first,
                        )
                    )
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
            sorted({R.code_of(r) for r in outcome.reasons})
        )
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
            requests.append(
                VerifyRequest(
                    program=row.program,
                    name=row.name,
                    statement=statement.statement if statement else None,
                    header=statement.header if statement else None,
                    id=row.record,
                )
            )
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
                disagreements.append(
                    {
                        "profile": profile,
                        "source": row.source,
                        "record": row.record,
                        "name": row.name,
                        "recorded_lean": versions.get(row.source),
                        "recorded": row.recorded,
                        "recorded_first_error": (row.first_error or "")[:300],
                        "category": outcome.category.value,
                        "reasons": outcome.reasons[:3],
                        "first_error": (outcome.first_error or "")[:300],
                        "explanation": explain(profile, row, outcome),
                    }
                )
        answered = sum(c["agree"] + c["disagree"] for c in table.values())
        per_profile[profile] = {
            "checked": len(kept),
            "answered": answered,
            "agree": sum(c["agree"] for c in table.values()),
            "no_answer": sum(c["no_answer"] for c in table.values()),
            "by_category": table,
        }
    unexplained = [d for d in disagreements if d["explanation"] is None]
    by_precheck = sum(1 for d in disagreements if d["category"] == Category.PRECHECK_REJECTED.value)
    parts = [f"{p}: {v['agree']}/{v['answered']} agree ({v['no_answer']} no answer)" for p, v in per_profile.items()]
    running = target.lean_version()
    detail = {
        "sampled": len(sample),
        "lean": running,
        "sources": {
            source: {
                "recorded_with": version,
                "matches_this_lean": any(
                    _version_key(v) == _version_key(running) for v in recorded_versions.get(source, [])
                ),
            }
            for source, version in versions.items()
        },
        "profiles": per_profile,
        "disagreements": disagreements,
        "unexplained": len(unexplained),
        "summary": f"{len(sample)} recorded candidates; "
        + "; ".join(parts)
        + f"; {len(disagreements)} disagreements ({by_precheck} by a precheck), "
        f"{len(unexplained)} unexplained",
    }
    if unexplained:
        raise Failed(detail["summary"], detail)
    return detail
