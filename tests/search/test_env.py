"""The proof environment: replay of recorded transitions, the HTTP pool, and lean-interact's real
client in proof-state mode against the stand-in REPL replaying recorded REPL sessions."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pandas as pd
import pytest

from search.env import EnvStatus, ReplayEnv
from search.goals import parse_state
from search.http_env import EnvPool, HttpEnv, HttpEnvConfig, serve


def test_replay_answers_recorded_steps_and_nothing_else(search_data, replay):
    row = pd.read_parquet(search_data / "final" / "transitions.parquet").iloc[0]
    goal = replay.start(row["state"]).goals[0]
    answer = replay.apply(goal, row["tactic"])
    assert answer.ok and [g.text for g in answer.goals] == [
        "\n\n".join(g.text for g in parse_state(t)) for t in row["result"]
    ]
    # whitespace in the tactic does not matter; a different tactic is unavailable, not an error
    assert replay.apply(goal, "  " + row["tactic"].replace(" ", "  ") + " ").ok
    other = replay.apply(goal, "exact foo_bar_baz")
    assert other.status is EnvStatus.UNAVAILABLE and not other.goals
    assert replay.start("theorem_nobody_recorded").status is EnvStatus.UNAVAILABLE
    assert replay.calls == 3


def test_http_pool_gives_the_same_answers(search_data, replay):
    rows = pd.read_parquet(search_data / "final" / "transitions.parquet").head(6).to_dict("records")
    server = serve(EnvPool([ReplayEnv.from_run(search_data), ReplayEnv.from_run(search_data)]))
    try:
        client = HttpEnv(HttpEnvConfig(url=f"http://127.0.0.1:{server.server_address[1]}"))
        starts = [client.start(r["state"]) for r in rows]
        answers = client.apply_many([(s.goals[0], r["tactic"]) for s, r in zip(starts, rows)])
        direct = [replay.apply(replay.start(r["state"]).goals[0], r["tactic"]) for r in rows]
        assert [[g.text for g in a.goals] for a in answers] == [[g.text for g in d.goals] for d in direct]
        assert all(a.ok for a in answers)
        assert client.apply(starts[0].goals[0], "exact nonsense").status is EnvStatus.UNAVAILABLE
        assert client.calls == len(rows) + 1
        client.close()
        malformed = urllib.request.Request(f"http://127.0.0.1:{server.server_address[1]}/apply", data=b'{"goal": "x"}')
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(malformed, timeout=10)
        assert refused.value.code == 400
    finally:
        server.shutdown()
    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    dead = HttpEnv(HttpEnvConfig(url=f"http://127.0.0.1:{free_port}", retries=0, timeout=1, http_slack_s=0))
    assert dead.start("x").status is EnvStatus.INFRA_ERROR


def test_repl_proof_state_mode_through_lean_interact(standin_env):
    # the recorded HEAD `assumption_proof` session
    start = standin_env.start("theorem aa (x : Nat) (h1 : x  = 2) : x = 2")
    assert start.ok and start.goals[0].text == "x : Nat\nh1 : x = 2\n⊢ x = 2"
    done = standin_env.apply(start.goals[0], "assumption")
    assert done.closed and standin_env.calls == 1
    # a step nobody recorded is unavailable (the stand-in refuses), never a verdict
    assert standin_env.apply(start.goals[0], "exact h1").status is EnvStatus.UNAVAILABLE


def test_repl_splits_goals_and_reports_lean_errors(standin_env):
    start = standin_env.start("theorem foo (x : Int) : x = x")
    split = standin_env.apply(start.goals[0], "by_cases h : x < 0")
    assert split.ok and [g.goals[0].case for g in split.goals] == ["pos", "neg"]
    assert [g.goals[0].hypotheses[-1].type for g in split.goals] == ["x < 0", "¬x < 0"]
    wrong = standin_env.start("theorem my_theorem (x : Nat) : x = x")
    error = standin_env.apply(wrong.goals[0], "exact my_fake_premise")
    assert error.status is EnvStatus.ERROR and "my_fake_premise" in error.error


def test_repl_a_lean_error_reply_is_a_failed_tactic(standin_env):
    # repl test "unknown_tactic": `exat 42` -> {"message": "Lean error:\n<input>:1:1: unknown tactic"}, Lean's
    # verdict on the tactic (an error, as prm reads it), not the infrastructure's
    start = standin_env.start("def f : Nat")
    assert start.ok and start.goals[0].text == "⊢ Nat"
    failed = standin_env.apply(start.goals[0], "exat 42")
    assert failed.status is EnvStatus.ERROR and "unknown tactic" in failed.error


def test_repl_goals_from_before_a_restart_are_refused_and_caches_are_rebuilt(tmp_path, shared_data):
    # recorded HEAD session "Mathlib/test/H20231115": `import Mathlib.Tactic.Cases`, the example in its
    # environment, then `induction' x with x hx`. A statement that hangs makes lean-interact kill
    # the REPL; the new process numbers envs and proof states from 0 again
    from leanloop.lean.session import standin_session_config
    from leanloop.lean.standins.repl import prepare_repl_dir
    from search.repl_env import ReplEnv

    root = prepare_repl_dir(
        tmp_path,
        [shared_data / "lean_repl" / "repl_io_pairs.jsonl"],
        lean_version="v4.33.0-rc2",
        faults=[{"when": "hang_probe", "action": "hang"}],
    )
    env = ReplEnv(standin_session_config(root, lean_version="v4.33.0-rc2", timeout=2, parallel_elaboration=False))
    try:
        theorem = "import Mathlib.Tactic.Cases\nexample {x : Nat} : x + 1 > x"
        before = env.start(theorem)
        assert before.ok
        assert env.start("import Mathlib.Tactic.Cases\ntheorem hang_probe : True").status is EnvStatus.TIMEOUT
        stale = env.apply(before.goals[0], "induction' x with x hx")
        assert stale.status is EnvStatus.INFRA_ERROR and "restarted" in stale.error
        after = env.start(theorem)  # the header is elaborated again in the new REPL
        assert after.ok
        split = env.apply(after.goals[0], "induction' x with x hx")
        assert split.ok and [g.goals[0].case for g in split.goals] == ["zero", "succ"]
    finally:
        env.close()
