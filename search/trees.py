"""LeanTree-format proof trees (NanoProof App. H) and how they are built from traced steps.

A tree's nodes are factorized proof states (one goal, or the goals that share a metavariable) and
its edges tactic applications: a node's ``tactic`` turned its goals into its ``children`` (none: the
tactic closed them). Every node stores ``size`` (tactics in its subtree: the proof's length) and
``depth`` (tactics on the longest path to the end: what the critic predicts, Section 3.3).

``build_tree`` rebuilds a tree from one theorem's LeanDojo steps ``(state_before, tactic,
state_after)``: it splits each state into goals, finds the open node the tactic acted on (the first
goal of ``state_before``), and takes the goals of ``state_after`` minus the untouched rest as its
children. Anything it cannot place is a ``DropReason``, never a guessed edge.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from search.goals import Goal, group_by_metavariables, node_exact_key, node_text, normalize_tactic, parse_state

TREE_SCHEMA_VERSION = 1


class DropReason(str, enum.Enum):
    UNPARSABLE_STATE = "unparsable_state"  # a state that does not read as Lean goals
    ROOT_NOT_ONE_GOAL = "root_not_one_goal"  # the first step starts from several goal groups
    TACTIC_ON_UNKNOWN_GOAL = "tactic_on_unknown_goal"  # e.g. a nested `by` inside a term: its goal is no open node
    TACTIC_CHANGED_SEVERAL_GOALS = "tactic_changed_several_goals"  # `<;>`, `all_goals`, `swap`: not one goal's edge
    UNSOLVED_GOALS_LEFT = "unsolved_goals_left"  # the trace ends with open goals (a partial trace)
    SORRY = "sorry"  # the recorded proof is `sorry` (the miniF2F statements in the trace)


@dataclass
class TreeNode:
    goals: tuple[Goal, ...]
    tactic: str | None = None
    children: list["TreeNode"] = field(default_factory=list)
    size: int = 0
    depth: int = 0

    @property
    def key(self) -> str:
        return node_exact_key(self.goals)

    @property
    def state(self) -> str:
        return node_text(self.goals)

    @property
    def closed(self) -> bool:
        """True when the subtree is a whole proof (every node has a tactic)."""
        return self.tactic is not None and all(c.closed for c in self.children)

    def nodes(self) -> Iterator["TreeNode"]:
        yield self
        for child in self.children:
            yield from child.nodes()

    def measure(self) -> "TreeNode":
        """Fill ``size`` and ``depth`` bottom-up; returns self."""
        for child in self.children:
            child.measure()
        self.size = (1 if self.tactic is not None else 0) + sum(c.size for c in self.children)
        self.depth = (1 + max((c.depth for c in self.children), default=0)) if self.tactic is not None else 0
        return self

    def to_dict(self) -> dict[str, Any]:
        return {
            "goals": [g.text for g in self.goals],
            "tactic": self.tactic,
            "size": self.size,
            "depth": self.depth,
            "children": [c.to_dict() for c in self.children],
        }

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> "TreeNode":
        from search.goals import parse_goal

        return cls(
            goals=tuple(parse_goal(text) for text in row["goals"]),
            tactic=row.get("tactic"),
            children=[cls.from_dict(c) for c in row.get("children", [])],
            size=int(row.get("size", 0)),
            depth=int(row.get("depth", 0)),
        )


@dataclass(frozen=True)
class Transition:
    """One recorded tactic application on one factorized state: what the replay environment answers."""

    state: str  # node_text of the goals the tactic acted on
    tactic: str
    result: tuple[str, ...]  # node_text of each resulting group, in order

    @property
    def key(self) -> tuple[str, str]:
        return node_exact_key(_parse_node(self.state)), normalize_tactic(self.tactic)


def _parse_node(text: str) -> tuple[Goal, ...]:
    return tuple(parse_state(text))


@dataclass
class BuildResult:
    tree: TreeNode | None
    drop: DropReason | None
    transitions: list[Transition]
    detail: str = ""
    nested_steps: int = 0
    """Steps inside a nested ``by`` block of an earlier tactic's term: part of that tactic's text,
    so not edges of the tree (LeanDojo traces them separately)."""


def build_tree(steps: Iterable[dict[str, Any]]) -> BuildResult:
    """One theorem's steps (any order; ``tactic_idx`` orders them) -> its tree, or why not.

    The transitions matched before a failure are returned either way: they are real Lean steps
    that the replay environment can answer."""
    steps = sorted(steps, key=lambda s: s["tactic_idx"])
    transitions: list[Transition] = []
    if any(s["tactic"].strip() == "sorry" for s in steps):
        return BuildResult(None, DropReason.SORRY, transitions)
    try:
        parsed = [
            (group_by_metavariables(parse_state(s["state_before"])), parse_state(s["state_after"])) for s in steps
        ]
    except ValueError as error:
        return BuildResult(None, DropReason.UNPARSABLE_STATE, transitions, str(error)[:200])
    if not parsed or len(parsed[0][0]) != 1:
        return BuildResult(None, DropReason.ROOT_NOT_ONE_GOAL, transitions)
    root = TreeNode(parsed[0][0][0])
    open_nodes: list[TreeNode] = [root]
    applied: list[str] = []
    nested = 0
    for step, (before, after) in zip(steps, parsed):
        focus = node_exact_key(before[0])
        node = next((n for n in open_nodes if n.key == focus), None)
        if node is None and _inside_nested_by(step["tactic"], applied):
            nested += 1
            continue
        if node is None:
            return BuildResult(
                None,
                DropReason.TACTIC_ON_UNKNOWN_GOAL,
                transitions,
                f"step {step['tactic_idx']}: {step['tactic'][:80]!r}",
            )
        rest = [g.exact_key for group in before[1:] for g in group]
        kept = [g.exact_key for g in after[len(after) - len(rest) :]] if rest else []
        if len(after) < len(rest) or kept != rest:
            return BuildResult(
                None,
                DropReason.TACTIC_CHANGED_SEVERAL_GOALS,
                transitions,
                f"step {step['tactic_idx']}: {step['tactic'][:80]!r}",
            )
        new_groups = group_by_metavariables(after[: len(after) - len(rest)])
        node.tactic = step["tactic"]
        applied.append(node.tactic)
        node.children = [TreeNode(group) for group in new_groups]
        transitions.append(Transition(node.state, node.tactic, tuple(node_text(g) for g in new_groups)))
        index = open_nodes.index(node)
        open_nodes[index : index + 1] = node.children
    if open_nodes:
        return BuildResult(
            None, DropReason.UNSOLVED_GOALS_LEFT, transitions, f"{len(open_nodes)} open", nested_steps=nested
        )
    return BuildResult(root.measure(), None, transitions, nested_steps=nested)


def _inside_nested_by(tactic: str, applied: list[str]) -> bool:
    first_line = normalize_tactic(tactic.split("\n", 1)[0])
    return any("by" in earlier and first_line in normalize_tactic(earlier) for earlier in applied)


def tree_steps(tree: TreeNode) -> Iterator[tuple[TreeNode, str]]:
    """(node, tactic) for every edge: the supervised targets (the tactic, and the node's depth)."""
    for node in tree.nodes():
        if node.tactic is not None:
            yield node, node.tactic
