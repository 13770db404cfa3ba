"""Proof simplification and augmentation (NanoProof Section 3.5).

Simplification contracts an edge when the proof stays valid: where a goal's tactic leads to one goal
whose own tactic, applied directly to the first goal, gives exactly the same goals, the first tactic
was unnecessary. Every check is an environment call (nothing is assumed). Only simplified proofs
enter the replay buffer.

Augmentation rewrites a training step without changing its meaning: hypotheses renamed
consistently in the goal and the tactic, hypotheses shuffled (respecting dependencies: a hypothesis
stays after the ones its type mentions), the goals of a multi-goal node shuffled.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from search.env import EnvGoal, ProofEnv
from search.goals import Goal, Hypothesis
from search.trees import TreeNode


@dataclass
class SimplifyStats:
    proofs: int = 0
    simplified: int = 0
    edges_removed: int = 0
    env_calls: int = 0


def simplify(
    tree: TreeNode,
    env: ProofEnv,
    stats: SimplifyStats | None = None,
    timeout: float | None = None,
    live: dict[str, EnvGoal] | None = None,
) -> TreeNode:
    """A copy of ``tree`` with unnecessary edges contracted (checked in ``env``). ``live``: the
    environment's goals by key (a search's ``table``), for backends whose goals are live handles
    (REPL proof states); the replay environment answers by goal text alone."""
    live = live or {}
    stats = stats if stats is not None else SimplifyStats()
    before = tree.size

    def walk(node: TreeNode) -> TreeNode:
        node = TreeNode(node.goals, node.tactic, [walk(c) for c in node.children])
        while len(node.children) == 1 and node.children[0].tactic is not None:
            child = node.children[0]
            stats.env_calls += 1
            result = env.apply(live.get(node.key) or EnvGoal(node.goals), child.tactic, timeout)
            if not (result.ok and [g.key for g in result.goals] == [c.key for c in child.children]):
                break
            node.tactic, node.children = child.tactic, child.children
            stats.edges_removed += 1
        return node

    out = walk(tree).measure()
    stats.proofs += 1
    stats.simplified += int(out.size < before)
    return out


_NAME_OK = re.compile(r"^[A-Za-z_][A-Za-z0-9_']*$")


def _sub(text: str, mapping: dict[str, str]) -> str:
    if not mapping:
        return text
    pattern = re.compile(
        r"(?<![\w'.])(" + "|".join(map(re.escape, sorted(mapping, key=len, reverse=True))) + r")(?![\w'])"
    )
    return pattern.sub(lambda m: mapping[m.group(1)], text)


def augment(
    goals: tuple[Goal, ...], tactic: str, rng: random.Random, rename: bool = True, shuffle: bool = True
) -> tuple[tuple[Goal, ...], str]:
    """A meaning-preserving variant of one training step (goals, tactic)."""
    names = {n for g in goals for h in g.hypotheses for n in h.names if _NAME_OK.match(n)}
    mapping = {}
    if rename:
        # only hypotheses the tactic does not reach by an automatic name (h✝ are inaccessible anyway)
        fresh = [f"h_{i}" for i in range(len(names))]
        rng.shuffle(fresh)
        mapping = {n: f for n, f in zip(sorted(names), fresh) if not n[0].isupper()}
    out = []
    for goal in goals:
        hyps = [Hypothesis(tuple(mapping.get(n, n) for n in h.names), _sub(h.type, mapping)) for h in goal.hypotheses]
        if shuffle:
            hyps = _dependency_shuffle(hyps, rng)
        out.append(Goal(tuple(hyps), _sub(goal.target, mapping), goal.case))
    if shuffle and len(out) > 1:
        rng.shuffle(out)
    return tuple(out), _sub(tactic, mapping)


def _dependency_shuffle(hyps: list[Hypothesis], rng: random.Random) -> list[Hypothesis]:
    remaining = list(hyps)
    placed: set[str] = set()
    out = []
    all_names = {n for h in hyps for n in h.names}
    while remaining:
        ready = [
            h
            for h in remaining
            if all(
                n in placed
                for n in all_names - set(h.names)
                if re.search(rf"(?<![\w'.]){re.escape(n)}(?![\w'])", h.type)
            )
        ]
        choice = rng.choice(ready or remaining[:1])
        out.append(choice)
        placed.update(choice.names)
        remaining.remove(choice)
    return out
