"""make bench-search in --smoke mode: it runs both modes on the same work and reports the ratio; the
synthetic-policy mode (``--policy noisy``) prints search vs sampling at a fixed call budget."""

from __future__ import annotations

import re


def test_bench_search_smoke(search_data, capsys, monkeypatch):
    from bench.search import main

    _as_default_run(search_data, monkeypatch)
    assert main(["--smoke", "true"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"solved 4/4", out)  # the oracle over the replay environment
    rows = re.findall(r"^(one search at a time|\d+ searches batched)\s+(\d+)\s+(\d+)", out, flags=re.M)
    # the same expansions in both modes; env calls depend on how many sampled tactics were distinct,
    # and the two modes draw their samples in a different order
    assert len(rows) == 2 and rows[0][1] == rows[1][1] and all(int(r[2]) > 0 for r in rows)
    assert re.search(r"batched vs one at a time: [\d.]+x expansions/s wall, [\d.]+x CPU", out)


def _as_default_run(search_data, monkeypatch):
    import shutil

    root = search_data.parent.parent
    if not (root / "search_data" / "default").exists():
        shutil.copytree(search_data, root / "search_data" / "default")
    monkeypatch.setenv("LEANLOOP_ARTIFACTS", str(root))


def test_bench_search_noisy_policy_smoke(search_data, capsys, monkeypatch):
    from bench.search import main

    _as_default_run(search_data, monkeypatch)
    assert main(["--smoke", "true", "--policy", "noisy"]) == 0
    out = capsys.readouterr().out
    rows = re.findall(
        r"^\s*([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)"
        r"\s+([\d.]+)\s+([-+\d.]+)\s+(met|MISSED)$",
        out,
        flags=re.M,
    )
    assert len(rows) == 4 and "held-out theorems" in out  # 2 settings, without and with repeats
    for p, q, rate, repeats, budget, search, fixed, equal, calls, margin, target in rows:
        assert 0 <= float(search) <= 12 and 0 <= float(fixed) <= 12 and 0 <= float(equal) <= 12
        assert 0 < float(calls) <= int(budget)  # the search keeps to its call budget
        assert float(margin) == float(search) - float(fixed) and (target == "met") == (float(margin) >= 0)
    assert re.search(r"held-out targets met: \d+/\d+", out)


def test_synthetic_policy_and_dead_end_environment(search_data):
    from search.env import EnvGoal, ReplayEnv
    from search.goals import parse_state
    from search.synthetic import DeadEndEnv, NoisyPolicy

    replay = ReplayEnv.from_run(search_data)  # its own call counter
    goal = EnvGoal(tuple(parse_state(replay.roots[next(iter(replay.roots))])))
    env = DeadEndEnv(replay, dead_end_rate=0.5, seed=1)
    wrong = sorted({t for ts in replay.by_state.values() for t in ts})[:40]
    answers = [env.apply(goal, t) for t in wrong if t not in replay.recorded_tactics(goal.text)]
    again = [env.apply(goal, t) for t in wrong if t not in replay.recorded_tactics(goal.text)]
    assert [a.status for a in answers] == [a.status for a in again]  # deterministic per goal and tactic
    dead = [a for a in answers if a.ok]
    assert 0 < len(dead) < len(answers) and all(a.goals[0].key != goal.key for a in dead)
    assert all(env.apply(goal, t).ok for t in replay.recorded_tactics(goal.text))  # the recording still answers
    # p = 1, q = 1: the recorded tactic first every time; p = 0: never among the candidates
    sure = NoisyPolicy(env, p=1.0, q=1.0, k=8, seed=0).propose([goal.text], 8)[0]
    assert len(sure.tactics) == 8 and sure.tactics[0][0] in replay.recorded_tactics(goal.text)
    never = NoisyPolicy(env, p=0.0, q=1.0, k=8, seed=0).propose([goal.text] * 20, 8)
    assert not any(t in replay.recorded_tactics(goal.text) for proposal in never for t, _ in proposal.tactics)


def test_repeated_wrong_candidates_come_from_the_goal_s_own_skewed_pool(search_data):
    from collections import Counter

    from search.env import EnvGoal, ReplayEnv
    from search.goals import parse_state
    from search.synthetic import AUTOMATION, NoisyPolicy

    replay = ReplayEnv.from_run(search_data)
    goal = EnvGoal(tuple(parse_state(replay.roots[next(iter(replay.roots))])))
    right = set(replay.recorded_tactics(goal.text))

    def counts(policy):
        return Counter(t for proposal in policy.propose([goal.text] * 40, 8) for t, _ in proposal.tactics)

    plain = counts(NoisyPolicy(replay, p=0.6, q=1.0, seed=0))
    assert plain == counts(NoisyPolicy(replay, p=0.6, q=1.0, seed=0, repeats=0.5, pool_size=0))  # no pool: no draw
    assert max(n for t, n in plain.items() if t not in right) <= 6  # without repeats wrong tactics rarely repeat
    repeated = counts(NoisyPolicy(replay, p=0.6, q=1.0, seed=0, repeats=0.5))
    top, n = max(((t, n) for t, n in repeated.items() if t not in right), key=lambda item: item[1])
    assert top.split()[0] in AUTOMATION and n > sum(repeated[t] for t in right)  # the most frequent is wrong
    # the pool is the goal's and the seed's: another stream (sampling's) sees the same repeats
    other = counts(NoisyPolicy(replay, p=0.6, q=1.0, seed=0, repeats=0.5, stream=1000))
    assert max(other, key=lambda t: (t not in right, other[t])) == top


def test_sampling_does_not_depend_on_the_search_s_settings(search_data):
    from search.config import SearchConfig
    from search.env import ReplayEnv

    from bench.search import noisy_table

    replay = ReplayEnv.from_run(search_data)
    names = sorted(replay.roots)[:6]
    rows = [
        noisy_table(
            replay, names, [(0.6, 1.0, 0.3)], [16], 1, config=SearchConfig(candidate_order=order), repeats=[0.5]
        )[0]
        for order in ("rank", "frequency")
    ]
    assert rows[0]["search_calls"] != rows[1]["search_calls"]  # the searches differ
    assert rows[0]["sampling_fixed"] == rows[1]["sampling_fixed"]
