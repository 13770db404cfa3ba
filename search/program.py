"""A found proof as one standalone Lean program, checked by the project's Verifier.

The interactive session is not trusted on its own (NanoProof App. E: proof states can accept what
the kernel rejects): every proof the search finds is rendered as a whole ``theorem ... := by``
program and verified under the ``rl`` acceptance profile. A program the backend has no answer for
is ``unavailable`` and counted as such, never as proved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from leanloop.lean.acceptance.submission import statement_prefix
from leanloop.lean.types import Category, Outcome, VerifyRequest
from search.trees import TreeNode


def proof_script(tree: TreeNode, indent: int = 2) -> str:
    """The tactic block: one tactic per line, each goal's proof under a ``·`` when a tactic
    leaves several goals."""
    lines: list[str] = []

    def emit(node: TreeNode, depth: int) -> None:
        pad = " " * depth
        tactic_lines = node.tactic.split("\n")
        lines.append(pad + tactic_lines[0])
        base = min((len(l) - len(l.lstrip()) for l in tactic_lines[1:] if l.strip()), default=0)
        lines.extend(pad + "  " + l[base:] for l in tactic_lines[1:])
        if len(node.children) == 1:
            emit(node.children[0], depth)
        else:
            for child in node.children:
                start = len(lines)
                emit(child, depth + 2)
                lines[start] = pad + "· " + lines[start][depth + 2 :]

    emit(tree, indent)
    return "\n".join(lines)


def statement_head(statement: str) -> str:
    body = statement.rstrip()
    for suffix in ("sorry", ":= by", ":="):
        if body.endswith(suffix):
            body = body[: -len(suffix)].rstrip()
    return body


def render_program(tree: TreeNode, statement: str, header: str = "", preamble: str = "") -> str:
    """``header`` (imports, options, opens) + ``preamble`` (e.g. the docstring) + the statement
    ``:= by`` + the proof script."""
    parts = [p if p.endswith("\n") else p + "\n" for p in (header, preamble) if p.strip()]
    return "".join(parts) + statement_head(statement) + " := by\n" + proof_script(tree)


@dataclass
class FoundProof:
    name: str
    tree: TreeNode
    statement: str | None = None
    header: str = ""
    preamble: str = ""
    theorem: str | None = None
    """The declared name the program must prove, when it is not ``name`` (a problem's key)."""


def found_request(proof: FoundProof) -> VerifyRequest | None:
    """The Verifier's request for a found proof (None without a statement). The header is the
    statement's own (empty: the program imports nothing, not the benchmark's header) followed by its
    context, so the harness elaborates the trusted statement where the statement stands."""
    if not proof.statement:
        return None
    return VerifyRequest(
        program=render_program(proof.tree, proof.statement, proof.header, proof.preamble),
        name=proof.theorem or proof.name,
        statement=proof.statement,
        header=statement_prefix(proof.header, proof.preamble),
    )


def verify_found(verifier, proofs: Sequence[FoundProof]) -> list[Outcome]:
    """One Outcome per proof; one without a statement (a recorded goal with no program text, as in
    the LeanDojo steps) cannot be written as a program: ``unavailable``, with the reason."""
    requests, index = [], []
    outcomes: list[Outcome | None] = [None] * len(proofs)
    for i, proof in enumerate(proofs):
        request = found_request(proof)
        if request is None:
            outcomes[i] = Outcome(
                Category.UNAVAILABLE,
                reasons=[
                    "no_statement_text: the theorem is known only by its goal (traced steps carry no program "
                    "text), so the proof cannot be checked as a whole program"
                ],
                backend=verifier.backend.name,
            )
            continue
        requests.append(request)
        index.append(i)
    for i, outcome in zip(index, verifier.check_sync(requests) if requests else []):
        outcomes[i] = outcome
    return outcomes  # type: ignore[return-value]
