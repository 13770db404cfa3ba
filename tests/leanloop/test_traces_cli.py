"""The command-line contract: ``leanloop trace annotate|verdict``, ``leanloop metrics feedback|verdicts``,
``leanloop report``, on real recorded replies."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from leanloop.cli import main
from leanloop.metrics.feedback import feedback_scores
from leanloop.traces.annotate import annotate_reply


@pytest.fixture(scope="module")
def rl_rows(shared_data):
    with gzip.open(shared_data / "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz", "rt") as handle:
        return [json.loads(line) for line, _ in zip(handle, range(300))]


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_annotate_each_reply_format(capsys, tmp_path, shared_data, rl_rows):
    folder = shared_data / "lean_repl/repl_tests_HEAD_v4.33.0-rc2"
    cases = [((folder / "file2.lean").read_text(), (folder / "file2.expected.out").read_text())]  # REPL
    kimina = [json.loads(line) for line in open(shared_data / "lean_repl/kimina_match_pairs.jsonl")]
    # The recorded Kimina replies hold warnings only (the Goedel proofs compile): ask for warnings.
    pair = next(
        p for p in kimina if any((r.get("response") or {}).get("messages") for r in p["server_response"]["results"])
    )
    cases.append((pair["code"], json.dumps(pair["server_response"])))  # Kimina
    failing = next(row for row in rl_rows if row["compilation_result"]["errors"])
    cases.append((failing["code"], json.dumps(failing["compilation_result"])))  # RL-Lean compilation_result
    cases.append((failing["code"], json.dumps(failing)))  # a whole RL-Lean row
    for i, (program, reply) in enumerate(cases):
        warnings = i == 1
        code, out, err = _run(
            capsys,
            "trace",
            "annotate",
            _write(tmp_path / f"p{i}.lean", program),
            _write(tmp_path / f"r{i}.json", reply),
            "--include_warnings",
            str(warnings).lower(),
        )
        assert code == 0, err
        expected = annotate_reply(program, json.loads(reply), include_warnings=warnings)
        assert out.rstrip("\n") == expected.rstrip("\n") and "/- <feedback>" in out
        assert ("-- type: warning" in out) == warnings


def test_annotate_refuses_a_timeout(capsys, tmp_path, rl_rows, shared_data):
    timeout = next(row for row in rl_rows if row["compilation_result"].get("system_messages"))
    code, out, err = _run(
        capsys,
        "trace",
        "annotate",
        _write(tmp_path / "p.lean", timeout["code"]),
        _write(tmp_path / "r.json", json.dumps(timeout["compilation_result"])),
    )
    assert code == 1 and out == "" and "no answer" in err and "timeout" in err
    _write(tmp_path / "bad.json", "{not json")
    with pytest.raises(SystemExit, match="not JSON"):
        main(["trace", "annotate", str(tmp_path / "p.lean"), str(tmp_path / "bad.json")])
    with pytest.raises(SystemExit, match="does not exist"):
        main(["trace", "annotate", str(tmp_path / "missing.lean"), str(tmp_path / "bad.json")])


def test_verdict_contract(capsys, tmp_path, rl_rows):
    failing = next(row for row in rl_rows if row["compilation_result"]["errors"])
    passing = next(row for row in rl_rows if row["verdict_pass"])
    bad = _write(tmp_path / "bad.lean", annotate_reply(failing["code"], failing))
    good = _write(tmp_path / "good.lean", annotate_reply(passing["code"], passing))
    assert json.loads(_run(capsys, "trace", "verdict", bad)[1]) == {"valid": False, "reason": "error_message"}
    assert json.loads(_run(capsys, "trace", "verdict", good)[1]) == {"valid": True, "reason": "no_error"}
    assert json.loads(_run(capsys, "trace", "verdict", good, "--truncated", "true")[1]) == {
        "valid": False,
        "reason": "output_limit",
    }
    # The installed entry point, as checks outside the suite call it.
    result = subprocess.run(
        [sys.executable, "-m", "leanloop.cli", "trace", "verdict", bad], capture_output=True, text=True, check=True
    )
    assert json.loads(result.stdout) == {"valid": False, "reason": "error_message"}


def test_metrics_feedback_contract(capsys, tmp_path, rl_rows):
    failing = next(row for row in rl_rows if row["compilation_result"]["errors"])
    reference = annotate_reply(failing["code"], failing)
    ref = _write(tmp_path / "ref.lean", reference)
    copy = _write(tmp_path / "copy.lean", failing["code"])
    code, out, _ = _run(capsys, "metrics", "feedback", ref, ref)
    result = json.loads(out)
    assert code == 0 and {k: result[k] for k in ("block_f1", "anchored_block_f1", "token_f1", "error_agreement")} == {
        "block_f1": 1.0,
        "anchored_block_f1": 1.0,
        "token_f1": 1.0,
        "error_agreement": 1.0,
    }
    assert result["source_preservation"] in ("full", "prefix")
    result = json.loads(_run(capsys, "metrics", "feedback", ref, copy)[1])
    assert result["block_f1"] == feedback_scores(reference, failing["code"]).block_f1 == 0.0
    assert result["error_agreement"] == 0.0 and result["prediction_verdict"]["valid"] is True
    assert _run(capsys, "metrics", "feedback", _write(tmp_path / "blank.lean", "  \n"), ref)[0] == 1


def test_metrics_verdicts_and_report_contract(capsys, tmp_path, rl_rows):
    rows = [
        {
            "label": row["verdict_pass"] if not row["compilation_result"].get("system_messages") else None,
            "score": min(len(row["code"]) / 2000, 1.0),
            "group": row["name"],
        }
        for row in rl_rows
    ]
    path = _write(tmp_path / "predictions.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = _run(capsys, "metrics", "verdicts", path, "--resamples", "300", "--valid_fraction", "[0.1]")
    result = json.loads(out)
    assert code == 0, err
    for key in ("accuracy", "f1", "macro_f1", "mcc", "auroc"):
        low, high = result["intervals"][key]
        assert 0.0 <= low <= result[key] <= high <= 1.0 or key == "mcc"
    assert result["bootstrap"] == {"resamples": 300, "seed": 42, "confidence": 0.95, "unit": "group"}
    assert result["n"] + result["n_unlabelled"] == len(rows) and "0.1" in result["ppv_at"]
    code, out, _ = _run(capsys, "report", path, "--out", str(tmp_path / "report"), "--resamples", "200")
    assert code == 0 and (tmp_path / "report" / "report.md").is_file() and (tmp_path / "report" / "roc.png").is_file()
    assert _run(capsys, "metrics", "verdicts", _write(tmp_path / "empty.jsonl", ""))[0] == 1
