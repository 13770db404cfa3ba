"""GRPO on the real vLLM engine in colocate mode (vLLM's CPU build, ``make test-vllm``), tied and untied
embeddings, through ``bench.gpu_check``'s own checks, each in a process of its own (a colocated engine
joins its process's torch.distributed world): after each weight sync vLLM's sampling log-probabilities
match the policy's, after an optimizer step they match the new policy and not the old one, and two
steps of configs/rl/debug.yaml keep every step's gap within the CPU tolerance. The gaps measured are
in docs/results/vllm.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_colocated_grpo_stays_on_policy_across_syncs_and_steps(tied, tmp_path):
    from bench.gpu_check import VLLM_LOGP_TOLERANCE
    from leanloop.paths import REPO_ROOT

    suffix = "" if tied else "_untied"
    checks = [f"vllm_grpo_on_policy{suffix}", f"vllm_grpo_steps{suffix}"]
    out = tmp_path / "report.json"
    env = {**os.environ, "LEANLOOP_ARTIFACTS": str(tmp_path / "artifacts")}
    done = subprocess.run(
        [sys.executable, "-m", "bench.gpu_check", "--only", f"[{','.join(checks)}]", "--out", str(out)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.is_file(), done.stderr[-3000:]
    report = {c["name"]: c for c in json.loads(out.read_text())["checks"]}
    print(json.dumps({name: c["detail"] for name, c in report.items()}, indent=1))  # the gaps, for the record
    for name in checks:
        assert report[name]["status"] == "passed", report[name]["reason"] + report[name]["detail"].get("traceback", "")
    on_policy = report[checks[0]]["detail"]
    assert on_policy["tied"] is tied and on_policy["tolerance"] == VLLM_LOGP_TOLERANCE["cpu"]
    assert on_policy["logp_gap_first_sync"]["tokens"] > 0 and on_policy["logp_gap_after_step"]["tokens"] > 0
    # the step moved the policy by far more than the engine is off it: the sync carried the step
    assert on_policy["logp_gap_to_the_pre_step_policy"]["mean"] > 10 * on_policy["logp_gap_after_step"]["mean"]
    steps = report[checks[1]]["detail"]["steps"]
    assert len(steps) == 2 and all(s["mean"] is not None and s["max"] is not None for s in steps)
