"""``make lean-check`` end to end against the stand-ins (no Lean here): a clean run exits 0 and says
nothing was checked against real Lean; a recorded-candidate file with one verdict flipped (a seeded
disagreement) is reported, with its first error, and exits 1.

The candidates are real RL-Lean rows; the replay backend answers each from its own recorded
compilation result, so the only disagreement is the flipped ``verdict_pass``.
"""

from __future__ import annotations

import gzip
import json

import pytest

from bench.lean_check.driver import main
from bench.lean_check.reverify import error_kind, read_candidates, stratified_sample
from bench.lean_check.target import LeanCheckConfig
from leanloop.paths import REPO_ROOT
from leanloop.tool import parse_config

CONFIG = str(REPO_ROOT / "configs/lean_check/default.yaml")


@pytest.fixture(scope="module")
def rl_sample(shared_data):
    """20 real RL-Lean rows: the accepted mathd_algebra_478 program, valid and failed programs."""
    with gzip.open(shared_data / "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz", "rt") as fh:
        rows = [json.loads(line) for line in fh]
    valid = [r for r in rows if r["verdict_pass"]][:9]
    valid.insert(0, next(r for r in rows if r["verdict_pass"] and r["name"] == "mathd_algebra_478"))
    failed = [
        r
        for r in rows
        if not r["verdict_pass"]
        and not r["compilation_result"].get("system_errors")
        and r["compilation_result"]["errors"]
    ][:10]
    return valid + failed


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _run(tmp_path, candidates, run, only, *extra):
    return main(
        [
            "--config",
            CONFIG,
            "--run",
            run,
            "--only",
            json.dumps(only),
            "--candidates",
            json.dumps([str(candidates)]),
            "--sample_size",
            "20",
            "--lean.concurrency",
            "2",
            "--timing_programs",
            "3",
            *extra,
        ]
    )


def _report(artifacts, run):
    return json.loads((artifacts / "lean_check" / run / "report.json").read_text())


def test_a_clean_run_against_the_standins_exits_0_and_says_nothing_was_checked(tmp_path, artifacts, rl_sample, capsys):
    candidates = _write(tmp_path / "candidates.jsonl", rl_sample)
    code = _run(
        tmp_path,
        candidates,
        "clean",
        ["discovery", "lean_tests", "reverify", "fixtures", "timing", "sessions", "judge", "tokens"],
    )
    screen = capsys.readouterr().out
    assert code == 0, screen
    report = _report(artifacts, "clean")
    assert report["real_lean"] is False and "NOTHING was checked against real Lean" in report["verdict"]
    assert "NOTHING was checked against real Lean" in screen.splitlines()[0]
    status = {i["name"]: i["status"] for i in report["items"]}
    assert status == {
        "discovery": "standin",
        "lean_tests": "skipped",
        "reverify": "standin",
        "fixtures": "standin",
        "timing": "standin",
        "sessions": "standin",
        "judge": "standin",
        "tokens": "standin",
    }
    assert "no live table here" in {i["name"]: i for i in report["items"]}["tokens"]["summary"]
    items = {i["name"]: i for i in report["items"]}
    assert (
        "v4.15.0" in items["discovery"]["summary"]
        and "kimina_match" in items["discovery"]["detail"]["matching_recordings"]
    )
    assert "skip" in items["lean_tests"]["summary"]
    reverify = items["reverify"]["detail"]
    assert reverify["sampled"] == 20 and reverify["disagreements"] == []
    assert reverify["profiles"]["collection"]["agree"] == 20
    # rl on replay: recorded failures are rejected from their recorded errors; recorded passes have no
    # recording with the harness trailer, so they have no answer, never a guessed pass
    rl = reverify["profiles"]["rl"]
    assert rl["agree"] + rl["no_answer"] == rl["checked"] and rl["no_answer"] >= 1
    fixtures = {f["name"]: f for f in items["fixtures"]["detail"]["fixtures"]}
    assert fixtures["native_decide"]["layer"] == "precheck" and fixtures["native_decide"]["verdict"] == "rejected"
    assert fixtures["empty"]["layer"] == "extraction"
    assert not [f for f in fixtures.values() if f["status"] == "WRONG"]
    # text exploits stop before Lean; the ones only Lean can stop have no recording on the stand-ins
    assert all(f["verdict"] == "rejected" for f in fixtures.values() if f["kind"] == "exploit" and f["layer"] != "lean")
    assert fixtures["proof of another statement (v = 66)"]["status"] == "not checked"
    assert fixtures["honest proof (recorded valid)"]["status"] == "not checked"  # no trailer recording
    timing = items["timing"]["detail"]
    assert timing["isolation_cost_ratio"] > 0 and timing["pool"]["seed_programs_per_s"] == 0.835
    assert timing["header"]["statuses"] == ["ok", "ok"]
    assert all(t["ok"] for t in items["sessions"]["detail"]["theorems"])
    assert [p["category"] for p in items["judge"]["detail"]["projects"]] == ["valid", "invalid"]
    markdown = (artifacts / "lean_check" / "clean" / "report.md").read_text()
    assert "NOTHING was checked against real Lean" in markdown and "| fixtures | standin |" in markdown


def test_a_seeded_disagreement_is_listed_with_its_first_error_and_exits_1(tmp_path, artifacts, rl_sample, capsys):
    rows = [dict(r) for r in rl_sample]
    flipped = next(
        r for r in rows if not r["verdict_pass"] and "linarith failed" in r["compilation_result"]["errors"][0]["data"]
    )
    flipped["verdict_pass"] = True  # the recording now claims a pass its own messages contradict
    candidates = _write(tmp_path / "seeded.jsonl", rows)
    code = _run(tmp_path, candidates, "seeded", ["reverify"])
    screen = capsys.readouterr().out
    assert code == 1 and "FAILED: reverify" in screen
    detail = _report(artifacts, "seeded")["items"][0]["detail"]
    listed = [d for d in detail["disagreements"] if d["profile"] == "collection"]
    assert len(listed) == 1 and listed[0]["name"] == flipped["name"] and listed[0]["recorded"] == "valid"
    assert listed[0]["category"] == "invalid" and "linarith failed" in listed[0]["first_error"]
    assert listed[0]["explanation"] is None and detail["unexplained"] >= 1
    assert "UNEXPLAINED" in (artifacts / "lean_check" / "seeded" / "report.md").read_text()


def test_user_mistakes_are_one_line_and_exit_2(tmp_path, artifacts, capsys):
    assert main(["--config", CONFIG, "--only", "[nonsense]"]) == 2
    assert main(["--config", CONFIG, "--candidates", "[no_such_recording]"]) == 2
    assert main(["--config", CONFIG, "--lean_project", str(tmp_path / "missing")]) == 2
    assert main(["--config", CONFIG, "--profiles", "[lenient]"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 4 and all(line.startswith("lean-check: ") for line in lines)


def test_the_sample_is_stratified_and_the_config_parses(shared_data):
    config, _ = parse_config(LeanCheckConfig, ["--config", CONFIG])
    assert config.sample_size == 300 and config.profiles == ["collection", "rl"]
    rows = read_candidates("rl_lean") + read_candidates("kimina_match")
    sample = stratified_sample(rows, 300, 0)
    assert len(sample) == 300 and len({id(r) for r in sample}) == 300
    groups = {(r.source, r.recorded) for r in sample}
    assert groups == {(r.source, r.recorded) for r in rows}  # every source x verdict is represented
    kinds = {r.kind for r in sample if r.source == "rl_lean" and r.recorded == "invalid"}
    assert {"linarith failed to find", "unsolved goals"} <= kinds and len(kinds) > 20
    assert error_kind("unsolved goals\nx : ℝ\n⊢ x = 1") == "unsolved goals"
    assert error_kind("don't know how to synthesize placeholder") == "don't know how to"
