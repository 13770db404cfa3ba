"""Hypothesis deduplication for proof states (seed App. C).

Successive proof states repeat most of their context. One dictionary per program remembers the
last type printed for each hypothesis name; a state then prints

- ``h : P`` for a name not seen before,
- nothing for a name whose type is unchanged,
- ``h : Q (was P)`` for a name whose type changed,

while goal targets (``⊢ ...``) and case labels (``case ...``) always print. Grouped declarations
``x y : T`` are expanded to one line per name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# ``names :`` then the type (which may start on the next line when Lean wraps a long one).
# Names hold no blanks or colons; the first `` :`` that follows them ends the name list.
_DECLARATION = re.compile(r"^(?P<names>[^\s:⊢][^\s:]*(?: [^\s:]+)*) :(?P<type>(?:\s.*)?)$", re.DOTALL)


def split_goals(goals: str) -> list[str]:
    """Lean separates the goals of a state with blank lines."""
    return [goal for goal in re.split(r"\n[ \t]*\n", goals) if goal.strip()]


def logical_lines(goal: str) -> list[str]:
    """Lines of one goal with Lean's wrapped continuations (lines starting with a blank) joined to
    the line they continue."""
    out: list[str] = []
    for line in goal.split("\n"):
        if out and line[:1] in (" ", "\t"):
            out[-1] += "\n" + line
        elif line.strip():
            out.append(line)
    return out


@dataclass(frozen=True)
class StateLine:
    kind: str  # "case" | "goal" | "hypothesis" | "other"
    text: str
    name: str | None = None
    type: str | None = None  # raw text after the colon (keeps its leading blank or newline)


def parse_state(goals: str) -> list[StateLine]:
    """Classify every logical line of a state; grouped declarations are expanded."""
    out: list[StateLine] = []
    for goal in split_goals(goals):
        for line in logical_lines(goal):
            stripped = line.lstrip()
            if stripped.startswith("case ") or stripped == "case":
                out.append(StateLine("case", line))
            elif stripped.startswith("⊢"):
                out.append(StateLine("goal", line))
            elif match := _DECLARATION.match(line):
                for name in match.group("names").split(" "):
                    out.append(StateLine("hypothesis", f"{name} :{match.group('type')}", name, match.group("type")))
            else:
                out.append(StateLine("other", line))
    return out


@dataclass
class HypothesisDictionary:
    """The per-program memory of printed hypotheses."""

    seen: dict[str, str] = field(default_factory=dict)

    def render(self, goals: str) -> list[str]:
        """The state's lines to print, updating the dictionary."""
        out: list[str] = []
        for line in parse_state(goals):
            if line.kind != "hypothesis":
                out.append(line.text)
                continue
            assert line.name is not None and line.type is not None
            previous = self.seen.get(line.name)
            if previous is None:
                out.append(line.text)
            elif previous != line.type:
                out.append(f"{line.text} (was{previous})")
            self.seen[line.name] = line.type
        return out
