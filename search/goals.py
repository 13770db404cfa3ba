"""Lean goals as pretty-printed by Lean (and LeanDojo / the REPL), split and compared."""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass

NO_GOALS = "no goals"
TURNSTILE = "⊢"
# a Lean identifier as printed in goals: letters (unicode too), digits, _ ' ! ? . and the
# inaccessible-name dagger ✝ with its superscript index
_IDENT = r"[^\W\d][\w'!?✝⁰¹²³⁴⁵⁶⁷⁸⁹.]*"
_METAVAR = re.compile(r"\?[\w'.✝]+")


def _collapse(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class Hypothesis:
    names: tuple[str, ...]
    type: str


@dataclass(frozen=True)
class Goal:
    hypotheses: tuple[Hypothesis, ...]
    target: str
    case: str | None = None

    @property
    def text(self) -> str:
        """The goal as Lean prints it."""
        lines = [f"case {self.case}"] if self.case else []
        lines += [f"{' '.join(h.names)} : {h.type}" for h in self.hypotheses]
        lines.append(f"{TURNSTILE} {self.target}")
        return "\n".join(lines)

    @property
    def exact_key(self) -> str:
        body = [f"{' '.join(h.names)} : {h.type}" for h in self.hypotheses] + [f"{TURNSTILE} {self.target}"]
        return _collapse("\n".join(body))

    @property
    def cycle_key(self) -> str:
        return _cycle_key(self)

    def _cycle_key(self) -> str:
        """Equal for goals that differ only in hypothesis order, hypothesis names and whitespace.

        Names become positional placeholders ``#i`` in an order that does not depend on how the
        goal was printed: each name gets a colour from its type with every name masked, refined
        (a few rounds of colour refinement) by the colours of the hypotheses and target that
        mention it, so two names of the same type are told apart by how they are used; names
        still tied afterwards are interchangeable in every text that mentions them, so their
        printed order cannot change the key."""
        flat = [(name, h.type) for h in self.hypotheses for name in h.names]
        if not flat:
            return _collapse(self.target)
        names = list(dict.fromkeys(name for name, _ in flat))
        pattern = re.compile(
            r"(?<![\w'.✝])(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + r")(?![\w'✝])"
        )

        def substituted(text: str, mapping: dict[str, str]) -> str:
            return _collapse(pattern.sub(lambda m: mapping.get(m.group(1), m.group(1)), text))

        texts = [t for _, t in flat] + [self.target]
        mentions = {
            n: [i for i, t in enumerate(texts) if n in {m.group(1) for m in pattern.finditer(t)}] for n in names
        }
        own = {}
        for index, (name, _) in enumerate(flat):
            own[name] = index  # a shadowed name: its last declaration is the one in scope
        colour = {n: "_" for n in names}
        for _ in range(min(len(names), 4)):
            refined = {}
            for n in names:
                marked = {**colour, n: "@"}
                used = sorted(
                    ("T" if i == len(flat) else "H") + substituted(texts[i], marked) for i in mentions[n] if i != own[n]
                )
                signature = substituted(texts[own[n]], colour) + "|" + "|".join(used)
                refined[n] = "§" + hashlib.blake2b(signature.encode(), digest_size=4).hexdigest()
            stable = len(set(refined.values())) == len(set(colour.values()))
            colour = refined
            if stable:
                break
        order = sorted(range(len(names)), key=lambda i: (colour[names[i]], i))
        rename = {names[i]: f"#{rank}" for rank, i in enumerate(order)}
        hyps = sorted(substituted(t, rename) for _, t in flat)
        return " ; ".join(hyps) + f" {TURNSTILE} " + substituted(self.target, rename)

    @property
    def metavariables(self) -> frozenset[str]:
        return frozenset(_METAVAR.findall(self.text))


# the search asks for each new goal's key twice (cycle check, node) and for recurring goals again
_cycle_key = functools.lru_cache(maxsize=1 << 16)(Goal._cycle_key)


def parse_goal(text: str) -> Goal:
    """One goal block (no blank lines). Raises ValueError when there is no ``⊢`` line."""
    lines = text.strip("\n").split("\n")
    case = None
    if lines and lines[0].startswith("case "):
        case = lines[0][len("case ") :].strip()
        lines = lines[1:]
    entries: list[str] = []
    target_start = None
    for index, line in enumerate(lines):
        if line.startswith(TURNSTILE):
            target_start = index
            break
        if line.startswith((" ", "\t")) and entries:  # a long type continues on indented lines
            entries[-1] += "\n" + line
        else:
            entries.append(line)
    if target_start is None:
        raise ValueError(f"not a Lean goal (no '{TURNSTILE}' line): {text[:200]!r}")
    target = "\n".join(lines[target_start:])[len(TURNSTILE) :].strip()
    hypotheses = []
    for entry in entries:
        match = re.match(r"(.*?) :(?:\s|$)", entry, flags=re.S)
        names, sep, type_ = (match.group(1), True, entry[match.end() :]) if match else ("", False, "")
        if not sep:
            raise ValueError(f"not a hypothesis line (no ' : '): {entry[:200]!r}")
        hypotheses.append(Hypothesis(tuple(names.split()), type_.strip()))
    return Goal(tuple(hypotheses), target, case)


def parse_state(text: str) -> list[Goal]:
    """A printed proof state: ``no goals`` (or empty) is the empty list."""
    text = text.strip()
    if not text or text == NO_GOALS:
        return []
    return [parse_goal(block) for block in re.split(r"\n\s*\n", text) if block.strip()]


def group_by_metavariables(goals: list[Goal]) -> list[tuple[Goal, ...]]:
    """Factorize a state: one group per goal, except that goals sharing a metavariable are one
    group (in their printed order; the group sits where its first goal was)."""
    parent = list(range(len(goals)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for index, goal in enumerate(goals):
        for mvar in goal.metavariables:
            if mvar in owner:
                parent[find(index)] = find(owner[mvar])
            else:
                owner[mvar] = index
    groups: dict[int, list[Goal]] = {}
    for index, goal in enumerate(goals):
        groups.setdefault(find(index), []).append(goal)
    return [tuple(group) for _, group in sorted(groups.items())]


def node_exact_key(goals: tuple[Goal, ...]) -> str:
    return " ⊓ ".join(g.exact_key for g in goals)


def node_cycle_key(goals: tuple[Goal, ...]) -> str:
    return " ⊓ ".join(g.cycle_key for g in goals)


def node_text(goals: tuple[Goal, ...]) -> str:
    return "\n\n".join(g.text for g in goals)


def normalize_tactic(tactic: str) -> str:
    """Whitespace-insensitive tactic identity (dedupe, replay lookup)."""
    return _collapse(tactic)
