"""The judge (comparator) against comparator's own 20 recorded adversarial test projects.

The stand-in comparator answers exactly those projects (by content hash) with the exit code
comparator's test runner expects for them, and nothing else (no recording: UNAVAILABLE). The
judge writes each project, runs ``lake env <comparator> config.json`` as for the real tool, and
turns the exit code into the final verdict. The ``lean``-marked test runs the real comparator when
it is installed.
"""

from __future__ import annotations

import json
import shutil

import pytest

from leanloop.lean.judge import (
    ComparatorJudge,
    ComparatorProject,
    JudgeConfig,
    challenge_text,
    module_file,
    report_reasons,
)
from leanloop.lean.acceptance import reasons as R
from leanloop.lean.standins.comparator import prepare_comparator_dir
from leanloop.lean.types import Category, VerifyRequest


def _projects(shared_data) -> dict[str, tuple[ComparatorProject, int]]:
    out = {}
    for folder in sorted((shared_data / "comparator" / "projects").iterdir()):
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        lakefile = folder / "lakefile.toml"
        project = ComparatorProject(
            (folder / module_file(config["challenge_module"])).read_text(encoding="utf-8"),
            (folder / module_file(config["solution_module"])).read_text(encoding="utf-8"),
            config,
            lakefile.read_text(encoding="utf-8") if lakefile.exists() else None,
        )
        out[folder.name] = (project, json.loads((folder / "test.json").read_text(encoding="utf-8"))["exit_code"])
    return out


@pytest.fixture(scope="module")
def recorded(shared_data):
    return _projects(shared_data)


@pytest.fixture(scope="module")
def judge(tmp_path_factory, shared_data):
    tools = prepare_comparator_dir(tmp_path_factory.mktemp("comparator"), shared_data / "comparator")
    return ComparatorJudge(
        JudgeConfig(comparator=str(tools / "comparator"), lake_path=str(tools / "lake"), concurrency=4)
    )


def test_every_recorded_project_gets_its_recorded_verdict(judge, recorded):
    import asyncio

    assert len(recorded) == 20

    async def all_projects():
        return await asyncio.gather(*(judge.run_project(p, name) for name, (p, _) in recorded.items()))

    outcomes = asyncio.run(all_projects())
    for (name, (_, exit_code)), outcome in zip(recorded.items(), outcomes):
        assert outcome.category is (Category.VALID if exit_code == 0 else Category.INVALID), (name, outcome)
        if exit_code:
            assert {R.code_of(r) for r in outcome.reasons} == {R.JUDGE_REJECTED}
    accepted = sorted(name for name, o in zip(recorded, outcomes) if o.category is Category.VALID)
    assert accepted == [
        "def_hole",
        "numeric_namespace",
        "simple_match",
        "simple_multi_nanoda",
        "simple_nanoda",
        "simple_nanoda_compat",
        "theorem_hole_issue",
    ]


def test_requests_become_the_projects_comparator_was_tested_on(judge, recorded):
    """From a VerifyRequest (trusted statement, candidate program) the judge writes the Challenge
    with `sorry` and the Solution: for comparator's single-theorem projects that IS the recorded
    project, so the recorded verdict comes back; an edited solution has no recording."""
    requests, expected = [], []
    for name in ("simple_match", "simple_mismatch", "simple_axiom_issue", "simple_kind_mismatch"):
        project, exit_code = recorded[name]
        statement = project.challenge.replace("sorry", "").rstrip()  # `theorem comm ... := by`
        request = VerifyRequest(program=project.solution, name="comm", statement=statement, header="", id=name)
        assert challenge_text(request) == project.challenge
        assert judge.project(request).config == project.config
        requests.append(request)
        expected.append(Category.VALID if exit_code == 0 else Category.INVALID)
    edited = VerifyRequest(
        program=requests[0].program + "\n-- edited\n", name="comm", statement=requests[0].statement, header=""
    )
    outcomes = judge.check_sync([*requests, edited])
    assert [o.category for o in outcomes[:-1]] == expected
    assert outcomes[-1].category is Category.UNAVAILABLE and outcomes[-1].label is None


def test_missing_tools_and_bad_statements_are_not_verdicts(tmp_path, recorded):
    project, _ = recorded["simple_match"]
    missing = ComparatorJudge(comparator=str(tmp_path / "nowhere"), lake_path=str(tmp_path / "no-lake"))
    request = VerifyRequest(program=project.solution, name="comm", statement="theorem comm (n m : Nat) : n + m = m + n")
    assert missing.check_sync([request])[0].category is Category.UNAVAILABLE
    broken = VerifyRequest(program=project.solution, name="comm", statement="def other := 1")
    assert missing.check_sync([broken])[0].category is Category.INPUT_ERROR


def test_report_reasons_read_comparators_json_report(tmp_path):
    # the report layout of comparator's json_output tests (leanprover/comparator tests/projects/
    # json_output_theorem_failure/test.json), shortened
    path = tmp_path / "report.json"
    path.write_text(
        json.dumps(
            {
                "reports": [
                    {
                        "target": "expected",
                        "targetKind": "theorem",
                        "failureCategory": None,
                        "failureMessage": None,
                        "unpermittedAxioms": ["sorryAx"],
                        "transitiveAxioms": ["Quot.sound", "propext", "sorryAx"],
                    }
                ],
                "kernelAccepted": False,
                "kernelFailureMessage": "(kernel) application type mismatch",
                "nanodaAccepted": None,
                "nanodaFailureMessage": None,
            }
        )
    )
    reasons = report_reasons(path)
    assert [R.code_of(r) for r in reasons] == [R.AXIOM_NOT_ALLOWED, R.JUDGE_REJECTED]
    assert "kernel" in reasons[1] and report_reasons(tmp_path / "absent.json") == []


@pytest.mark.lean
@pytest.mark.skipif(
    shutil.which("comparator") is None or shutil.which("lean4export") is None,
    reason="comparator / lean4export not on PATH",
)
def test_real_comparator_agrees_with_its_recorded_verdicts(recorded, tmp_path):
    """The real tool on the recorded projects that need only Lean core (no nanoda)."""
    judge = ComparatorJudge(JudgeConfig(workdir=str(tmp_path), timeout=600))
    for name in ("simple_match", "simple_mismatch", "simple_axiom_issue"):
        project, exit_code = recorded[name]
        import asyncio

        outcome = asyncio.run(judge.run_project(project, name))
        assert outcome.category is (Category.VALID if exit_code == 0 else Category.INVALID), (name, outcome)


def test_the_cli_rejudges_the_valid_rows_of_a_corpus(tmp_path, judge, recorded):
    """``python -m leanloop.lean.judge``: the rows a corpus labels valid, re-checked by the judge."""
    from leanloop.lean.judge import main

    def row(project: str, category: str, label):
        p, _ = recorded[project]
        return {
            "program": p.solution,
            "name": "comm",
            "statement": p.challenge.replace("sorry", "").rstrip(),
            "header": "",
            "category": category,
            "label": label,
        }

    rows = [
        row("simple_match", "valid", True),
        row("simple_mismatch", "valid", True),
        row("simple_axiom_issue", "invalid", False),
    ]
    source, out = tmp_path / "corpus.jsonl", tmp_path / "judged.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    main([str(source), str(out), "--comparator", judge.config.comparator, "--lake_path", judge.config.lake_path])
    judged = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r.get("judge_category") for r in judged] == ["valid", "invalid", None]  # invalid rows left alone
    # a data corpus is parquet
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "corpus.parquet")
    main(
        [
            str(tmp_path / "corpus.parquet"),
            str(out),
            "--comparator",
            judge.config.comparator,
            "--lake_path",
            judge.config.lake_path,
        ]
    )
    assert [json.loads(line).get("judge_category") for line in out.read_text().splitlines()] == [
        "valid",
        "invalid",
        None,
    ]


# ASSUMED REPLY: comparator's console output is not recorded; the lines below are the ones its
# Main.lean prints (`IO.println s!"Building {target}"`, `s!"Exporting {decls} from {module}"`, the
# userError "Some targets failed:", "Child exited with N") after Lean's "uncaught exception: "
# prefix for an error `main` does not catch (exit code 1 for every one of them).
_CHALLENGE_STAGE = "Building Challenge\n"
_SOLUTION_STAGE = _CHALLENGE_STAGE + "Exporting #[comm] from Challenge\nBuilding Solution\n"


@pytest.mark.parametrize(
    "output,category",
    [
        (_CHALLENGE_STAGE + "uncaught exception: Child exited with 1\n", Category.INFRA_ERROR),  # the Challenge
        ("uncaught exception: could not execute external process 'landrun'\n", Category.INFRA_ERROR),
        (_SOLUTION_STAGE + "uncaught exception: Child exited with 1\n", Category.INVALID),  # the Solution's build
        (_SOLUTION_STAGE + "uncaught exception: Some targets failed:\n- comm: type mismatch\n", Category.INVALID),
    ],
)
def test_comparator_exit_1_is_a_rejection_only_with_evidence_of_one(judge, tmp_path, output, category):
    """comparator exits 1 on any uncaught error: a missing tool or a Challenge that does not build
    is the infrastructure's, not the candidate's rejection."""
    outcome = judge._outcome(1, output, tmp_path / "absent.json", 1.0)
    assert outcome.category is category, outcome


def test_a_no_recording_phrase_in_the_candidates_build_output_is_not_unavailable(judge, tmp_path):
    """The Solution's build messages are the candidate's: the stand-in's phrase there is not the
    stand-in saying it has no recording (that is its exit code and its own line prefix)."""
    smuggled = _SOLUTION_STAGE + "info: Solution.lean:3:0: stand-in comparator: no recorded Lean answer\n"
    assert (
        judge._outcome(1, smuggled + "uncaught exception: Child exited with 1\n", tmp_path / "a.json", 1.0).category
        is Category.INVALID
    )
    assert judge._outcome(0, smuggled + "Your solution is okay!\n", tmp_path / "a.json", 1.0).category is Category.VALID
    assert (
        judge._outcome(
            2, "stand-in comparator: no recorded Lean answer for this project\n", tmp_path / "a.json", 1.0
        ).category
        is Category.UNAVAILABLE
    )


def test_the_project_template_lake_manifest_is_copied(tmp_path, recorded):
    template = tmp_path / "template"
    template.mkdir()
    (template / "lakefile.toml").write_text('name = "t"\n\n[[require]]\nname = "mathlib"\n', encoding="utf-8")
    (template / "lean-toolchain").write_text("leanprover/lean4:v4.15.0\n", encoding="utf-8")
    (template / "lake-manifest.json").write_text('{"version": "1.1.0", "packages": []}\n', encoding="utf-8")
    judge = ComparatorJudge(JudgeConfig(project_template=str(template)))
    project, _ = recorded["simple_match"]
    where = judge._write(ComparatorProject(project.challenge, project.solution, project.config), tmp_path / "p")
    assert (where / "lake-manifest.json").read_text(encoding="utf-8") == (template / "lake-manifest.json").read_text(
        encoding="utf-8"
    )
    assert 'name = "mathlib"' in (where / "lakefile.toml").read_text(encoding="utf-8")
