"""``make prm-generate`` with ``backend: vllm`` on the real engine (vLLM's CPU build, ``make test-vllm``):
the paired-proof rows of the transformers backend, one per attempt, each parsed or given its reason."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm


def test_prm_generator_on_vllm_writes_the_transformers_rows(vllm_model, artifacts):
    from leanloop.paths import REPO_ROOT
    from prm.generate import main
    from prm.label import SAMPLES_FILE

    runs = {}
    for backend in ("transformers", "vllm"):
        assert (
            main(
                [
                    "--config",
                    str(REPO_ROOT / "configs/prm/generate/default.yaml"),
                    "--run",
                    backend,
                    "--backend",
                    backend,
                    "--model.name",
                    str(vllm_model),
                    "--statements.limit",
                    "2",
                    "--sampling.max_new_tokens",
                    "16",
                    "--vllm.max_model_len",
                    "1024",
                    "--vllm.extra",
                    '{"enforce_eager": true}',
                ]
            )
            == 0
        )
        folder = artifacts / "prm_generate" / backend
        runs[backend] = [json.loads(line) for line in (folder / "final" / SAMPLES_FILE).open(encoding="utf-8")]
    hf, vllm = runs["transformers"], runs["vllm"]
    assert [(r["name"], r["attempt"]) for r in vllm] == [(r["name"], r["attempt"]) for r in hf] and len(vllm) == 4
    for a, b in zip(vllm, hf):
        assert a.keys() == b.keys() and (a["statement"], a["header"]) == (b["statement"], b["header"])
        assert a["parse"].startswith("ok") or a["parse"] and a["finish_reason"] in ("stop", "length")
        assert 1 <= a["num_tokens"] <= 16
    manifest = json.loads((artifacts / "prm_generate" / "vllm" / "manifest.json").read_text())
    assert manifest["counts"]["completions"] == 4
