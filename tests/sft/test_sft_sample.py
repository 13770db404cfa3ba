"""Sampling with a tiny real Qwen3 writes candidate JSONL that the data stage reads and labels."""

from __future__ import annotations

import importlib.util
import json

import pytest

from data.build import build, parse_config
from data.config import DataConfig, SourceConfig
from leanloop.lean.backends import BackendConfig, ReplayBackendConfig
from data.sources import load_candidates
from leanloop.lean.recordings import normalize_program
from leanloop.lean.replay import ReplayBackend
from leanloop.artifacts import content_hash
from leanloop.paths import REPO_ROOT
from leanloop.training.models import ModelSpec
from sft.config import SampleConfig, StatementsConfig
from leanloop.prover.generation import SamplingConfig, VLLMGenerator
from leanloop.prover.prompt import PromptConfig
from sft.sample import run
from leanloop.prover.statements import read_statements
from leanloop.vllm_engine import VLLMEngineConfig

STATEMENTS = "shared://statements/minif2f_goedel_prover_v2_repaired.jsonl"


def _config(prover, name, style="raw"):
    return SampleConfig(
        model=ModelSpec(name=str(prover)),
        run=name,
        statements=StatementsConfig(path=STATEMENTS, limit=2),
        prompt=PromptConfig(style=style),
        sampling=SamplingConfig(k=2, max_new_tokens=3, seed=7),
    )


def test_samples_are_candidates_make_data_labels(tiny_prover, tiny_generator, artifacts):
    config = _config(tiny_prover, "fmt")
    target = run(config, tiny_generator)
    rows = [json.loads(line) for line in target.open(encoding="utf-8")]
    statements = read_statements(STATEMENTS).statements[:2]
    assert [(r["name"], r["attempt"]) for r in rows] == [(s.name, a) for s in statements for a in (0, 1)]
    prover = f"{tiny_prover}@{content_hash(tiny_prover / 'config.json')}"
    for row, statement in zip(rows, [s for s in statements for _ in (0, 1)]):
        assert row["prover"] == prover
        assert row["sampling"] == {"k": 2, "temperature": 1.0, "top_p": 0.95, "max_new_tokens": 3, "seed": 7}
        assert (row["header"], row["statement"]) == (statement.header, statement.statement)
        assert (row["program"] is None) == bool(row["extraction_reason"])
        if row["extraction"] == "continuation":  # raw prompt: the program continues the statement
            assert row["program"] == (statement.prompt + row["completion"]).rstrip()

    # the data stage's reader: every attempt is a candidate, or an input error when no program
    source = SourceConfig(path=str(target), name="samples", program_field="program", proof_field=None)
    read = load_candidates(DataConfig(sources=[source]), default_header="")
    assert len(read.candidates) + len(read.duplicates) + len(read.errors) == len(rows)
    programs = {normalize_program(r["program"]) for r in rows if r["program"]}
    assert {c.program for c in read.candidates} == programs
    assert {c.prover for c in read.candidates} == {prover}
    assert all("no program" in e.reason for e in read.errors)
    reasons = {r["extraction_reason"] for r in rows if r["program"] is None}
    assert all(any(f"(sampler: {why})" in e.reason for why in reasons) for e in read.errors)

    # the shipped data config labels them with the configured backend (replay: nothing recorded)
    data = parse_config(["--config", str(REPO_ROOT / "configs/data/sft_samples.yaml"), "--run", "labelled"])
    data.sources[0].path = str(target)
    data.backend = BackendConfig(kind="replay", replay=ReplayBackendConfig(sources=["rl_lean"]))
    result = build(data, progress=False, quiet=True)
    backend = ReplayBackend(["rl_lean"])
    expected_unavailable = sum(not backend.lookup(p) for p in programs)
    assert result.counts["category"].get("unavailable", 0) == expected_unavailable
    assert result.counts["category"].get("input_error", 0) == len(read.errors)


def test_chat_prompts_take_only_code_blocks(tiny_prover, tiny_generator, artifacts):
    target = run(_config(tiny_prover, "chat", style="chat"), tiny_generator)
    rows = [json.loads(line) for line in target.open(encoding="utf-8")]
    manifest = json.loads((target.parent.parent / "manifest.json").read_text())
    for row in rows:  # an untrained model writes no ```lean block: no program, and the reason says so
        if "```lean" not in row["completion"]:
            assert row["program"] is None and "code block" in row["extraction_reason"]
    assert manifest["counts"]["not_extracted"] == sum(r["program"] is None for r in rows)
    assert manifest["prompt"]["style"] == "chat"


def test_vllm_without_the_gpu_extra_fails_clearly():
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    with pytest.raises(ImportError, match=r"pip install -e '\.\[gpu\]'"):
        VLLMGenerator("Qwen/Qwen3-8B-Base", ["<|endoftext|>"], VLLMEngineConfig())
