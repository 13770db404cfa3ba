"""Proof trees from Lean files by re-execution (the Lean path of ``make search-data``; needs a Lean
backend: ``ReplEnv`` over lean-interact, or the HTTP pool).

Each ``theorem``/``lemma`` with a ``:= by`` tactic proof is started in the environment (its
statement with ``sorry``), then its tactic script is replayed step by step in proof-state mode: a
tactic line acts on the first open goal and its new goals take that goal's place; a ``·`` block
must close the first open goal on its own. The tree records what Lean answered, so it is
``verified: true``. Scripts this reader does not follow (``case``/``next`` blocks, ``calc``
chains spanning lines, ``<;>`` combinators on several goals, terms) are reported with the reason,
never guessed; LeanTree's tactic simplifications (merged ``rw``, ``cases`` branches) are not
implemented here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from search.env import EnvGoal, ProofEnv
from search.trees import TreeNode

DECLARATION = re.compile(r"^(theorem|lemma)\s+(\S+)", re.M)


@dataclass
class Extracted:
    name: str
    tree: TreeNode | None
    error: str = ""
    verified: bool = False
    env_calls: int = 0


@dataclass
class _Block:
    items: list = field(default_factory=list)  # str (a tactic) or _Block (a `·` sub-proof)


class ExtractionError(Exception):
    pass


def split_declarations(text: str) -> list[tuple[str, str, str]]:
    """(name, statement up to ``:= by``, proof script) of each tactic-proved theorem in a file."""
    out = []
    starts = [m.start() for m in DECLARATION.finditer(text)] + [len(text)]
    for start, end in zip(starts, starts[1:]):
        chunk = text[start:end].rstrip()
        name = DECLARATION.match(chunk).group(2)
        head, sep, body = chunk.partition(":= by")
        if sep:
            out.append((name, head.rstrip(), body))
    return out


def parse_script(body: str) -> _Block:
    lines = [l for l in body.split("\n") if l.strip() and not l.strip().startswith("--")]
    if not lines:
        raise ExtractionError("empty proof")
    if len(lines) == 1 and not body.startswith("\n"):
        return _Block([lines[0].strip()])

    def block(index: int, indent: int) -> tuple[_Block, int]:
        out = _Block()
        while index < len(lines):
            line = lines[index]
            depth = len(line) - len(line.lstrip())
            if depth < indent:
                break
            text = line.strip()
            if depth > indent:  # continuation of the previous tactic
                if not out.items or not isinstance(out.items[-1], str):
                    raise ExtractionError(f"unexpected indentation: {text[:60]!r}")
                out.items[-1] += "\n" + line
                index += 1
                continue
            if text.startswith("·"):
                rest = text[1:].strip()
                sub_indent = depth + (len(text) - len(rest))
                lines[index] = " " * sub_indent + rest
                sub, index = block(index, sub_indent)
                out.items.append(sub)
                continue
            if text.split()[0] in ("case", "next", "calc", "all_goals", "any_goals") or "<;>" in text:
                raise ExtractionError(f"not followed by this reader: {text[:60]!r}")
            out.items.append(text)
            index += 1
        return out, index

    first = len(lines[0]) - len(lines[0].lstrip())
    script, end = block(0, first)
    if end != len(lines):
        raise ExtractionError(f"unparsed line: {lines[end].strip()[:60]!r}")
    return script


def extract(env: ProofEnv, name: str, statement: str, body: str, header: str = "") -> Extracted:
    calls_before = env.calls
    try:
        script = parse_script(body)
    except ExtractionError as error:
        return Extracted(name, None, str(error))
    started = env.start((header + "\n" if header else "") + statement)
    if not started.ok or len(started.goals) != 1:
        return Extracted(name, None, f"start: {started.status.value} {started.error[:200]}")
    root_goal = started.goals[0]
    nodes: dict[int, TreeNode] = {}

    def node_of(goal: EnvGoal) -> TreeNode:
        return nodes.setdefault(id(goal), TreeNode(goal.goals))

    def run(block: _Block, open_goals: list[EnvGoal]) -> list[EnvGoal]:
        for item in block.items:
            if not open_goals:
                raise ExtractionError("a tactic after the goals were closed")
            if isinstance(item, _Block):
                if run(item, [open_goals[0]]):
                    raise ExtractionError("a `·` block left its goal open")
                open_goals = open_goals[1:]
                continue
            goal = open_goals[0]
            result = env.apply(goal, item)
            if not result.ok:
                raise ExtractionError(f"{result.status.value} at {item[:60]!r}: {result.error[:200]}")
            parent = node_of(goal)
            parent.tactic = item
            parent.children = [node_of(g) for g in result.goals]
            open_goals = result.goals + open_goals[1:]
        return open_goals

    try:
        left = run(script, [root_goal])
    except ExtractionError as error:
        return Extracted(name, None, str(error), env_calls=env.calls - calls_before)
    if left:
        return Extracted(name, None, f"{len(left)} goals left open", env_calls=env.calls - calls_before)
    return Extracted(name, node_of(root_goal).measure(), verified=True, env_calls=env.calls - calls_before)


def extract_file(env: ProofEnv, text: str, header: str = "") -> list[Extracted]:
    return [extract(env, name, statement, body, header) for name, statement, body in split_declarations(text)]
