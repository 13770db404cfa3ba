"""The nine metrics on real recorded Lean messages, and the report."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from autoformalizer.metrics import (
    ERROR_CATEGORIES,
    AutoformalizerReport,
    ResourceMonitor,
    classify_error,
    compile_at_k,
    error_breakdown,
    failure_modes,
    faithfulness_code,
    goal_exact_match,
    mean_iters_solved,
    pass_at_n,
    tokens_per_sec,
    well_formed_rate,
    write_report,
)


def test_error_breakdown_of_real_lean_messages(rl_lean_errors, shared_data):
    counts = error_breakdown(rl_lean_errors)
    assert set(counts) == set(ERROR_CATEGORIES) and sum(counts.values()) == len(rl_lean_errors)
    first_lines = [e["data"].split("\n", 1)[0] for e in rl_lean_errors]
    assert counts["unknown_ident"] == sum(
        l.startswith(("unknown identifier", "unknown constant")) or "the environment does not contain" in l
        for l in first_lines
    )
    assert counts["typeclass"] == sum(l.startswith("failed to synthesize") for l in first_lines)
    assert counts["type_mismatch"] >= sum(
        l.startswith(("type mismatch", "application type mismatch")) for l in first_lines
    )
    assert counts["other"] > counts["unknown_ident"]  # tactic failures (linarith, unsolved goals) dominate proofs
    assert classify_error("linarith failed to find a contradiction") == "other"
    # HEAD wording and parser errors from the REPL recordings
    repl = [json.loads(line) for line in open(shared_data / "lean_repl/repl_io_pairs.jsonl", encoding="utf-8")]
    texts = [m["data"] for r in repl for o in r["outputs"] for m in o.get("messages", []) if m["severity"] == "error"]
    assert classify_error(next(t for t in texts if t.startswith("Unknown identifier `"))) == "unknown_ident"
    assert classify_error(next(t for t in texts if t.startswith("unexpected token"))) == "syntax"
    only_warnings = [{"severity": "warning", "data": "declaration uses 'sorry'"}]
    assert sum(error_breakdown(only_warnings).values()) == 0


def test_pass_at_n_is_the_unbiased_estimator():
    rng = np.random.default_rng(0)
    for n, k in ((5, 1), (6, 3), (8, 4)):
        verdicts = list(rng.random(n) < 0.4)
        # brute force: the share of k-subsets of the n samples that contain a pass
        subsets = list(itertools.combinations(verdicts, k))
        exact = sum(any(s) for s in subsets) / len(subsets)
        value, used = pass_at_n([verdicts, verdicts], k)
        assert used == 2 and value == pytest.approx(exact)
        # a sample Lean did not answer is a failed sample, not a dropped one
        with_missing = verdicts[:-1] + [None]
        subsets = list(itertools.combinations([bool(v) for v in with_missing], k))
        assert pass_at_n([with_missing], k)[0] == pytest.approx(sum(any(s) for s in subsets) / len(subsets))
    assert pass_at_n([[None, None]], 2) == (None, 0)  # nothing measured
    with pytest.raises(ValueError, match="fewer than 2"):
        pass_at_n([[True]], 2)


def test_compile_at_k_and_pass_at_n_are_shares_of_all_statements():
    """Four statements: one passes on the first attempt, two fail, one times out (no verdict). The
    seed's compile@1 is 1/4 (a share of all statements), not 1/3 over the answered ones; with two
    samples each, the timed-out statement's missing verdicts are failed samples: pass@2 = 2/4."""
    curve = compile_at_k([["passed"], ["failed"], ["failed"], ["timeout"]], ks=(1,))
    assert curve.values[1] == pytest.approx(0.25) and curve.undetermined[1] == 1
    value, used = pass_at_n([[True, False], [False, True], [False, False], [None, None]], 2)
    assert used == 4 and value == pytest.approx(0.5)
    assert compile_at_k([["timeout"], ["unavailable"]], ks=(1,)).values[1] is None  # no verdict at all


def test_compile_at_k_iterations_and_goals():
    statuses = [
        ["failed", "passed"],
        ["passed"],
        ["malformed", "failed", "failed", "failed", "failed"],
        ["failed", "unavailable"],
        ["failed", "failed", "failed", "passed"],
    ]
    result = compile_at_k(statuses)
    assert result.values[1] == pytest.approx(1 / 5)
    assert result.values[2] == pytest.approx(2 / 5) and result.undetermined[2] == 1  # the unavailable turn
    assert result.values[5] == pytest.approx(3 / 5)
    assert all(result.values[k] <= result.values[k + 1] for k in range(1, 5))
    assert mean_iters_solved([2, 1, 5, 2, 4], [True, True, False, None, True]) == pytest.approx(7 / 3)
    assert mean_iters_solved([3], [False]) is None
    goal = "x : ℝ\nh₀ : x = 2\n⊢ x ^ 2 = 4"
    assert goal_exact_match([goal.replace("\n", "\n  "), "⊢ False", None], [goal, "⊢ True", goal]) == (0.5, 2)
    assert faithfulness_code(["theorem a : 1 = 1 := by sorry"], ["theorem b : 1 = 1 := rfl"]) == 1.0
    assert well_formed_rate(["theorem a : 1 = 1 := by sorry", "garbage ("]) == 0.5
    assert tokens_per_sec(300, 1.5) == 200.0
    with pytest.raises(ValueError):
        tokens_per_sec(10, 0.0)


def test_resource_monitor_and_report(tmp_path, rl_lean_errors):
    with ResourceMonitor(interval_s=0.01) as monitor:
        block = np.ones((2048, 4096), dtype=np.float64)  # 64 MiB
        block.sum()
    assert monitor.result["peak_memory_bytes"] >= block.nbytes and monitor.result["device"].startswith("cpu")
    report = AutoformalizerReport(
        well_formed=0.5,
        compile_at_k=compile_at_k([["failed", "passed"], ["passed"]]).values,
        pass_at_n={1: None},
        error_breakdown=error_breakdown(rl_lean_errors),
        resources=monitor.result,
        missing={"pass@1": "no statement had a Lean verdict (replay has no recording)"},
    )
    path = write_report(report, tmp_path)
    text = path.read_text()
    assert (tmp_path / "compile_at_k.png").stat().st_size > 1000 and (tmp_path / "error_breakdown.png").is_file()
    assert (
        "| compile@2 | 1.000 |" in text
        and "| pass@1 (unbiased, first turn) | n/a |" in text
        and "no statement had a Lean verdict" in text
    )
    assert json.loads((tmp_path / "metrics.json").read_text())["well_formed"] == 0.5


def test_error_breakdown_is_one_failure_mode_per_unsolved_problem(rl_lean_errors):
    """The design's breakdown: why each unsolved problem ended unsolved (its last attempt's first
    error), not every error message of every turn (a problem with five failing turns of ten errors
    each weighed fifty times more than one that failed once)."""
    from autoformalizer.typecheck import CheckStatus, StatementCheck
    from leanloop.lean.types import LeanMessage

    def text(message) -> str:
        return message["data"] if isinstance(message, dict) else str(message)

    def failed(messages) -> StatementCheck:
        return StatementCheck(
            CheckStatus.FAILED,
            "theorem t : True := by sorry",
            messages=[LeanMessage("error", text(m)) for m in messages],
        )

    errors = list(rl_lean_errors)[:12]
    last = [
        failed(errors[:10]),
        failed(errors[10:12]),
        None,
        StatementCheck(CheckStatus.REJECTED, "theorem t : True := by native_decide"),
        StatementCheck(CheckStatus.TIMEOUT, "theorem t : True := by sorry"),
    ]
    modes = failure_modes(last)
    assert sum(modes.values()) == 5 and modes["malformed"] == 1 and modes["rejected"] == 1
    assert modes["no_verdict"] == 1  # a timed-out last attempt is no verdict, not a rejection
    assert sum(modes[c] for c in ERROR_CATEGORIES) == 2  # the seed's five categories count Lean's errors only
    assert modes[classify_error(text(errors[0]))] >= 1
    assert sum(error_breakdown(errors).values()) == 12  # the old count: every message


def test_tokens_per_second_leaves_lean_time_out():
    import time as clock

    from autoformalizer.evaluate import LeanClock

    class SlowChecker:
        def check_many(self, statements, headers):
            clock.sleep(0.05)
            return ["checked"] * len(statements)

    lean = LeanClock(SlowChecker())
    began = clock.perf_counter()
    assert lean.check_many(["a", "b"], [None, None]) == ["checked", "checked"]
    lean.check_many(["c"], [None])
    assert lean.seconds >= 0.1 and lean.seconds == pytest.approx(clock.perf_counter() - began, abs=0.02)
