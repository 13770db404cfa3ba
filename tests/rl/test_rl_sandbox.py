"""rl starts only where its candidates are confined: a strong sandbox within the machine's budget,
or the user's explicit ``reward_checks.sandbox: weak`` (one warning line, recorded in the manifest)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from leanloop.lean.local import LocalBackend, standin_config
from leanloop.lean.sandbox import SandboxConfig, probe
from leanloop.lean.standins.repl import prepare_repl_dir
from rl.config import RewardChecksConfig
from rl.module import GRPOModule


@pytest.fixture(scope="module")
def repl_root(tmp_path_factory, shared_data):
    return prepare_repl_dir(
        tmp_path_factory.mktemp("repl"), [shared_data / "lean_repl" / "repl_io_pairs.jsonl"], lean_version="v4.15.0"
    )


def _check(backend, sandbox="strong"):
    fake = SimpleNamespace(checks=RewardChecksConfig(sandbox=sandbox), results={})
    GRPOModule._check_sandbox(fake, backend)
    return fake.results.get("sandbox")


def test_rl_refuses_a_weak_sandbox_unless_told(repl_root, caplog):
    unconfined = LocalBackend(standin_config(repl_root, fresh_process=True, sandbox=SandboxConfig(kind="off")))
    with pytest.raises(ValueError, match="weaker than rl needs.*bubblewrap.*reward_checks.sandbox: weak"):
        _check(unconfined)
    recorded = _check(unconfined, "weak")
    assert recorded["weak"] is True and recorded["kind"] == "off"
    assert sum("WEAK sandbox" in r.message for r in caplog.records) == 1
    crowded = LocalBackend(standin_config(repl_root, fresh_process=True, workers=64))  # 64 x 16 GiB
    with pytest.raises(ValueError, match="64 workers x sandbox.memory_limit_mb"):
        _check(crowded)
    assert _check(LocalBackend(standin_config(repl_root))) is None  # shared REPLs: refused elsewhere


def test_rl_starts_in_a_strong_sandbox(repl_root):
    if probe("unshare", SandboxConfig()) is not None and probe("bwrap", SandboxConfig()) is not None:
        pytest.skip("neither bubblewrap nor user namespaces here")
    recorded = _check(LocalBackend(standin_config(repl_root, fresh_process=True)))
    assert recorded["strong"] is True and recorded["weak"] is False and recorded["kind"] in ("bwrap", "unshare")
