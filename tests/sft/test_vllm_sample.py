"""``make sft-sample`` on the real vLLM engine (vLLM's CPU build, ``make test-vllm``): the k attempts per
statement that pass@k counts come out as rows of the same form as the transformers backend's, and the
per-statement seeds make a rerun (any shard, batch or process) cover the same statements identically."""

from __future__ import annotations

import gc
import json

import pytest

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm

STATEMENTS = "shared://statements/minif2f_goedel_prover_v2_repaired.jsonl"


def config(model, run, backend, seed=7):
    from leanloop.training.models import ModelSpec
    from leanloop.vllm_engine import VLLMEngineConfig
    from sft.config import ProofGenerationConfig, SampleConfig, StatementsConfig
    from leanloop.prover.generation import SamplingConfig

    return SampleConfig(
        model=ModelSpec(name=str(model)),
        run=run,
        statements=StatementsConfig(path=STATEMENTS, limit=3),
        sampling=SamplingConfig(k=3, max_new_tokens=12, seed=seed),
        generation=ProofGenerationConfig(
            backend=backend,
            statements_per_batch=3,
            vllm=VLLMEngineConfig(
                # a 256-token step budget would chunk these prefills: vLLM-CPU's seeded sampling
                # then fails ("CPU Generator does not use offset") unless start_engine avoids it
                max_model_len=1024,
                extra={"enforce_eager": True, "max_num_batched_tokens": 256},
            ),
        ),
    )


@pytest.fixture(scope="module")
def vllm_generator(vllm_model):
    from sft.sample import make_generator

    generator = make_generator(config(vllm_model, "x", "vllm"))  # what `make sft-sample` builds for backend vllm
    yield generator
    del generator
    gc.collect()


def rows(path):
    return [json.loads(line) for line in path.open(encoding="utf-8")]


def test_vllm_rows_have_the_transformers_rows_form_and_seeds_repeat(vllm_model, vllm_generator, artifacts):
    from leanloop.prover.generation import VLLMGenerator
    from sft.sample import run

    assert isinstance(vllm_generator[0], VLLMGenerator)
    hf = rows(run(config(vllm_model, "hf", "transformers")))
    first = rows(run(config(vllm_model, "v1", "vllm"), vllm_generator))
    again = rows(run(config(vllm_model, "v2", "vllm"), vllm_generator))
    other_seed = rows(run(config(vllm_model, "v3", "vllm", seed=8), vllm_generator))

    assert [(r["name"], r["attempt"]) for r in first] == [(r["name"], r["attempt"]) for r in hf]
    assert len({r["name"] for r in first}) == 3 and len(first) == 9
    for a, b in zip(first, hf):
        assert a.keys() == b.keys()
        assert all(type(a[k]) is type(b[k]) for k in a if a[k] is not None and b[k] is not None)
        for key in ("theorem", "header", "statement", "prover", "prover_hash", "sampling", "split", "source"):
            assert a[key] == b[key], key
        assert a["finish_reason"] in ("stop", "length") and 1 <= a["num_tokens"] <= 12
    assert [r["completion"] for r in again] == [r["completion"] for r in first]  # same seeds, same attempts
    assert [r["completion"] for r in other_seed] != [r["completion"] for r in first]
    assert len({r["completion"] for r in first if r["name"] == first[0]["name"]}) > 1  # k distinct draws
