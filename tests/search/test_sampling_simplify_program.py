"""Gumbel-top-k and the first-token cap (Section 3.7); proof simplification and augmentation
(Section 3.5); a found proof rendered as one program and judged by the Verifier under `rl`."""

from __future__ import annotations

import gzip
import json
import random
import re
from collections import Counter

import pytest
import torch

from leanloop.lean.replay import ReplayBackend
from leanloop.lean.types import Category
from leanloop.lean.verifier import Verifier
from search.config import SearchConfig
from search.env import EnvGoal, EnvResult, EnvStatus, ProofEnv, ReplayEnv
from search.goals import parse_goal, parse_state
from search.mcts import Proposal, SearchBatch, start_searches
from search.program import FoundProof, proof_script, render_program, verify_found
from search.sampling import dedupe, first_token_plan, gumbel_top_k
from search.simplify import SimplifyStats, augment, simplify
from search.trees import TreeNode


def test_gumbel_top_k_samples_without_replacement_in_proportion():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.2, 0.0]))
    generator = torch.Generator().manual_seed(0)
    firsts = Counter()
    for _ in range(4000):
        drawn = gumbel_top_k(logits, 2, generator).tolist()
        assert len(set(drawn)) == 2 and 3 not in drawn  # distinct, never a zero-probability index
        firsts[drawn[0]] += 1
    # the first draw follows softmax(logits)
    assert abs(firsts[0] / 4000 - 0.5) < 0.03 and abs(firsts[2] / 4000 - 0.2) < 0.03
    assert gumbel_top_k(logits, 10).numel() == 3  # at most the finite ones


def test_first_token_cap_and_dedupe():
    logits = torch.tensor([10.0, 0.0, 0.0, 0.0, 0.0, 0.0])  # token 0 dominates
    plan = first_token_plan(logits, samples=6, cap=2, generator=torch.Generator().manual_seed(1))
    assert len(plan) == 6 and max(Counter(plan).values()) == 2 and len(set(plan)) == 3
    with pytest.raises(ValueError):
        first_token_plan(logits, 4, cap=0)
    assert dedupe([("simp", -1.0), (" simp ", -0.5), ("rfl", -2.0), ("", 0.0)]) == [("simp", -0.5), ("rfl", -2.0)]


def test_simplification_contracts_an_unneeded_edge_checked_in_the_env():
    root = parse_goal("x : ℕ\nh : 0 < x\n⊢ x ≠ 0")
    mid = parse_goal("x : ℕ\nh : 0 < x\n⊢ ¬x = 0")
    env = ReplayEnv(
        [
            {"state": root.text, "tactic": "show ¬x = 0", "result": [mid.text]},
            {"state": mid.text, "tactic": "omega", "result": []},
            {"state": root.text, "tactic": "omega", "result": []},
        ],
        roots={},
    )
    tree = TreeNode((root,), "show ¬x = 0", [TreeNode((mid,), "omega", [])]).measure()
    stats = SimplifyStats()
    simple = simplify(tree, env, stats)
    assert (simple.tactic, simple.children, simple.size) == ("omega", [], 1)
    assert stats.simplified == 1 and stats.edges_removed == 1 and stats.env_calls == 1
    # without the recorded shortcut nothing is contracted (unavailable is not "valid")
    env.table.pop((root.exact_key, "omega"))
    assert simplify(tree, env).size == 2


def test_augmentation_renames_consistently_and_keeps_dependencies():
    goal = parse_goal("α : Type u_1\ns : Set α\nx : α\nhx : x ∈ s\n⊢ x ∈ s ∪ s")
    for seed in range(20):
        (new,), tactic = augment((goal,), "exact Or.inl hx", random.Random(seed))
        names = [n for h in new.hypotheses for n in h.names]
        hx = next(h for h in new.hypotheses if h.type.endswith("∈ " + _name_of(new, "Set α")))
        assert tactic == f"exact Or.inl {hx.names[0]}"
        # a hypothesis comes after every hypothesis its type mentions
        for i, h in enumerate(new.hypotheses):
            for later in new.hypotheses[i + 1 :]:
                for n in later.names:
                    assert not re.search(rf"(?<![\w']){re.escape(n)}(?![\w'])", h.type)
        assert sorted(names) != ["hx", "s", "x"] or seed > 100  # renamed (α is a type: kept)


def _name_of(goal, type_):
    return next(h.names[0] for h in goal.hypotheses if h.type == type_)


def test_proof_script_bullets_several_goals():
    a, b, c = (parse_goal(f"⊢ {t}") for t in ("P ∧ Q", "P", "Q"))
    tree = TreeNode(
        (a,), "constructor", [TreeNode((b,), "exact hp", []), TreeNode((c,), "simp at hq\nexact hq", [])]
    ).measure()
    assert proof_script(tree) == "  constructor\n  · exact hp\n  · simp at hq\n      exact hq"


class _ScriptedSession(ProofEnv):
    """An interactive session that accepts the given tactic lines in order and says the last one
    closed the goal (what App. E warns about: the session's word is not the kernel's)."""

    def __init__(self, lines):
        super().__init__()
        self.lines = lines

    def _start(self, theorem):
        return EnvResult(EnvStatus.OK, [EnvGoal(tuple(parse_state("⊢ step 0")))])

    def _apply(self, goal, tactic, timeout):
        step = int(goal.goals[0].target.split()[-1])
        if tactic != self.lines[step]:
            return EnvResult(EnvStatus.ERROR, error="not the script")
        if step + 1 == len(self.lines):
            return EnvResult(EnvStatus.OK, [])
        return EnvResult(EnvStatus.OK, [EnvGoal(tuple(parse_state(f"⊢ step {step + 1}")))])


class _ScriptPolicy:
    def __init__(self, lines):
        self.lines = lines

    def propose(self, states, samples):
        return [Proposal([(self.lines[int(s.split()[-1])], 0.0)], 1.0) for s in states]


@pytest.fixture(scope="module")
def linear_proof_rows(shared_data):
    statements = {
        json.loads(l)["name"]: json.loads(l)
        for l in (shared_data / "statements" / "minif2f_deepseek_prover_v1.5.jsonl").open()
    }
    rows = [
        json.loads(l)
        for l in gzip.open(shared_data / "candidates" / "rl_lean_minif2f_test_compilation_rounds0-8.jsonl.gz")
    ]
    out = {}
    for row in rows:
        s = statements.get(row["name"])
        if not s or not row["code"].startswith(s["header"] + s["informal_prefix"] + s["formal_statement"]):
            continue
        proof = row["code"][len(s["header"] + s["informal_prefix"] + s["formal_statement"]) :]
        lines = proof.rstrip("\n").split("\n")
        # a linear proof: every line one tactic at the block's indentation
        if all(re.fullmatch(r"  [^ \n][^\n]*", l) for l in lines) and not row["compilation_result"].get(
            "system_errors"
        ):
            out.setdefault(bool(row["verdict_pass"]), (row, s, [l.strip() for l in lines]))
    return out


def test_found_proof_is_verified_as_one_program(linear_proof_rows):
    verifier = Verifier(ReplayBackend(["rl_lean"]), "rl")
    found = []
    for passed in (False, True):
        row, statement, lines = linear_proof_rows[passed]
        config = SearchConfig(simulations=200)  # widening re-asks goals the one-line script already answered
        searches, _ = start_searches([row["name"]], _ScriptedSession(lines), config)
        SearchBatch(searches, _ScriptPolicy(lines), config).run()
        assert searches[0].solved  # the interactive session said so
        tree = searches[0].proof()
        assert (
            render_program(
                tree, statement["formal_statement"], statement["header"], statement["informal_prefix"]
            ).strip()
            == row["code"].strip()
        )
        found.append(
            FoundProof(
                row["name"], tree, statement["formal_statement"], statement["header"], statement["informal_prefix"]
            )
        )
    found.append(FoundProof("traced_only", found[0].tree))  # no statement text: cannot be a program
    rejected, accepted_by_session, no_text = verify_found(verifier, found)
    # Lean's recorded errors for the whole program reject what the session accepted
    assert rejected.category is Category.INVALID
    # the recorded pass has no answer for the rl harness's composed program: unavailable, not valid
    assert accepted_by_session.category is Category.UNAVAILABLE
    assert no_text.category is Category.UNAVAILABLE and "no_statement_text" in no_text.reasons[0]
