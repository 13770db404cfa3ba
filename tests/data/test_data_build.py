"""The corpus build: reconciliation with the shipped records (full default config), the written
corpus, theorem-disjoint splits, resumability after a crash, and bad input rows.

Every expected count is computed here from the shipped files, never copied from the code under test.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from dataclasses import replace

import pytest

from data.build import build, fingerprint, parse_config, verify
from leanloop.lean.backends import make_backend
from data.config import SourceConfig
from data.corpus import SPLITS, split_of
from leanloop.corpus import load_corpus
from data.journal import JOURNAL, Journal, JournalMismatch
from leanloop.lean.acceptance import BENCHMARK_HEADER
from leanloop.lean.acceptance import reasons as R
from data.reconcile import reconcile
from data.sources import item_id, load_candidates
from leanloop.lean.recordings import normalize_program
from leanloop.lean.types import LeanBackend, LeanResponse, ResponseStatus
from leanloop.paths import REPO_ROOT

RL_LEAN = "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz"


@pytest.fixture(scope="module")
def default_config():
    return parse_config(["--config", str(REPO_ROOT / "configs/data/default.yaml")])


@pytest.fixture(scope="module")
def backend(default_config):
    replay = make_backend(default_config.lean.backend)
    replay.index  # load the recordings once for the module
    return replay


@pytest.fixture(scope="module")
def rl_rows(shared_data):
    with gzip.open(shared_data / RL_LEAN, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


class Counting(LeanBackend):
    """Real replay answers; remembers every program it was asked about."""

    def __init__(self, inner):
        self.inner, self.name, self.asked = inner, inner.name, []

    async def run(self, program: str, timeout: float | None = None) -> LeanResponse:
        self.asked.append(program)
        return await self.inner.run(program, timeout)


def test_default_corpus_reconciles_with_shipped_records(default_config, backend, rl_rows, tmp_path):
    items = load_candidates(default_config, BENCHMARK_HEADER)
    journal = Journal(tmp_path / JOURNAL, fingerprint(default_config, BENCHMARK_HEADER))
    done, verified, _ = verify(default_config, items, journal, backend=backend, progress=False)
    report = reconcile(items, {k: v[0] for k, v in done.items()})

    rl = report["rl_lean"]
    passes = sum(r["verdict_pass"] for r in rl_rows)
    system = sum(bool(r["compilation_result"].get("system_errors")) for r in rl_rows)
    distinct = len({(r["name"], normalize_program(r["code"])) for r in rl_rows})
    assert rl["rows"] == len(rl_rows) == 2196
    assert (
        (rl["recorded"]["pass"], rl["recorded"]["fail"], rl["recorded"]["fail_system_error"])
        == (passes, len(rl_rows) - passes, system)
        == (900, 1296, 68)
    )
    assert (rl["unique"], rl["duplicates"], rl["input_errors"]) == (distinct, len(rl_rows) - distinct, 0)
    assert sum(sum(cells.values()) for cells in rl["matrix"].values()) == rl["rows"]
    assert rl["unexplained"] == 0 and rl["conflicting_duplicates"] == 0
    assert rl["agree"] + sum(rl["explained"].values()) == rl["rows"]
    # every recorded pass is valid; the timeouts are the system errors; nothing else differs
    assert rl["matrix"]["pass"] == {"valid": passes}
    assert rl["matrix"]["system_error"] == {"timeout": system} and rl["explained"] == {R.LEAN_TIMEOUT: system}

    # the published Kimina proofs: no recorded Lean answer exists for any of them -> unavailable
    for source in ("kimina_preview", "kimina_72b_additional"):
        r = report[source]
        assert r["unexplained"] == 0 and r["agree"] == 0
        assert set(r["explained"]) <= {R.NO_RECORDING, R.HEADER_MISMATCH}
        programs = [c.program for c in items.candidates if c.source == source]
        assert r["explained"].get(R.NO_RECORDING, 0) + r["explained"].get(R.HEADER_MISMATCH, 0) == len(programs)
        assert not any(backend.lookup(p) for p in programs)
    for r in report.values():
        assert set(r["explained"]) <= set(R.DESCRIPTIONS)
    assert verified == len(items.candidates)


@pytest.fixture(scope="module")
def debug_build(tmp_path_factory, backend):
    import os

    root = tmp_path_factory.mktemp("artifacts")
    os.environ["LEANLOOP_ARTIFACTS"] = str(root)
    try:
        config = parse_config(["--config", str(REPO_ROOT / "configs/data/debug.yaml"), "--run", "dbg"])
        result = build(config, backend=backend, progress=False, quiet=True)
        corpus = load_corpus(result.run_dir)
    finally:
        del os.environ["LEANLOOP_ARTIFACTS"]
    return config, result, corpus


def test_debug_build_writes_a_loadable_corpus(debug_build, rl_rows):
    config, result, corpus = debug_build
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["stage"] == "data" and (result.run_dir / "config.yaml").is_file()
    assert set(corpus.column_names) >= {
        "program",
        "name",
        "split",
        "category",
        "label",
        "first_error",
        "messages",
        "tactics",
        "reference_trace",
        "source",
        "prover",
        "verify_time",
    }
    categories = Counter(corpus["category"])
    assert dict(categories) == manifest["counts"]["category"]
    assert manifest["counts"]["input_rows"] == len(corpus) + manifest["counts"]["duplicates"]
    assert manifest["backend"]["kind"] == "replay" and manifest["lean_versions"].get("v4.9.0-rc1")
    # the labels say which rule checked the statement: the collection profile checks none
    assert manifest["policy"]["profile"] == "collection" and manifest["policy"]["statement_rule"] == "none"
    assert manifest["git"]["rev"] and manifest["inputs"]["source:rl_lean"]["hash"].startswith("sha256:")
    # the labels are the recorded ones for the RL-Lean slice
    by_program = {normalize_program(r["code"]): r for r in rl_rows[:300]}
    for row in corpus:
        if row["source"] == "rl_lean" and row["label"] is not None:
            assert row["label"] == by_program[row["program"]]["verdict_pass"]
        if row["category"] == "invalid":
            assert row["first_error"] and any(m["severity"] == "error" for m in row["messages"])
            assert row["reference_trace"] and row["trace_kind"] == "errors_only"
            first = row["first_error"].splitlines()[0]
            assert first in row["reference_trace"]
        if row["category"] == "valid":
            assert row["label"] is True and row["verify_time"] > 0


def test_splits_are_theorem_disjoint(debug_build):
    _, _, corpus = debug_build
    seen = defaultdict(set)
    for name, split in zip(corpus["name"], corpus["split"]):
        seen[name].add(split)
    assert all(len(s) == 1 for s in seen.values())
    assert {next(iter(s)) for s in seen.values()} == set(SPLITS)
    config = debug_build[0]
    names = sorted(seen)
    assert [split_of(n, config.splits) for n in names] == [split_of(n, config.splits) for n in names]
    salted = replace(config.splits, salt="other")
    assert [split_of(n, salted) for n in names] != [split_of(n, config.splits) for n in names]


def test_killed_build_resumes_without_loss_or_rework(tmp_path, monkeypatch, backend):
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(tmp_path))
    config = parse_config(
        ["--config", str(REPO_ROOT / "configs/data/debug.yaml"), "--run", "crash", "--lean.concurrency", "4"]
    )
    config.sources = [replace(s, limit=60 if s.name == "rl_lean" else 4) for s in config.sources]
    items = load_candidates(config, BENCHMARK_HEADER)
    ids = {c.program: c.id for c in items.candidates}

    first = Counting(backend)
    finished = []

    def crash(item, outcome):
        finished.append(item)
        if len(finished) == 25:
            raise RuntimeError("injected crash")

    with pytest.raises(RuntimeError, match="injected crash"):
        build(config, backend=first, progress=False, on_item=crash, quiet=True)
    journal_path = tmp_path / "data" / "crash" / JOURNAL
    journaled = {json.loads(line)["id"] for line in journal_path.read_text().splitlines()[1:]}
    assert set(finished) <= journaled and len(journaled) < len(items.candidates)
    with open(journal_path, "a") as handle:  # the process died mid-write
        handle.write('{"id": "torn')

    second = Counting(backend)
    result = build(config, backend=second, progress=False, quiet=True)
    redone = {ids[p] for p in second.asked}
    assert not redone & journaled  # nothing finished was verified again
    assert redone | journaled == set(ids.values())  # nothing lost
    assert result.resumed == len(journaled) and result.verified_now == len(items.candidates) - len(journaled)

    clean = build(replace(config, run="clean"), backend=backend, progress=False, quiet=True)
    resumed_rows = {r["id"]: (r["category"], r["first_error"]) for r in load_corpus(result.run_dir)}
    clean_rows = {r["id"]: (r["category"], r["first_error"]) for r in load_corpus(clean.run_dir)}
    assert resumed_rows == clean_rows

    with pytest.raises(JournalMismatch):
        build(replace(config, lean=replace(config.lean, profile="rl")), backend=backend, progress=False, quiet=True)


def test_bad_input_rows(tmp_path, monkeypatch, backend, rl_rows, shared_data, capsys):
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(tmp_path / "artifacts"))
    statements = {
        r["name"]: r for r in map(json.loads, open(shared_data / "statements/minif2f_deepseek_prover_v1.5.jsonl"))
    }
    good = next(r for r in rl_rows if r["verdict_pass"])
    failing = next(r for r in rl_rows if not r["verdict_pass"] and not r["compilation_result"].get("system_errors"))
    s = statements[failing["name"]]
    statement = s["informal_prefix"] + s["formal_statement"]
    assert failing["code"].startswith(s["header"] + statement.rstrip("\n"))
    body = failing["code"][len(s["header"] + statement.rstrip("\n")) :]
    lines = [
        json.dumps({"name": good["name"], "code": good["code"]}).encode(),  # 1 ok
        b'{"name": "x", "code": ',  # 2 malformed
        b'{"name": "x", "code": "theorem x : True := trivial \xff"}',  # 3 not UTF-8
        b"[1, 2, 3]",  # 4 not an object
        json.dumps({"name": "", "code": good["code"]}).encode(),  # 5 empty name
        json.dumps({"name": "mathd_algebra_478"}).encode(),  # 6 no program
        json.dumps({"name": "not_a_minif2f_name", "proof": "  simp"}).encode(),  # 7 no statement
        json.dumps({"name": failing["name"], "statement": statement, "proof": body}).encode(),  # 8 rebuilt
        json.dumps({"name": "huge", "code": good["code"] + "\n-- " + "x" * 1_100_000}).encode(),  # 9 input limit
        json.dumps({"name": good["name"], "code": good["code"] + "\n-- " + "x" * 300_000}).encode(),  # 10 policy limit
        json.dumps({"name": good["name"], "code": good["code"] + "\n\n"}).encode(),  # 11 duplicate
        json.dumps({"name": "x", "code": 5}).encode(),  # 12 not text
    ]
    path = tmp_path / "candidates.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    config = parse_config(["--config", str(REPO_ROOT / "configs/data/debug.yaml"), "--run", "bad"])
    config.sources = [SourceConfig(path=str(path), name="mixed", program_field="code")]
    result = build(config, backend=backend, progress=False)
    printed = capsys.readouterr().out
    rows = {r["source_row"]: r for r in load_corpus(result.run_dir)}
    assert set(rows) == set(range(1, 13)) - {11}
    errors = {n: rows[n]["reasons"][0] for n in rows if rows[n]["category"] == "input_error"}
    assert set(errors) == {2, 3, 4, 5, 6, 7, 9, 12}
    for n, words in {
        2: "malformed JSON",
        3: "UTF-8",
        4: "expected an object",
        5: "name",
        6: "no program",
        7: "no statement",
        9: "input limit",
        12: "expected text",
    }.items():
        assert words in errors[n], errors[n]
    assert rows[1]["category"] == "valid" and rows[1]["duplicates"] == 1
    assert rows[8]["category"] == "invalid" and rows[8]["program"] == normalize_program(failing["code"])
    assert rows[10]["category"] == "precheck_rejected" and R.code_of(rows[10]["reasons"][0]) == R.TOO_LONG
    assert rows[10]["label"] is None  # LLF Section 3: rejected before compilation = not labelled (was False)
    assert (rows[1]["label"], rows[8]["label"]) == (True, False)
    assert result.counts["input_rows"] == 12 and result.counts["duplicates"] == 1
    assert result.counts["input_errors"] == 8
    assert "12 input rows" in printed and "8 input errors" in printed and "1 duplicates" in printed


def test_parquet_source_reads_like_jsonl(tmp_path, rl_rows):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = rl_rows[:20]
    pq.write_table(
        pa.Table.from_pylist([{"name": r["name"], "code": r["code"], "verdict_pass": r["verdict_pass"]} for r in rows]),
        tmp_path / "c.parquet",
    )
    (tmp_path / "c.jsonl").write_text(
        "\n".join(json.dumps({"name": r["name"], "code": r["code"], "verdict_pass": r["verdict_pass"]}) for r in rows)
    )
    config = parse_config(["--config", str(REPO_ROOT / "configs/data/debug.yaml")])
    sets = []
    for file in ("c.parquet", "c.jsonl"):
        config.sources = [
            SourceConfig(
                path=str(tmp_path / file), name="s", program_field="code", recorded_verdict_field="verdict_pass"
            )
        ]
        sets.append(load_candidates(config, BENCHMARK_HEADER))
    assert [(c.id, c.recorded) for c in sets[0].candidates] == [(c.id, c.recorded) for c in sets[1].candidates]
    assert len(sets[0].candidates) + len(sets[0].duplicates) == 20
    assert sets[0].candidates[0].id == item_id(rows[0]["name"], normalize_program(rows[0]["code"]))


def test_full_reference_trace_where_lean_gave_tactic_records(tmp_path, monkeypatch, backend):
    """A real REPL recording with tactic records (and no imports, so the benchmark header is empty)."""
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(tmp_path / "artifacts"))
    recorded = [
        (program, recs[0].response)
        for program, recs in backend.index
        if recs[0].response.tactics and "theorem h " in program and "import" not in program
    ]
    program, response = recorded[0]
    (tmp_path / "c.jsonl").write_text(json.dumps({"name": "h", "program": program}) + "\n")
    config = parse_config(["--config", str(REPO_ROOT / "configs/data/debug.yaml"), "--run", "traces"])
    config.sources = [SourceConfig(path=str(tmp_path / "c.jsonl"), name="repl")]
    config.header = ""
    config.statements = []
    result = build(config, backend=backend, progress=False, quiet=True)
    (row,) = list(load_corpus(result.run_dir))
    assert row["category"] == "valid" and row["trace_kind"] == "full"
    assert len(row["tactics"]) == len(response.tactics)
    assert response.tactics[0].goals.splitlines()[-1] in row["reference_trace"]
    assert row["lean_version"] == response.lean_version


class SlowFirstTime(Counting):
    """Real replay answers, except that the first attempt at each program times out (as a loaded
    Lean pool can): the second attempt gets the recorded answer."""

    async def run(self, program: str, timeout: float | None = None) -> LeanResponse:
        first = program not in self.asked
        self.asked.append(program)
        if first:
            return LeanResponse(ResponseStatus.TIMEOUT, detail="timed out (first attempt)")
        return await self.inner.run(program, timeout)


def test_timeout_retry_gives_a_timed_out_candidate_another_attempt(tmp_path, monkeypatch, backend):
    """LLF's pool comparison retries a timeout once (data.timeout_retries: 1); off, the timeout stays."""
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(tmp_path / "artifacts"))
    outcomes = {}
    for retries in (0, 1):
        config = parse_config(
            [
                "--config",
                str(REPO_ROOT / "configs/data/debug.yaml"),
                "--run",
                f"retry{retries}",
                "--timeout_retries",
                str(retries),
            ]
        )
        slow = SlowFirstTime(backend)
        corpus = load_corpus(build(config, backend=slow, progress=False, quiet=True).run_dir)
        outcomes[retries] = Counter(r["category"] for r in corpus)
        asked = Counter(slow.asked)
        assert set(asked.values()) == ({1} if retries == 0 else {2})
    config = parse_config(["--config", str(REPO_ROOT / "configs/data/debug.yaml"), "--run", "plain"])
    plain = Counter(
        r["category"] for r in load_corpus(build(config, backend=backend, progress=False, quiet=True).run_dir)
    )
    assert (
        set(outcomes[0]) <= {"timeout", "input_error", "precheck_rejected"}
        and outcomes[0]["timeout"] > plain["timeout"]
    )
    assert outcomes[1] == plain and plain["valid"] + plain["invalid"] > 0  # the second attempt got the answers
    assert fingerprint(parse_config(["--config", str(REPO_ROOT / "configs/data/debug.yaml")]), "h") != fingerprint(
        parse_config(["--config", str(REPO_ROOT / "configs/data/debug.yaml"), "--timeout_retries", "1"]), "h"
    )
