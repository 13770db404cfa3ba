"""Readers for published step-label sets, so prm-eval reports on them the same way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from leanloop.jsonl import numbered_jsonl
from leanloop.paths import resolve_shared
from prm.labelled_proofs import ProofRecord

FORMATS = ("processbench", "prmbench", "prm800k")


def _rows(path: str | Path) -> Iterator[dict[str, Any]]:
    text = resolve_shared(path).read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        yield from json.loads(text)
        return
    for _, row in numbered_jsonl(resolve_shared(path)):
        yield row


def _record(
    proof_id: str,
    problem: str,
    steps: list[str],
    labels: list[bool | None],
    proof_label: bool | None,
    source: str,
    generator: str = "",
) -> ProofRecord:
    if not steps:
        raise ValueError(f"{source} {proof_id}: no steps")
    return ProofRecord(
        proof_id=proof_id,
        name=proof_id,
        statement=problem,
        header="",
        program="",
        steps=[{"prose": s, "tactic": "", "label": l, "reason": source} for s, l in zip(steps, labels)],
        proof_label=proof_label,
        first_error=next((i for i, l in enumerate(labels) if l is False), None),
        category="external",
        lean_version=None,
        generator=generator,
        source=source,
        labeller=source,
        split="test",
    )


def read_processbench(path: str | Path) -> list[ProofRecord]:
    out = []
    for row in _rows(path):
        steps, first = list(row["steps"]), int(row["label"])
        if not -1 <= first < len(steps):
            raise ValueError(f"ProcessBench {row.get('id')}: label {first} outside -1..{len(steps) - 1}")
        labels = [first == -1 or i < first for i in range(len(steps))]
        out.append(
            _record(
                str(row["id"]),
                row["problem"],
                steps,
                labels,
                first == -1,
                "processbench",
                str(row.get("generator", "")),
            )
        )
    return out


def read_prmbench(path: str | Path, include_original: bool = False) -> list[ProofRecord]:
    out = []
    for row in _rows(path):
        key = str(row.get("idx", len(out)))
        steps, errors = list(row["modified_process"]), {int(e) for e in row.get("error_steps") or []}
        if errors - set(range(1, len(steps) + 1)):
            raise ValueError(f"PRMBench {key}: error_steps {sorted(errors)} outside 1..{len(steps)}")
        question = row.get("modified_question") or row.get("question") or row["original_question"]
        out.append(
            _record(
                f"{key}:{row.get('classification', 'modified')}",
                question,
                steps,
                [i not in errors for i in range(1, len(steps) + 1)],
                not errors,
                "prmbench",
            )
        )
        if include_original and row.get("original_process"):
            original = list(row["original_process"])
            out.append(
                _record(f"{key}:original", row["original_question"], original, [True] * len(original), True, "prmbench")
            )
    return out


def read_prm800k(path: str | Path, neutral_correct: bool = True) -> list[ProofRecord]:
    out = []
    for number, row in enumerate(_rows(path)):
        steps, labels = [], []
        for step in row["label"]["steps"]:
            completions = step.get("completions") or []
            chosen = step.get("chosen_completion")
            if chosen is not None:
                completion = completions[chosen]
            elif step.get("human_completion"):
                completion = {
                    "text": step["human_completion"]["text"]
                    if isinstance(step["human_completion"], dict)
                    else step["human_completion"],
                    "rating": 1,
                }
            elif len(completions) == 1:
                completion = completions[0]
            else:  # several alternatives, none chosen: the labeller stopped at a step rated -1
                completion = next((c for c in completions if c.get("rating") == -1), None)
            if completion is None or completion.get("rating") is None:
                break
            steps.append(completion["text"])
            rating = int(completion["rating"])
            labels.append(rating == 1 or (rating == 0 and neutral_correct))
            if rating == -1:
                break
        if not steps:
            continue
        finish = row["label"].get("finish_reason")
        proof_label = False if False in labels else (True if finish == "solution" else None)
        out.append(
            _record(
                f"prm800k:{number}",
                row["question"]["problem"],
                steps,
                labels,
                proof_label,
                "prm800k",
                str(row.get("generation", "")),
            )
        )
    return out


def read_external(format: str, path: str | Path) -> list[ProofRecord]:
    readers = {"processbench": read_processbench, "prmbench": read_prmbench, "prm800k": read_prm800k}
    if format not in readers:
        raise ValueError(f"unknown step-label format {format!r}; one of {FORMATS}")
    return readers[format](path)
