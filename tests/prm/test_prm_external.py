"""Readers of the published step-label formats, on small files written in those formats (field
names and conventions as ProcessBench, PRMBench and PRM800K publish them)."""

from __future__ import annotations

import json

import pytest

from prm.external import read_external


def _write(path, rows, as_list=False):
    path.write_text(json.dumps(rows) if as_list else "".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_processbench_first_error_index(tmp_path):
    rows = [
        {
            "id": "gsm8k-0",
            "generator": "Qwen2-7B-Instruct",
            "problem": "2+2?",
            "steps": ["a", "b", "c"],
            "final_answer_correct": False,
            "label": 1,
        },
        {
            "id": "gsm8k-1",
            "generator": "x",
            "problem": "1+1?",
            "steps": ["a", "b"],
            "final_answer_correct": True,
            "label": -1,
        },
    ]
    records = read_external("processbench", _write(tmp_path / "gsm8k.json", rows, as_list=True))
    assert records[0].labels == [True, False, False] and records[0].first_error == 1
    assert records[1].labels == [True, True] and records[1].proof_label is True
    with pytest.raises(ValueError, match="outside"):
        read_external("processbench", _write(tmp_path / "bad.jsonl", [{**rows[0], "label": 5}]))


def test_prmbench_error_steps_are_per_step(tmp_path):
    rows = [
        {
            "idx": 7,
            "classification": "circular",
            "original_question": "q",
            "modified_question": "q'",
            "original_process": ["s1", "s2", "s3"],
            "modified_process": ["s1", "s2*", "s3"],
            "modified_steps": [2],
            "error_steps": [2],
            "reason": "r",
            "question": "q'",
        }
    ]
    (record,) = read_external("prmbench", _write(tmp_path / "prmtest_classified.jsonl", rows))
    assert record.labels == [True, False, True] and record.first_error == 1 and record.statement == "q'"


def test_prm800k_chosen_completions_and_stop_at_first_bad(tmp_path):
    def step(*ratings, chosen=None):
        return {
            "completions": [{"text": f"t{i}", "rating": r, "flagged": False} for i, r in enumerate(ratings)],
            "human_completion": None,
            "chosen_completion": chosen,
        }

    rows = [
        {
            "labeler": "l",
            "timestamp": "t",
            "generation": 1,
            "is_quality_control_question": False,
            "is_initial_screening_question": False,
            "question": {"problem": "p", "ground_truth_answer": "1"},
            "label": {
                "steps": [step(1), step(0), step(1, -1, chosen=1), step(1)],
                "total_time": 1,
                "finish_reason": "found_error",
            },
        },
        {
            "labeler": "l",
            "timestamp": "t",
            "generation": 2,
            "is_quality_control_question": False,
            "is_initial_screening_question": False,
            "question": {"problem": "p2", "ground_truth_answer": "2"},
            "label": {"steps": [step(1), step(1, 1, chosen=0)], "total_time": 1, "finish_reason": "solution"},
        },
    ]
    first, second = read_external("prm800k", _write(tmp_path / "phase2_test.jsonl", rows))
    assert [s["prose"] for s in first.steps] == ["t0", "t0", "t1"]  # the chosen completion's text
    assert first.labels == [True, True, False] and first.proof_label is False  # neutral counts as correct
    assert second.labels == [True, True] and second.proof_label is True
