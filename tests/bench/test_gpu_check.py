"""``make gpu-check`` in its CPU form (the form CI runs): the report says what ran, what passed on the
CPU equivalents, and which GPU-only paths were skipped and why."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def cpu_only(monkeypatch, tmp_path):
    import bench.gpu_check as gpu_check

    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(tmp_path / "artifacts"))
    monkeypatch.setattr(gpu_check, "cuda", lambda: False)  # the CPU form, even on a GPU machine
    installed = gpu_check.installed  # and without vLLM, even in make test-vllm's venv (its tier runs them)
    monkeypatch.setattr(gpu_check, "installed", lambda module: module != "vllm" and installed(module))
    return gpu_check


def test_cpu_form_runs_the_cpu_equivalents_and_says_why_it_skipped_the_rest(cpu_only, tmp_path):
    out = tmp_path / "report.json"
    checks = [
        "step:pretrain",
        "flash_attn",
        "zero2",
        "zero3",
        "nf4_moe_policy",
        "qlora_rl",
        "vllm_ngram_fp8",
        "vllm_grpo_on_policy",
        "vllm_sleep_mode",
        "vllm_grpo_steps",
        "vllm_sample",
    ]
    returned = cpu_only.main(["--out", str(out), "--only", "[" + ",".join(checks) + "]"])
    report = json.loads(out.read_text())
    assert report == returned and report["cuda"] is False and report["device"].startswith("cpu")
    by_name = {c["name"]: c for c in report["checks"]}
    assert list(by_name) == checks  # only what was asked, in the script's order
    assert report["counts"] == {"passed": 3, "failed": 0, "skipped": 8}, by_name
    step = by_name["step:pretrain"]
    assert step["detail"]["config"] == "configs/pretrain/debug.yaml" and "cpu" in step["detail"]["args"]
    # the memory planner's figure for the step, beside the allocator's peak on a GPU (skipped here)
    memory = step["detail"]["memory"]
    assert 0 < memory["planned_gb"] < 5 and memory["measured_skipped"].startswith("no CUDA")
    for name in ("nf4_moe_policy", "qlora_rl"):  # NF4 on bitsandbytes' CPU kernels, adapters trained
        d = by_name[name]["detail"]
        assert d["device"] == "cpu" and d["nf4_layers"] > 0 and d["updated_tensors"] == d["trainable_tensors"] > 0
    assert by_name["flash_attn"]["reason"] == "flash-attn runs only on CUDA"
    assert by_name["vllm_ngram_fp8"]["reason"] == "CUDA-only: vLLM's CPU build has no FP8 kernels"
    assert by_name["vllm_sleep_mode"]["reason"] == "CUDA-only: vLLM's CPU platform refuses enable_sleep_mode"
    for name in ("vllm_grpo_on_policy", "vllm_grpo_steps", "vllm_sample"):  # on CPU where vLLM is (make test-vllm)
        assert by_name[name]["reason"].startswith("vLLM is not installed")
    assert all("DeepSpeedStrategy runs only on CUDA" in by_name[z]["reason"] for z in ("zero2", "zero3"))
    assert all(c["seconds"] >= 0 for c in report["checks"])


def test_every_stage_debug_config_is_a_check_and_unknown_names_are_refused(cpu_only):
    from leanloop.paths import REPO_ROOT

    names = {name for name, _, _ in cpu_only.debug_steps()}
    assert {"pretrain", "classifiers", "sft", "feedback_model", "rl", "autoformalizer", "autoformalizer_grpo"} <= names
    assert all((REPO_ROOT / "configs" / stage / "debug.yaml").is_file() for stage in names - {"autoformalizer_grpo"})
    with pytest.raises(ValueError, match=r"unknown checks \['step:nonexistent'\]"):
        cpu_only.main(["--only", "[step:nonexistent]"])
