"""make prm-generate (sampling through the prover sampler, resumable shards) and make prm-label on
generated paired proofs (format rejections counted, prefix labels from recorded replies) and on the
embedded default (recorded RL-Lean first errors, splits by theorem)."""

from __future__ import annotations

import json

import pytest

from leanloop.artifacts import Manifest
from leanloop.prover.generation import Attempt, SamplingConfig
from leanloop.sharding import MergeRefused
from leanloop.training.models import ModelSpec
from prm import generate, label
from leanloop.prover.statements import StatementsConfig as StatementSet
from prm.config import GenerateConfig, LabelConfig, RecordedConfig
from prm.labelled_proofs import read_split
from leanloop.lean.backends import BackendConfig
from leanloop.lean.check import LeanConfig
from leanloop.lean.replay import ReplayBackendConfig


def _config(**overrides):
    options = dict(
        model=ModelSpec(name="qwen3-tiny"),
        run="t",
        statements=StatementSet(limit=3),
        sampling=SamplingConfig(k=2, max_new_tokens=4, attempts_per_batch=2),
        threads=1,
    )
    return GenerateConfig(**{**options, **overrides})


class Scripted:
    """A generator whose completions are fixed paired proofs (the shard logic under test, not the model)."""

    calls: list[str] = []

    def sample_batch(self, prompts, names, config):
        Scripted.calls.extend(names)
        text = "Step 1: Close the goal.\n```lean4\nlinarith\n```"
        return [[Attempt(text, "stop", 9), Attempt("no steps here", "stop", 3)]]


def test_generate_samples_with_the_real_sampler_and_records_parse_failures(artifacts):
    folder = generate.run(_config(statements=StatementSet(limit=1)), progress=False)
    rows = [json.loads(l) for l in (folder / "final" / "samples.jsonl").read_text().splitlines()]
    assert [r["attempt"] for r in rows] == [0, 1] and rows[0]["statement"].rstrip().endswith("by")
    # the header holds commands only (imports, options, opens); the docstring travels with its theorem
    assert rows[0]["header"].startswith("import") and "/--" not in rows[0]["header"]
    assert all(r["parse"] for r in rows)  # ok (n steps) or the rejection reason, never missing
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["counts"]["completions"] == 2


def test_a_real_generator_feeds_the_parser_labeller_and_reviewer(artifacts):
    """The paper path at tiny scale: a model writes the completions (the paper config's generator is
    a real model writing prose + tactics), and prm-label reads them through the same parser,
    labeller and default reviewer; a random tiny model writes no paired proof, so every completion
    is a counted rejection and nothing is labelled from it."""
    generate.run(_config(statements=StatementSet(limit=1), run="tinygen"), progress=False)
    config = LabelConfig(
        run="tinygen",
        recorded=None,
        generated="artifacts://prm_generate/tinygen",
        lean=LeanConfig(backend=BackendConfig(kind="replay", replay=ReplayBackendConfig(sources=["repl_io"]))),
    )
    folder = label.run(config, progress=False)
    manifest = json.loads((folder / "manifest.json").read_text())
    rejected = sum(v for k, v in manifest["counts"].items() if k.startswith("rejected:"))
    labelled = sum(v for k, v in manifest["counts"].items() if k.startswith("status:"))
    assert rejected + labelled == 2 and manifest["reviewer"] == "rules"


def test_generate_is_sharded_and_resumable(artifacts, monkeypatch):
    monkeypatch.setattr(generate, "_generator", lambda config: (Scripted(), None))
    monkeypatch.setattr(generate, "render_paired_prompt", lambda *a, **k: "prompt")
    Scripted.calls = []
    whole = generate.run(_config(run="whole"), progress=False)
    assert len(Scripted.calls) == 3
    first = generate.run(_config(shard="0/2"), progress=False)
    assert (
        first == artifacts / "prm_generate" / "t" / "shards" / "0-of-2" and not (first.parent.parent / "final").exists()
    )
    with pytest.raises(MergeRefused, match="shard 1/2 is missing"):
        generate.run(_config(merge_shards=2), progress=False)
    generate.run(_config(shard="1/2"), progress=False)
    assert len(Scripted.calls) == 6  # each statement sampled by the one shard that owns it
    folder = generate.run(_config(merge_shards=2), progress=False)
    rows = [json.loads(l) for l in (folder / "final" / "samples.jsonl").read_text().splitlines()]
    assert (folder / "final" / "samples.jsonl").read_bytes() == (whole / "final" / "samples.jsonl").read_bytes()
    assert len(rows) == 6 and [r["parse"] for r in rows[:2]] == ["ok (1 steps)", "text_outside_step"]
    generate.run(_config(shard="1/2"), progress=False)  # finished: nothing sampled again
    assert len(Scripted.calls) == 6
    with pytest.raises(Exception, match="another model"):
        generate.run(_config(sampling=SamplingConfig(k=3, max_new_tokens=4)), progress=False)
    with pytest.raises(Exception, match="another model"):
        generate.run(_config(shard="1/2", sampling=SamplingConfig(k=3, max_new_tokens=4)), progress=False)


def _samples_run(artifacts, rows):
    folder = artifacts / "prm_generate" / "hand"
    (folder / "final").mkdir(parents=True)
    (folder / "final" / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    Manifest(stage="prm_generate", run="hand").write(folder)
    return "artifacts://prm_generate/hand"


def test_label_generated_paired_proofs_by_prefix_compilation(artifacts):
    # tactics whose prefix programs were recorded by the Lean REPL's own tests (repl_io)
    good = "Step 1: Suppose h is a set of naturals.\n```lean4\nhave h : set Nat := by sorry\n```\nStep 2: Done.\n```lean4\ntrivial\n```"
    rows = [
        dict(
            name=f"true_{i}",
            theorem=None,
            attempt=0,
            header="",
            statement="example : True := by",
            completion=text,
            generator="hand",
        )
        for i, text in enumerate([good, "Step 1: no tactic"])
    ]
    config = LabelConfig(
        run="gen",
        recorded=None,
        generated=_samples_run(artifacts, rows),
        lean=LeanConfig(backend=BackendConfig(kind="replay", replay=ReplayBackendConfig(sources=["repl_io"]))),
    )
    folder = label.run(config, progress=False)
    records = [r for split in ("train", "valid", "test") for r in read_split(folder, split)]
    assert len(records) == 1 and records[0].labeller == "prefix" and records[0].lean_version  # from the recording
    assert records[0].labels == [False, False] and records[0].first_error == 0
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["counts"]["rejected:missing_tactic"] == 1 and manifest["reviewer"] == "rules"  # on by default
    assert records[0].reviewer[0]["verdict"] == "mathematical"  # not a parse error: the failure counts
    assert "First failures sorted" in (folder / "report.md").read_text()


def test_embedded_default_labels_split_by_theorem(artifacts):
    folder = label.run(LabelConfig(run="small", recorded=RecordedConfig(limit=120)), progress=False)
    splits = {s: read_split(folder, s) for s in ("train", "valid", "test")}
    names = {s: {r.name for r in records} for s, records in splits.items()}
    assert not names["train"] & names["test"] and not names["train"] & names["valid"]
    records = [r for rs in splits.values() for r in rs]
    assert len(records) == 120
    for r in records:
        if r.category == "valid":
            assert r.proof_label is True and all(r.labels)
        elif r.category in ("timeout", "infra_error", "unavailable"):
            assert all(l is None for l in r.labels)
        elif r.first_error is not None:
            assert r.labels == [True] * r.first_error + [False] * (len(r.labels) - r.first_error)
    report = (folder / "report.md").read_text()
    assert "tactic-level labels from recorded Lean output" in report and (folder / "first_error.png").is_file()
    assert "the recordings carry no prose" in report
    # the scripted reviewer sorted every located first failure; a parse error keeps no negative label
    manifest = json.loads((folder / "manifest.json").read_text())
    reviewed = {k: v for k, v in manifest["counts"].items() if k.startswith("reviewer:")}
    assert sum(reviewed.values()) == sum(r.first_error is not None for r in records) > 0
    for r in records:
        if r.reviewer and r.reviewer[0]["verdict"] != "mathematical":
            assert r.labels[r.first_error :] == [None] * (len(r.labels) - r.first_error)
