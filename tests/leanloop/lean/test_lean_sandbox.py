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
    sandbox = choose_sandbox(SandboxConfig(), cpu_limit_s=61)
    assert sandbox.kind in ("bwrap", "landrun", "unshare")
    done = sandbox.run(["sh", "-c", "ulimit -v; ulimit -t"])
    # the documented default budget: 16,384 MiB less the private directories (1,024 MiB /tmp and
    # 16 MiB each for /var/tmp, /dev/shm and HOME); CPU: the proof's timeout x cores, from the backend
    assert done.stdout.split() == [str((16384 - 1024 - 48) * 1024), "61"]
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
    prepare_repl_dir(
        root,
        [shared_data / "lean_repl" / "repl_io_pairs.jsonl"],
        VERSION,
        faults=[{"when": pickled_body[:40], "action": "write", "paths": writes, "text": "pwned"}],
    )
    toolchain = (root / "lean-toolchain").read_text()
    backend = LocalBackend(
        standin_config(
            root,
            all_tactics=False,
            fresh_process=True,
            header_pickles={PICKLED_HEADER: PICKLE_PATH},
            sandbox=SandboxConfig(kind=kind),
        )
    )
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
        # the file outside lies in the machine's /tmp, which each candidate gets a private copy of
        assert not escape.exists()


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
    backend = LocalBackend(
        LocalBackendConfig(
            project_dir=os.environ["LEANLOOP_LEAN_PROJECT"],
            workers=1,
            timeout=300,
            all_tactics=False,
            fresh_process=True,
        )
    )

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
    root = prepare_repl_dir(
        tmp_path / "repl",
        [shared_data / "lean_repl" / "repl_io_pairs.jsonl"],
        VERSION,
        faults=[{"when": "-- spin", "action": "spin"}],
    )
    backend = LocalBackend(
        standin_config(
            root,
            all_tactics=False,
            fresh_process=True,
            crash_retries=0,
            header_pickles={PICKLED_HEADER: PICKLE_PATH},
            sandbox=SandboxConfig(cpu_limit_s=1),
        )
    )
    program = PICKLED_HEADER + "\n" + pickled_body

    async def spinner_then_honest():
        import time

        began = time.perf_counter()
        spun = await backend.run(program + "\n-- spin\n", timeout=60)
        return spun, time.perf_counter() - began, await backend.run(program, timeout=60)

    spun, took, honest = asyncio.run(spinner_then_honest())
    assert spun.status is ResponseStatus.CANDIDATE_FAILURE and took < 30, (spun.status, took, spun.detail)
    assert honest.status is ResponseStatus.OK, honest.detail


STRONG = ["bwrap", "unshare"]


@pytest.mark.parametrize("kind", STRONG)
def test_each_sandbox_present_holds_against_the_round_5_probes(tmp_path, kind):
    """Per candidate: private /tmp, /var/tmp, /dev/shm and HOME (a later candidate never sees an
    earlier one's files), the environment reduced to an allow-list, its own PID namespace, a
    size-limited temp dir inside the memory budget, its own cores. Run on every mechanism present
    (bwrap where `.ci/run` installs it; unshare where user namespaces are allowed)."""
    import os

    from leanloop.lean.sandbox import strength

    if probe(kind, SandboxConfig(kind=kind)) is not None:
        pytest.skip(f"{kind}: {probe(kind, SandboxConfig(kind=kind))}")
    sandbox = choose_sandbox(SandboxConfig(kind=kind, tmp_limit_mb=2, memory_limit_mb=4096), [str(tmp_path)], 30)
    assert sandbox.strong and strength(sandbox) is None
    script = (
        'echo $TMPDIR; env | cut -d= -f1 | sort | tr "\\n" " "; echo; ls /proc | grep -c "^[0-9]"; '
        "dd if=/dev/zero of=/tmp/big bs=1M count=4 2>/dev/null && echo WROTE_4M || echo TMP_FULL; "
        "ulimit -v; grep Cpus_allowed_list /proc/self/status; echo x > " + str(tmp_path) + "/out || echo RO"
    )
    os.environ["LEANLOOP_SECRET_TOKEN"] = "do-not-leak"
    try:
        lines = sandbox.run(["sh", "-c", script], slot=1).stdout.splitlines()
    finally:
        del os.environ["LEANLOOP_SECRET_TOKEN"]
    assert lines[0] == "/tmp"
    assert "LEANLOOP_SECRET_TOKEN" not in lines[1] and set(lines[1].split()) <= {
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TMPDIR",
        "PWD",
        "SHLVL",
        "_",
    }
    assert int(lines[2]) <= 4  # its own PID namespace: not the trainer, not the neighbours
    assert lines[3] == "TMP_FULL" and lines[4] == str((4096 - 2 - 48) * 1024)
    if (os.cpu_count() or 1) > 1:
        assert lines[5].split()[-1] == "1"  # slot 1's core
    assert "RO" in lines[-1] and not (tmp_path / "out").exists()


def test_a_pool_whose_budgets_exceed_the_machine_is_refused():
    from leanloop.lean.sandbox import budget_error

    config = SandboxConfig(memory_limit_mb=16384)
    assert budget_error(config, 8, node_mb=64 * 1024, node_cores=16) is not None  # 8 x 16 GiB > 64 GiB
    assert budget_error(config, 4, node_mb=64 * 1024, node_cores=16) is None
    assert "cores" in budget_error(SandboxConfig(memory_limit_mb=2048, cores=4), 8, node_mb=10**6, node_cores=16)
    assert "null" in budget_error(SandboxConfig(memory_limit_mb=None), 1, node_mb=10**6, node_cores=16)
    with pytest.raises(ValueError, match="no address space"):
        SandboxConfig(memory_limit_mb=1000, tmp_limit_mb=1000)


def test_a_failure_after_the_program_killed_its_repl_is_charged_to_the_program(tmp_path, shared_data, pickled_body):
    """Round 5: the program crashes its REPL (a resource limit reached, or worse); the retry's
    header restore then fails before the program runs. That used to end ``infra_error`` (counted by
    the rl circuit breaker, so a policy could halt its own training); it is the program's failure."""
    root = tmp_path / "repl"
    faults = [
        {"when": PICKLE_PATH, "once": True, "action": "pass"},  # the first restore works
        {"when": pickled_body[:40], "action": "crash"},  # the program kills its REPL
        {"when": PICKLE_PATH, "action": "refuse", "message": "unpickle failed"},
    ]  # then restores fail
    prepare_repl_dir(root, [shared_data / "lean_repl" / "repl_io_pairs.jsonl"], VERSION, faults=faults)
    backend = LocalBackend(
        standin_config(
            root,
            all_tactics=False,
            fresh_process=True,
            header_pickles={PICKLED_HEADER: PICKLE_PATH},
            sandbox=SandboxConfig(kind="off"),
        )
    )
    response = asyncio.run(backend.run(PICKLED_HEADER + "\n" + pickled_body, timeout=20))
    assert response.status is ResponseStatus.CANDIDATE_FAILURE, response.detail
    assert "after the program had killed an earlier try" in response.detail
