"""Bad input to the data stage gives rows with reasons and the rest of the corpus builds: a row
whose name is not its program's theorem, a corrupt parquet source, a NUL character; resuming under
a changed config is one line on stderr and exit 2.

Programs are real RL-Lean candidates; their verdicts come from the replay backend (recorded Lean).
"""

from __future__ import annotations

import gzip
import json

import pytest

from data.build import build, main, parse_config
from data.config import SourceConfig
from leanloop.corpus import load_corpus
from data.journal import JOURNAL
from data.names import declared_theorems, name_mismatch
from leanloop.lean.types import LeanBackend, LeanResponse
from leanloop.paths import REPO_ROOT

RL_LEAN = "candidates/rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz"
DEBUG = str(REPO_ROOT / "configs/data/debug.yaml")


@pytest.fixture(scope="module")
def rl_rows(shared_data):
    with gzip.open(shared_data / RL_LEAN, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for _, line in zip(range(300), fh)]


@pytest.fixture(scope="module")
def backend():
    replay = parse_config(["--config", DEBUG]).lean.backend_instance()
    replay.index  # load the recordings once for the module
    return replay


def _config(tmp_path, monkeypatch, run, sources, *extra):
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(tmp_path / "artifacts"))
    config = parse_config(["--config", DEBUG, "--run", run, *extra])
    config.sources = sources
    return config


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_declared_theorem_names_follow_namespaces_root_and_comments():
    program = """import Mathlib
/-- theorem in_a_docstring : True := trivial -/
namespace Foo.Bar
-- lemma in_a_comment : True := trivial
theorem a : True := trivial
section
lemma b : True := trivial
end
protected theorem _root_.c : True := trivial
end Foo.Bar
noncomputable section
@[simp] theorem d : "theorem in_a_string" = "theorem in_a_string" := rfl
end
namespace E
mutual
theorem e : True := trivial
end
lemma f : True := trivial
end E
theorem LeanloopHarness.check_x : True := trivial
"""
    assert declared_theorems(program) == ["Foo.Bar.a", "Foo.Bar.b", "c", "d", "E.e", "E.f", "LeanloopHarness.check_x"]
    assert name_mismatch("Foo.Bar.a", program) is None and name_mismatch("_root_.c", program) is None
    assert "declares `Foo.Bar.a`, `Foo.Bar.b`, `c`, `d`, `E.e` (+1 more)" in name_mismatch("a", program)
    # the harness's names are never a candidate's theorem, in a row name or in a program
    assert "reserved namespace" in name_mismatch("LeanloopHarness.check_x", program)
    assert "declares no theorem" in name_mismatch("x", "def x : Nat := 1\nexample : True := trivial\n")


@pytest.mark.parametrize("profile", ["collection", "rl"])
def test_a_mislabeled_row_is_an_input_error_and_cannot_cross_splits(tmp_path, monkeypatch, backend, rl_rows, profile):
    """The issue's case: the same program in train under its real name and in test under another."""
    real = next(r for r in rl_rows if r["verdict_pass"])
    other = next(r for r in rl_rows if r["name"] != real["name"])
    rows = [
        {"name": real["name"], "code": real["code"]},
        {"name": other["name"], "code": real["code"]},  # the real program under another theorem's name
        {"name": other["name"], "code": other["code"]},
    ]
    source = SourceConfig(path=str(_write_jsonl(tmp_path / "c.jsonl", rows)), name="mixed", program_field="code")
    config = _config(tmp_path, monkeypatch, f"names-{profile}", [source], "--lean.profile", profile)
    result = build(config, backend=backend, progress=False, quiet=True)
    corpus = {r["source_row"]: r for r in load_corpus(result.run_dir)}
    assert corpus[2]["category"] == "input_error"
    assert corpus[2]["reasons"] == [f"the row names `{other['name']}` but the program declares `{real['name']}`"]
    assert corpus[1]["category"] != "input_error" and corpus[3]["category"] != "input_error"
    if profile == "collection":  # recorded Lean answers them (the rl harness composes new, unrecorded text)
        assert corpus[1]["category"] == "valid"
    splits_of_program: dict[str, set[str]] = {}
    for row in corpus.values():
        if row["category"] != "input_error":
            splits_of_program.setdefault(row["program"], set()).add(row["split"])
    assert all(len(s) == 1 for s in splits_of_program.values())
    assert result.counts["input_errors"] == 1 and result.counts["input_rows"] == 3


def test_a_corrupt_parquet_source_gives_input_error_rows_and_the_rest_builds(tmp_path, monkeypatch, backend, rl_rows):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"name": r["name"], "code": r["code"]} for r in rl_rows[:40]]
    whole = tmp_path / "whole.parquet"
    pq.write_table(pa.Table.from_pylist(rows), whole, row_group_size=10)
    data = whole.read_bytes()
    # damage the `code` pages of row group 2 (rows 21-30): the other groups stay readable
    column = pq.ParquetFile(whole).metadata.row_group(2).column(1)
    start = column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset
    end = start + column.total_compressed_size
    damaged = tmp_path / "damaged.parquet"
    damaged.write_bytes(data[:start] + b"\xab" * (end - start) + data[end:])
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(data[: len(data) // 2])
    good = _write_jsonl(tmp_path / "good.jsonl", rows[:5])
    sources = [
        SourceConfig(path=str(damaged), name="damaged", program_field="code"),
        SourceConfig(path=str(truncated), name="truncated", program_field="code"),
        SourceConfig(path=str(good), name="good", program_field="code"),
    ]
    config = _config(tmp_path, monkeypatch, "parquet", sources)
    result = build(config, backend=backend, progress=False, quiet=True)
    corpus = list(load_corpus(result.run_dir))
    errors = {(r["source"], r["source_row"]): r["reasons"][0] for r in corpus if r["category"] == "input_error"}
    assert sorted(n for s, n in errors if s == "damaged") == list(range(21, 31))
    assert all(errors[("damaged", n)].startswith("damaged.parquet: row group 2 unreadable (") for n in range(21, 31))
    assert [k for k in errors if k[0] == "truncated"] == [("truncated", 1)]
    assert "truncated.parquet is not a readable parquet file (ArrowInvalid: " in errors[("truncated", 1)]
    per_source = result.counts["per_source"]
    assert per_source["damaged"]["rows"] == 40 and per_source["damaged"]["input_error"] == 10
    # every readable row was read and judged: the damaged file's other 30 rows and the good source
    read = {(r["source"], r["source_row"]) for r in corpus if r["category"] != "input_error"}
    damaged_ok = {n for s, n in read if s == "damaged"}
    duplicates_of_damaged = per_source["damaged"].get("duplicate", 0)
    assert len(damaged_ok) + duplicates_of_damaged == 30 and not damaged_ok & set(range(21, 31))
    assert per_source["good"].get("input_error", 0) == 0 and per_source["good"]["rows"] == 5


def test_a_nul_character_is_an_input_error_before_lean(tmp_path, monkeypatch, backend, rl_rows):
    import pyarrow as pa
    import pyarrow.parquet as pq

    real = next(r for r in rl_rows if r["verdict_pass"])
    tail = real["code"].rstrip("\n")
    with_nul = tail[:-5] + "\0" + tail[-5:] + "\n"
    line = with_nul[: with_nul.index("\0")].count("\n") + 1
    jsonl = tmp_path / "c.jsonl"  # JSON carries NUL only escaped (\u0000); a raw NUL byte is malformed JSON
    jsonl.write_bytes(
        json.dumps({"name": real["name"], "code": with_nul}).encode()
        + b"\n"
        + b'{"name": "x", "code": "theorem x : True := \x00trivial"}\n'
        + json.dumps({"name": real["name"] + "\0", "code": real["code"]}).encode()
        + b"\n"
    )
    pq.write_table(
        pa.Table.from_pylist([{"name": real["name"], "code": with_nul}, {"name": real["name"], "code": real["code"]}]),
        tmp_path / "c.parquet",
    )
    asked: list[str] = []

    class Spy(LeanBackend):  # real replay answers; remembers what reached "Lean"
        name = backend.name

        async def run(self, program: str, timeout: float | None = None) -> LeanResponse:
            asked.append(program)
            return await backend.run(program, timeout)

    sources = [
        SourceConfig(path=str(jsonl), name="jsonl", program_field="code"),
        SourceConfig(path=str(tmp_path / "c.parquet"), name="parquet", program_field="code"),
    ]
    config = _config(tmp_path, monkeypatch, "nul", sources)
    result = build(config, backend=Spy(), progress=False, quiet=True)
    corpus = {(r["source"], r["source_row"]): r for r in load_corpus(result.run_dir)}
    for key in (("jsonl", 1), ("parquet", 1)):
        assert corpus[key]["category"] == "input_error"
        assert corpus[key]["reasons"][0].startswith(f"a NUL character (U+0000) in the program at line {line}, ")
        assert corpus[key]["program"] == with_nul  # kept, for whoever inspects the source
    assert "malformed JSON" in corpus[("jsonl", 2)]["reasons"][0]
    assert corpus[("jsonl", 3)]["reasons"][0].startswith("a NUL character (U+0000) in the name")
    assert corpus[("parquet", 2)]["category"] == "valid"
    assert asked and not any("\0" in p for p in asked)  # Lean never saw one


def test_resuming_with_a_changed_config_is_one_line_and_exit_2(tmp_path, monkeypatch, rl_rows, capsys):
    source = _write_jsonl(tmp_path / "c.jsonl", [{"name": r["name"], "code": r["code"]} for r in rl_rows[:2]])
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(tmp_path / "artifacts"))
    journal = tmp_path / "artifacts" / "data" / "changed" / JOURNAL
    journal.parent.mkdir(parents=True)
    journal.write_text(json.dumps({"journal": 1, "fingerprint": "an earlier configuration"}) + "\n")
    layer = tmp_path / "source.yaml"
    layer.write_text(json.dumps({"sources": [{"path": str(source), "name": "s", "program_field": "code"}]}))
    code = main(["--config", DEBUG, "--config", str(layer), "--run", "changed"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("data.build: ") and "--run NAME" in err and "--fresh true" in err
    assert journal.read_text().count("\n") == 1  # the earlier journal is untouched
    # a journal damaged in the middle (not a torn last line, which is cut off) is refused the same way
    journal.write_text(json.dumps({"journal": 1, "fingerprint": "x"}) + "\n{not json\n" + '{"id": "a"}\n')
    code = main(["--config", DEBUG, "--config", str(layer), "--run", "changed"])
    err = capsys.readouterr().err
    assert (
        code == 2 and err.count("\n") == 1 and "is damaged (" in err and ":2: not JSON" in err and "--fresh true" in err
    )
