"""The command-line contract, through the installed console script:

leanloop precheck PROGRAM.lean [--header HEADER.lean] [--profile rl|collection]  -> {ok, reasons}, exit 0
leanloop verify PROGRAM.lean --backend replay                                    -> {category, messages}
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

# the console script installed beside the interpreter running the tests (any venv, any checkout)
LEANLOOP = Path(sys.executable).parent / "leanloop"


def leanloop(*args: str) -> tuple[int, dict]:
    done = subprocess.run([str(LEANLOOP), *args], capture_output=True, text=True, timeout=120)
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, (done.stdout, done.stderr)  # exactly one JSON object
    return done.returncode, json.loads(lines[0])


@pytest.fixture(scope="module")
def programs(shared_data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("programs")
    with gzip.open(shared_data / "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz", "rt") as fh:
        rows = [json.loads(line) for line in fh]
    valid = next(r for r in rows if r["verdict_pass"])
    invalid = next(r for r in rows if not r["verdict_pass"] and not r["compilation_result"].get("system_errors"))
    files = {
        "valid": valid["code"],
        "invalid": invalid["code"],
        "sorry": valid["code"].replace("linarith", "sorry", 1),
        "native": valid["code"].replace("linarith", "native_decide", 1),
        "unrecorded": valid["code"] + "\n-- an edit nobody compiled",
        "nul": valid["code"].replace("linarith", "lin\0arith", 1),
    }
    paths = {}
    for key, text in files.items():
        paths[key] = folder / f"{key}.lean"
        paths[key].write_text(text, encoding="utf-8")
    paths["header"] = folder / "header.lean"
    paths["header"].write_text("import Mathlib\n", encoding="utf-8")
    return paths, valid, invalid


def test_precheck_contract(programs):
    paths, valid, _ = programs
    code, body = leanloop("precheck", str(paths["valid"]))
    assert code == 0 and body["ok"] is True and body["reasons"] == []
    code, body = leanloop("precheck", str(paths["sorry"]), "--profile", "collection")
    assert code == 0 and body["ok"] is False and any("sorry" in r for r in body["reasons"])
    # native_decide: allowed by the seed's collection list, refused by rl
    assert leanloop("precheck", str(paths["native"]))[1]["ok"] is True
    code, body = leanloop("precheck", str(paths["native"]), "--profile", "rl")
    assert code == 0 and body["ok"] is False and body["reasons"][0].startswith("native_decide")
    # a header file with other imports makes the import block mismatch
    code, body = leanloop("precheck", str(paths["valid"]), "--header", str(paths["header"]))
    assert code == 0 and body["ok"] is False and body["reasons"][0].startswith("header_mismatch")
    assert body["name"] == valid["name"]


def test_verify_contract(programs):
    paths, valid, invalid = programs
    code, body = leanloop("verify", str(paths["valid"]), "--backend", "replay")
    assert code == 0 and body["category"] == "valid" and body["label"] is True
    recorded = valid["compilation_result"]["warnings"]
    # the recording server numbered lines after the import lines; Lean's numbering counts them
    imports = len(re.match(r"(?:import [^\n]*\n)*", valid["code"]).group().splitlines())
    assert imports == 2
    assert [(m["data"], m["pos"]["line"]) for m in body["messages"]] == [
        (m["data"], m["pos"]["line"] + imports) for m in recorded
    ]
    code, body = leanloop("verify", str(paths["invalid"]), "--backend", "replay")
    assert body["category"] == "invalid" and body["first_error"] == invalid["compilation_result"]["errors"][0]["data"]
    assert any(m["severity"] == "error" for m in body["messages"])
    assert leanloop("verify", str(paths["sorry"]), "--backend", "replay")[1]["category"] == "precheck_rejected"
    code, body = leanloop("verify", str(paths["unrecorded"]), "--backend", "replay")
    assert code == 0 and body["category"] == "unavailable" and body["label"] is None and body["messages"] == []
    code, body = leanloop("verify", str(paths["nul"]), "--backend", "replay")  # never sent to Lean
    assert (
        code == 0
        and body["category"] == "input_error"
        and "NUL character (U+0000) in the program" in body["reasons"][0]
    )


def test_missing_file_is_a_usage_error(tmp_path):
    done = subprocess.run([str(LEANLOOP), "precheck", str(tmp_path / "nope.lean")], capture_output=True, text=True)
    assert done.returncode == 2 and "no such file" in done.stderr and done.stdout == ""
