"""Nothing a candidate does outlives it: the candidate REPL's sandbox and limits, the header
pickle's hash check, and the stand-in REPL acting out a candidate's file writes."""

from __future__ import annotations

import asyncio
import shutil

import pytest

from leanloop.lean.local import LocalBackend, standin_config
from leanloop.lean.sandbox import SandboxConfig, SandboxUnavailable, choose_sandbox, file_hash, probe
from leanloop.lean.standins.repl import prepare_repl_dir
from leanloop.lean.types import ResponseStatus

VERSION = "v4.15.0"
# the recorded v4.15.0 sessions Mathlib/test/H20231215(_2): a header pickled, then restored in a
# new REPL before a theorem (what fresh_process does per candidate)
PICKLED_HEADER = "import Mathlib\nopen BigOperators\nopen Real\nopen Nat"
PICKLE_PATH = "test/H20231215.olean"


@pytest.fixture(scope="module")
def pickled_body(shared_data):
    from leanloop.lean.standins.repl import recorded_sessions

    for _, pairs in recorded_sessions([str(shared_data / "lean_repl" / "repl_io_pairs.jsonl")]):
        if pairs and pairs[0][0] == {"unpickleEnvFrom": PICKLE_PATH}:
            return pairs[1][0]["cmd"]
    raise AssertionError("no recorded session restoring the pickled header")


def test_the_sandbox_is_probed_and_confines():
    sandbox = choose_sandbox(SandboxConfig())
    assert sandbox.kind in ("bwrap", "landrun", "unshare")
    done = sandbox.run(["sh", "-c", "ulimit -v; ulimit -t"])
    assert done.stdout.split() == [str(16384 * 1024), "600"]  # the documented default limits
    with pytest.raises(ValueError):
        SandboxConfig(kind="docker")
    if shutil.which("landrun") is None:
        assert probe("landrun", SandboxConfig()) == "landrun is not installed"
        with pytest.raises(SandboxUnavailable, match="landrun: landrun is not installed.*bubblewrap"):
            choose_sandbox(SandboxConfig(kind="landrun"))


@pytest.mark.parametrize("kind", ["auto", "unshare", "off"])
def test_a_candidates_writes_do_not_reach_the_next_candidate(tmp_path, shared_data, pickled_body, kind):
    """The stand-in acts out a candidate's elaboration-time writes: the header pickle, the
    project's lean-toolchain, a file outside its temp dir. Confined, none lands; unconfined
    (``off``), the pickle's hash check rebuilds it before the next candidate restores it."""
    if kind == "unshare" and probe("unshare", SandboxConfig()) is not None:
        pytest.skip("user namespaces are not available here")
    root = tmp_path / "repl"
    escape = tmp_path / "escaped.txt"
    writes = [str(root / PICKLE_PATH), str(root / "lean-toolchain"), str(escape)]
    prepare_repl_dir(root, [shared_data / "lean_repl" / "repl_io_pairs.jsonl"], VERSION,
                     faults=[{"when": pickled_body[:40], "action": "write", "paths": writes, "text": "pwned"}])
    toolchain = (root / "lean-toolchain").read_text()
    backend = LocalBackend(standin_config(root, all_tactics=False, fresh_process=True,
                                          header_pickles={PICKLED_HEADER: PICKLE_PATH},
                                          sandbox=SandboxConfig(kind=kind)))
    program = PICKLED_HEADER + "\n" + pickled_body

    async def two_candidates():
        first = await backend.run(program, timeout=20)
        pickle_after_first = file_hash(root / PICKLE_PATH)
        second = await backend.run(program, timeout=20)
        return first, pickle_after_first, second

    first, pickle_after_first, second = asyncio.run(two_candidates())
    assert first.status is ResponseStatus.OK and second.status is ResponseStatus.OK, (first.detail, second.detail)
    assert second.messages == first.messages  # the next candidate's outcome is unchanged
    if kind == "off":
        assert (root / "lean-toolchain").read_text() == "pwned" and escape.read_text() == "pwned"
        assert (root / PICKLE_PATH).read_text() == "pwned"  # written again by the second candidate
    else:
        assert (root / "lean-toolchain").read_text() == toolchain
        assert (root / PICKLE_PATH).read_text() != "pwned" and pickle_after_first == file_hash(root / PICKLE_PATH)
        # bwrap: the whole file system is read-only; unshare protects only the paths the REPL reads
        assert escape.exists() is (kind == "unshare" or backend._sandbox.kind == "unshare")


@pytest.mark.lean
def test_real_lean_runs_under_the_sandbox_and_limits(shared_data):
    """Runs only with a real Lean + Mathlib project (LEANLOOP_LEAN_PROJECT): confined candidate
    REPLs (read-only file system, private TMPDIR, no network, 16 GiB address space, 600 s CPU)
    restore the pickled header and give the recorded Kimina errors for the same programs."""
    import json
    import os

    from leanloop.lean.local import LocalBackendConfig
    from leanloop.lean.replay import ReplayBackend

    if not os.environ.get("LEANLOOP_LEAN_PROJECT"):
        pytest.skip("set LEANLOOP_LEAN_PROJECT to a built Lean v4.15.0 + Mathlib project")
    rows = [json.loads(line) for line in (shared_data / "lean_repl" / "kimina_match_pairs.jsonl").open()]
    programs = [r["code"] for r in rows if not r["server_response"]["results"][0]["error"]][:2]
    backend = LocalBackend(LocalBackendConfig(project_dir=os.environ["LEANLOOP_LEAN_PROJECT"], workers=1,
                                              timeout=300, all_tactics=False, fresh_process=True))

    async def run_all():
        return [await backend.run(p) for p in programs]

    replay = ReplayBackend(["kimina_match"])
    for program, response in zip(programs, asyncio.run(run_all())):
        assert response.status is ResponseStatus.OK, response.detail
        assert [m.data for m in response.errors] == [m.data for m in replay.answer(program).errors]
    assert backend._sandbox is not None and backend._sandbox.kind != "off"


def test_a_spinning_candidate_spends_its_own_cpu_budget(tmp_path, shared_data, pickled_body):
    """RLIMIT_CPU ends a candidate that burns CPU (its failure, scored 0) long before the
    per-program timeout, and the next candidate is answered as usual."""
    root = prepare_repl_dir(tmp_path / "repl", [shared_data / "lean_repl" / "repl_io_pairs.jsonl"], VERSION,
                            faults=[{"when": "-- spin", "action": "spin"}])
    backend = LocalBackend(standin_config(root, all_tactics=False, fresh_process=True, crash_retries=0,
                                          header_pickles={PICKLED_HEADER: PICKLE_PATH},
                                          sandbox=SandboxConfig(cpu_limit_s=1)))
    program = PICKLED_HEADER + "\n" + pickled_body

    async def spinner_then_honest():
        import time

        began = time.perf_counter()
        spun = await backend.run(program + "\n-- spin\n", timeout=60)
        return spun, time.perf_counter() - began, await backend.run(program, timeout=60)

    spun, took, honest = asyncio.run(spinner_then_honest())
    assert spun.status is ResponseStatus.CANDIDATE_FAILURE and took < 30, (spun.status, took, spun.detail)
    assert honest.status is ResponseStatus.OK, honest.detail
