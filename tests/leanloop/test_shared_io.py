"""The shared ways to name and read things: the artifact resolver, JSONL, the corpus reader, run_tool."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field

import pytest

from leanloop.artifacts import (
    ManifestError,
    Manifest,
    locate_run,
    resolve_artifact,
    resolve_model,
    resolve_path,
    resolve_run,
)
from leanloop.jsonl import JsonlError, numbered_jsonl, read_jsonl, write_jsonl
from leanloop.tool import RunExistsError, parse_config, run_tool


@pytest.fixture
def artifacts(tmp_path, monkeypatch):
    root = tmp_path / "artifacts"
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(root))
    return root


def _finished(root, stage, run, model=False):
    folder = root / stage / run
    (folder / "final").mkdir(parents=True)
    if model:
        (folder / "final" / "config.json").write_text("{}")
    Manifest(stage=stage, run=run).write(folder)
    return folder


def test_one_rule_for_runs_final_folders_and_plain_folders(artifacts, tmp_path):
    run = _finished(artifacts, "sft", "default", model=True)
    for ref in ("artifacts://sft/default", str(run), str(run / "final")):
        found = resolve_artifact(ref, "sft")
        assert (found.run, found.outputs, found.manifest["stage"]) == (run, run / "final", "sft")
    assert resolve_run("default", "sft") == run  # a bare name with its stage
    assert resolve_model("artifacts://sft/default", "sft") == run / "final"
    with pytest.raises(ManifestError, match="'sft' artifact, expected 'classifiers'"):
        resolve_artifact("artifacts://sft/default", "classifiers")
    plain = tmp_path / "checkpoint"
    plain.mkdir()
    assert resolve_artifact(plain).outputs == plain and resolve_artifact(plain).run is None
    with pytest.raises(ManifestError, match="not a run folder"):
        resolve_run(plain)
    with pytest.raises(FileNotFoundError, match="holds no model"):
        resolve_model(plain)
    # an unfinished run (no manifest) named by artifacts:// is located but refused when read
    (artifacts / "sft" / "half").mkdir(parents=True)
    assert locate_run("artifacts://sft/half") == artifacts / "sft" / "half"
    with pytest.raises(ManifestError, match="did not finish"):
        resolve_artifact("artifacts://sft/half")
    assert resolve_path("artifacts://x/y") == artifacts / "x" / "y"


def test_jsonl_round_trip_gz_and_bad_lines(tmp_path):
    rows = [{"name": "thm", "code": "by simp ∧"}, {"n": 2}]
    for name in ("rows.jsonl", "rows.jsonl.gz"):
        path = write_jsonl(tmp_path / name, rows)
        assert list(read_jsonl(path)) == rows and list(read_jsonl(path, limit=1)) == rows[:1]
    assert gzip.open(tmp_path / "rows.jsonl.gz", "rt").readline().startswith('{"name"')
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": 1}\n\n{oops\n')
    with pytest.raises(JsonlError, match=r"bad.jsonl:3: not JSON"):
        list(read_jsonl(bad))
    numbered = list(numbered_jsonl(bad, strict=False))
    assert numbered[0] == (1, {"a": 1}) and numbered[1][0] == 3 and isinstance(numbered[1][1], JsonlError)


def test_corpus_reader_checks_the_run_and_names_splits_one_way(artifacts):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from leanloop.corpus import corpus_splits, held_out_names, read_corpus

    folder = _finished(artifacts, "data", "mini")
    pq.write_table(
        pa.table(
            {
                "name": ["a", "b", "c", "c"],
                "split": ["train", "validation", "test", "test"],
                "label": [True, False, None, True],
            }
        ),
        folder / "final" / "corpus.parquet",
    )
    rows = read_corpus("artifacts://data/mini", ["name", "split"], splits=["valid", "test"])
    assert [r["split"] for r in rows] == ["valid", "test", "test"]  # "validation" read as "valid"
    assert corpus_splits(folder) == {"a": "train", "b": "valid", "c": "test"}
    assert held_out_names(folder / "final") == {"b", "c"}
    with pytest.raises(KeyError, match="lacks columns \\['program'\\]"):
        read_corpus(folder, ["program"])
    _finished(artifacts, "sft", "notdata")
    with pytest.raises(ManifestError, match="expected 'data'"):
        read_corpus("artifacts://sft/notdata")


def test_the_corpus_schema_is_written_once(artifacts):
    """COLUMNS, the pyarrow schema and the datasets Features are one schema; load_corpus reads a
    written corpus back as a datasets.Dataset with those features."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from leanloop.corpus import COLUMNS, arrow_schema, features, load_corpus

    assert tuple(arrow_schema().names) == COLUMNS == tuple(features())
    assert features()["messages"].feature["pos"]["line"].dtype == "int32"
    rows = [
        {name: None for name in COLUMNS}
        | {"id": "1", "name": "a", "split": "validation", "label": True, "reasons": [], "messages": [], "tactics": []}
    ]
    folder = _finished(artifacts, "data", "schema")
    pq.write_table(pa.Table.from_pylist(rows, schema=arrow_schema()), folder / "final" / "corpus.parquet")
    dataset = load_corpus("artifacts://data/schema", split="valid")
    assert dataset.features == features() and dataset[0]["name"] == "a" and len(load_corpus(folder)) == 1


@dataclass
class EchoConfig:
    run: str = "echo"
    words: list[str] = field(default_factory=list)


def test_run_tool_skips_refuses_and_writes_the_manifest_last(artifacts, tmp_path):
    seen = []

    def work(config, folder):
        assert not (folder / "manifest.json").exists()  # the old manifest is gone before any output is written
        (folder / "final").mkdir()
        (folder / "final" / "words.json").write_text(json.dumps(config.words))
        seen.append(config.words)
        return Manifest(stage="echo", run=config.run, counts={"words": len(config.words)}), "report"

    yaml = tmp_path / "echo.yaml"
    yaml.write_text("words: [a, b]\n")
    first = run_tool("echo", EchoConfig, work, ["--config", str(yaml)])
    assert not first.skipped and first.value == "report" and first.manifest["counts"] == {"words": 2}
    assert run_tool("echo", EchoConfig, work, ["--config", str(yaml)]).skipped and len(seen) == 1
    with pytest.raises(RunExistsError, match="different config"):
        run_tool("echo", EchoConfig, work, ["--config", str(yaml), "--words", "[c]"])
    again = run_tool("echo", EchoConfig, work, ["--config", str(yaml), "--words", "[c]", "--overwrite", "true"])
    assert json.loads((again.run_dir / "final" / "words.json").read_text()) == ["c"] and len(seen) == 2

    def crash(config, folder):
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        run_tool("echo", EchoConfig, crash, ["--config", str(yaml), "--overwrite", "true"])
    assert not (again.run_dir / "manifest.json").exists()  # a crashed run leaves no manifest behind


def test_parse_config_layers_files_and_dotted_overrides(tmp_path):
    one, two = tmp_path / "one.yaml", tmp_path / "two.yaml"
    one.write_text("run: r1\nwords: [x]\n")
    two.write_text("run: r2\n")
    config, resolved = parse_config(EchoConfig, ["--config", str(one), "--config", str(two), "--words", "[y, z]"])
    assert config == EchoConfig(run="r2", words=["y", "z"]) and "run: r2" in resolved and "config" not in resolved


def test_a_run_that_never_ran_names_its_make_target(artifacts):
    from leanloop.artifacts import ArtifactNotFoundError

    with pytest.raises(ArtifactNotFoundError, match="`make feedback-model`"):
        resolve_model("artifacts://feedback_model/default")
    with pytest.raises(FileNotFoundError, match="`make data`"):  # also a FileNotFoundError
        resolve_run("never_built", "data")
