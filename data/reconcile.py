"""Reconcile the corpus with verdicts recorded beside the candidates (e.g. RL-Lean's ``verdict_pass``).

Every input row of a source with recorded verdicts is accounted for: a distinct program, a
duplicate of one (it takes its first copy's outcome), or an input error. A row *agrees* when our
label equals the recorded one (``pass`` -> True; ``fail`` and ``system_error`` -> False). Every
other row is a *difference*, and it must be explained by the named reason of our outcome
(``lean_timeout``: a timeout is no verdict; ``no_recording``: no recorded Lean answer to replay;
a precheck reason; ...). A difference without a reason is ``unexplained`` — the tests require none.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from leanloop.lean.acceptance import reasons as R
from data.sources import CandidateSet
from leanloop.lean.types import Category, Outcome

_EXPECTED = {"pass": True, "fail": False, "system_error": False}


def _explanation(category: str, reasons: list[str]) -> str | None:
    if reasons:
        return R.code_of(reasons[0])
    return None if category == Category.VALID.value else category


def reconcile(items: CandidateSet, outcomes: dict[str, Outcome]) -> dict[str, dict[str, Any]]:
    """Per source with recorded verdicts: counts, the recorded x ours matrix, explanations."""
    rows: dict[str, list[tuple[str, str, str | None, list[str], str]]] = defaultdict(list)
    first_recorded = {c.id: c.recorded for c in items.candidates}
    conflicting: Counter = Counter()
    for c in items.candidates:
        o = outcomes[c.id]
        rows[c.source].append(("unique", c.recorded, o.category.value, o.reasons, c.id))
    for d in items.duplicates:
        o = outcomes[d.of_id]
        rows[d.source].append(("duplicate", d.recorded, o.category.value, o.reasons, d.of_id))
        if d.recorded != first_recorded[d.of_id]:
            conflicting[d.source] += 1
    for e in items.errors:
        rows[e.source].append(("input_error", e.recorded, Category.INPUT_ERROR.value, [R.reason(R.BAD_REQUEST)], ""))
    report: dict[str, dict[str, Any]] = {}
    for source, entries in rows.items():
        if not any(recorded for _, recorded, *_ in entries):
            continue
        kinds = Counter(kind for kind, *_ in entries)
        recorded_counts = Counter(recorded or "none" for _, recorded, *_ in entries)
        matrix: dict[str, Counter] = defaultdict(Counter)
        explained: Counter = Counter()
        agree = unexplained = 0
        for _, recorded, category, reasons, _ in entries:
            matrix[recorded or "none"][category] += 1
            expected = _EXPECTED.get(recorded or "")
            ours = Category(category).label
            if recorded is not None and ours == expected:
                agree += 1
                continue
            why = _explanation(category, reasons)
            if why is None:
                unexplained += 1
            else:
                explained[why] += 1
        report[source] = {
            "rows": len(entries),
            "unique": kinds["unique"],
            "duplicates": kinds["duplicate"],
            "input_errors": kinds["input_error"],
            "recorded": {
                "pass": recorded_counts["pass"],
                "fail": recorded_counts["fail"] + recorded_counts["system_error"],
                "fail_system_error": recorded_counts["system_error"],
                "none": recorded_counts["none"],
            },
            "matrix": {k: dict(v) for k, v in sorted(matrix.items())},
            "agree": agree,
            "differences": len(entries) - agree,
            "explained": dict(explained.most_common()),
            "unexplained": unexplained,
            "conflicting_duplicates": conflicting[source],
        }
    return report


def format_reconciliation(report: dict[str, dict[str, Any]]) -> str:
    lines = []
    for source, r in report.items():
        rec = r["recorded"]
        lines.append(
            f"reconciliation [{source}]: {r['rows']} rows = {r['unique']} distinct + {r['duplicates']} "
            f"duplicates + {r['input_errors']} input errors; recorded {rec['pass']} pass / {rec['fail']} "
            f"fail ({rec['fail_system_error']} system errors or timeouts)"
        )
        for recorded, cells in r["matrix"].items():
            lines.append(f"  recorded {recorded:<13} -> " + ", ".join(f"{k} {v}" for k, v in sorted(cells.items())))
        why = ", ".join(f"{k} {v}" for k, v in r["explained"].items()) or "none"
        lines.append(
            f"  agree {r['agree']}, differ {r['differences']} (explained: {why}; unexplained "
            f"{r['unexplained']}); duplicates recorded differently: {r['conflicting_duplicates']}"
        )
    return "\n".join(lines)
