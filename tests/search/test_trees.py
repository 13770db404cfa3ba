"""Goal parsing, cycle keys, metavariable groups, and the LeanTree trees built from the real
LeanDojo steps (make search-data)."""

from __future__ import annotations

import json

import pandas as pd

from leanloop.artifacts import read_manifest
from search.goals import group_by_metavariables, parse_goal, parse_state
from search.trees import DropReason, TreeNode, build_tree


def test_cycle_key_ignores_hypothesis_order_names_and_whitespace():
    a = parse_goal("x y : ℕ\nh : x < y\nh2 : 0 < x\n⊢ x + 1 ≤ y")
    b = parse_goal("x y : ℕ\nhpos : 0 < x\nhlt : x   <  y\n⊢ x + 1 ≤ y")
    c = parse_goal("x y : ℕ\nh : y < x\nh2 : 0 < x\n⊢ x + 1 ≤ y")  # a different hypothesis
    assert a.cycle_key == b.cycle_key and a.exact_key != b.exact_key
    assert a.cycle_key != c.cycle_key
    # the variables themselves may be renamed too
    d = parse_goal("m n : ℕ\nh : m < n\nh2 : 0 < m\n⊢ m + 1 ≤ n")
    assert d.cycle_key == a.cycle_key


def test_cycle_key_is_the_same_for_renamed_and_reordered_hypotheses_of_one_type():
    # two variables of one type, told apart only by how the other hypotheses use them: printed in
    # either order, under any names, the goal is the same
    printed = [
        "x y : ℕ\nhx : 0 < x\nhy : 1 < y\n⊢ x * y = y * x",
        "y x : ℕ\nhy : 1 < y\nhx : 0 < x\n⊢ x * y = y * x",
        "a b : ℕ\nh1 : 0 < a\nh2 : 1 < b\n⊢ a * b = b * a",
        "b a : ℕ\nh2 : 1 < b\nh1 : 0 < a\n⊢ a * b = b * a",
    ]
    assert len({parse_goal(text).cycle_key for text in printed}) == 1
    # swapping which variable is bounded by what is a different goal when the target is not symmetric
    left = parse_goal("x y : ℕ\nhx : 0 < x\nhy : 1 < y\n⊢ x - y = 0")
    right = parse_goal("x y : ℕ\nhx : 1 < x\nhy : 0 < y\n⊢ x - y = 0")
    assert left.cycle_key != right.cycle_key
    assert left.cycle_key == parse_goal("y x : ℕ\nhy : 1 < y\nhx : 0 < x\n⊢ x - y = 0").cycle_key


def test_states_split_into_goals_and_metavariables_group_them():
    goals = parse_state("case h\nx : ℕ\n⊢ x = ?a\n\ncase a\n⊢ ℕ\n\ncase b\nh : x\n  = 2\n⊢ 0 < ?a")
    assert [g.case for g in goals] == ["h", "a", "b"] and goals[2].hypotheses[0].type == "x\n  = 2"
    assert [len(g) for g in group_by_metavariables(goals)] == [2, 1]
    assert parse_state("no goals") == []


def test_tree_from_steps_matches_tactics_to_the_goal_they_changed():
    steps = [
        {
            "tactic_idx": 0,
            "tactic": "constructor",
            "state_before": "⊢ P ∧ Q",
            "state_after": "case left\n⊢ P\n\ncase right\n⊢ Q",
        },
        {
            "tactic_idx": 1,
            "tactic": "exact hp",
            "state_before": "case left\n⊢ P\n\ncase right\n⊢ Q",
            "state_after": "case right\n⊢ Q",
        },
        {"tactic_idx": 2, "tactic": "exact hq", "state_before": "case right\n⊢ Q", "state_after": "no goals"},
    ]
    result = build_tree(steps)
    tree = result.tree
    assert result.drop is None and (tree.size, tree.depth) == (3, 2)
    assert [c.tactic for c in tree.children] == ["exact hp", "exact hq"]
    assert TreeNode.from_dict(json.loads(json.dumps(tree.to_dict()))).to_dict() == tree.to_dict()
    assert build_tree(steps[:2]).drop is DropReason.UNSOLVED_GOALS_LEFT
    swapped = [steps[0], {**steps[1], "state_after": "case wrong\n⊢ R"}]
    assert build_tree(swapped).drop is DropReason.TACTIC_CHANGED_SEVERAL_GOALS


def test_search_data_run(search_data):
    manifest = read_manifest(search_data, stage="search_data")
    counts = manifest["counts"]
    assert counts["theorems"] == counts["trees"] + sum(counts["dropped"].values())
    assert counts["steps"] == 5895 and counts["trees"] > 1500 and counts["dropped"]["sorry"] == 18
    assert manifest["verified"] is False and manifest["inputs"]["steps"]["hash"].startswith("sha256:")
    splits = {s: pd.read_parquet(search_data / "final" / f"{s}.parquet") for s in ("train", "valid", "test")}
    names = [set(zip(f["file_path"], f["name"])) for f in splits.values()]
    assert not (names[0] & names[1] or names[0] & names[2] or names[1] & names[2])  # split by theorem
    row = splits["train"].iloc[0]
    tree = TreeNode.from_dict(json.loads(row["tree"]))
    assert not row["verified"] and tree.closed and tree.size == row["size"]
    # every node's size/depth are consistent with its children
    for node in tree.nodes():
        assert node.size == 1 + sum(c.size for c in node.children)
        assert node.depth == 1 + max((c.depth for c in node.children), default=0)


def test_search_data_manifest_says_which_trees_lean_re_executed(search_data):
    import json

    from search.build_data import _verified_note

    manifest = json.loads((search_data / "manifest.json").read_text())
    assert manifest["verified"] is False and "not re-executed" in manifest["verified_note"]
    assert "not re-executed" not in _verified_note(3, 3) and _verified_note(3, 1).startswith("1 of 3 trees re-executed")
