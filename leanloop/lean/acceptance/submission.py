"""What the harness adds to a candidate program before Lean sees it, and how to read it back."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from leanloop.lean.acceptance.lexing import CLASSIC
from leanloop.lean.acceptance.masking import mask

HARNESS_NAMESPACE = "LeanloopHarness"

_DECL = re.compile(f"(?<![{CLASSIC.rest}.])" r"(?:theorem|lemma)\s+")
_NAME_TOKEN = re.compile(r"[^\s({\[⦃:]*")
_OPEN = {"(": ")", "[": "]", "{": "}", "⦃": "⦄", "⟨": "⟩"}
_CLOSE = set(_OPEN.values())


class StatementError(ValueError):
    """The trusted statement cannot be turned into a signature check."""


@dataclass(frozen=True)
class Signature:
    name: str
    binders: str  # text between the name and the top-level `:`; may be empty
    type: str  # text between the top-level `:` and `:=` (or the end)
    head_end: int = field(default=-1, compare=False)  # offset of the top-level `:=` in the statement (or its end)


def parse_statement(statement: str, name: str | None = None) -> Signature:
    """Split ``theorem NAME BINDERS : TYPE := ...`` into its parts (comments respected)."""
    masked = mask(statement).text
    m = None
    for candidate in _DECL.finditer(masked):
        token = _NAME_TOKEN.match(masked, candidate.end()).group()
        if name is None or token == name or token == f"_root_.{name}":
            m = candidate
            break
    if m is None:
        raise StatementError(f"no `theorem {name or '<name>'}` declaration in the trusted statement")
    name_start = m.end()
    name_end = name_start
    while name_end < len(masked) and not masked[name_end].isspace() and masked[name_end] not in "({[⦃:":
        name_end += 1
    found_name = masked[name_start:name_end].removeprefix("_root_.")
    depth, colon, assign = 0, -1, len(masked)
    i = name_end
    while i < len(masked):
        ch = masked[i]
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
        elif depth == 0 and ch == ":":
            if masked.startswith(":=", i):
                if colon >= 0:
                    assign = i
                    break
                raise StatementError("the statement has `:=` before its type")
            if colon < 0:
                colon = i
        i += 1
    if colon < 0:
        raise StatementError(f"no top-level `:` after `{found_name}`: cannot find the statement's type")
    binders = statement[name_end:colon].strip()
    type_ = statement[colon + 1 : assign].strip()
    if not type_:
        raise StatementError(f"empty type in the statement of `{found_name}`")
    return Signature(found_name, binders, type_, assign)


_SCOPE = re.compile(f"(?<![{CLASSIC.rest}.])(namespace|section|mutual|end)(?![{CLASSIC.rest}])" r"[ \t]*([^\s]*)")


def open_scopes(masked: str) -> list[str]:
    """The ``section`` / ``namespace`` scopes still open at the end of a masked program, outermost
    first, each as the name its ``end`` needs ("" for an anonymous section; ``mutual`` blocks
    count as scopes too, so that their ``end`` is not taken for a section's)."""
    stack: list[str] = []
    for m in _SCOPE.finditer(masked):
        keyword, name = m.group(1), m.group(2)
        if keyword == "end":
            if stack:
                stack.pop()
        elif keyword == "mutual":
            stack.append("\0mutual")
        else:
            name = name if name and (name[0].isalpha() or name[0] in "_«") else ""
            stack.append(name)
    return stack


def split_docstring(context: str) -> tuple[str, str]:
    """``(context before, docstring)``: the doc comment that ends the trusted context (it documents
    the statement, so nothing may come between them), or ``(context, "")``."""
    stripped = context.rstrip()
    if not stripped.endswith("-/"):
        return context, ""
    masked = mask(context)
    at = context.rfind("/--", 0, len(stripped))
    while at >= 0:
        # a real doc-comment opening (blanked by the masker) after which only that comment remains
        if masked.text[at] == " " and not mask(context[:at]).unterminated and not mask(context[at:]).text.strip():
            return context[:at], context[at:]
        at = context.rfind("/--", 0, at)
    return context, ""


def statement_prefix(header: str, context: str) -> str:
    """The trusted text before a statement and any completion text: the header and the
    statement's own context without the docstring that documents the statement. Give it as the
    request's ``header``: the harness then elaborates the trusted statement right after it, in the
    statement's own context (its opens, variables, definitions)."""
    return header + split_docstring(context)[0]


def _tag(signature: Signature) -> str:
    digest = hashlib.sha256(f"{signature.name}\0{signature.binders}\0{signature.type}".encode())
    return digest.hexdigest()[:10]


@dataclass(frozen=True)
class Submission:
    """The program sent to Lean plus the line layout needed to read Lean's answer."""

    program: str  # exactly what Lean compiles
    candidate: str  # the candidate's program as submitted
    header_lines: int  # lines 1..header_lines are the candidate's own (trusted header)
    block_lines: int  # harness lines inserted right after them
    trailer_line: int  # first trailer line (1-based) in ``program``; 0: no trailer
    check_name: str | None = None
    axioms_line: int = 0
    check_line: int = 0  # the line of the check theorem (after the `end`s closing candidate scopes)

    @property
    def composed(self) -> bool:
        """True when Lean compiles more than the candidate's text (harness block or trailer)."""
        return bool(self.block_lines or self.trailer_line)

    def region(self, line: int) -> str:
        """``candidate`` / ``harness`` / ``trailer`` for a 1-based line of ``program``."""
        if line <= self.header_lines:
            return "candidate"
        if line <= self.header_lines + self.block_lines:
            return "harness"
        if self.trailer_line and line >= self.trailer_line:
            return "trailer"
        return "candidate"

    def candidate_line(self, line: int) -> int:
        """A candidate-region line of ``program`` as a line of the candidate's program."""
        return line if line <= self.header_lines else line - self.block_lines


def verbatim(program: str) -> Submission:
    return Submission(program=program, candidate=program, header_lines=0, block_lines=0, trailer_line=0)


def _header_cut(program: str, header: str | None) -> int:
    """Offset of the first line after the trusted header (or after the import block)."""
    if header is not None:
        head = header.rstrip()
        if not head:
            return 0
        if program.startswith(head) and program[len(head) : len(head) + 1] in ("", "\n"):
            return min(len(program), len(head) + 1)
    from leanloop.lean.acceptance.prechecks import header_block  # local: prechecks imports masking only

    block = header_block(mask(program).text)
    if not (block.modules or block.prelude):
        return 0  # no import block: the harness lines go first, never after the program's first line
    end = block.end
    newline = program.find("\n", end)
    return len(program) if newline < 0 else newline + 1


def compose(program: str, *, header: str | None, heartbeats: int | None, signature: Signature | None) -> Submission:
    """Insert the harness block after the header and, given a signature, append the trailer."""
    if heartbeats is None and signature is None:
        return verbatim(program)
    cut = _header_cut(program, header)
    block: list[str] = []
    if heartbeats is not None:
        block.append(f"set_option maxHeartbeats {int(heartbeats)}")
    check_name = None
    trailer = ""
    if signature is not None:
        tag = _tag(signature)
        expected = f"{HARNESS_NAMESPACE}.expected_{tag}"
        check_name = f"{HARNESS_NAMESPACE}.check_{tag}"
        # `:` and `:=` sit on their own lines so that a `--` comment ending the binders or the type
        # cannot hide them
        binders = f" {signature.binders}" if signature.binders else ""
        block.append(f"theorem {expected}{binders}\n  :\n  {signature.type}\n  := sorry")
        ends = "".join(
            f"end {scope}\n" if scope else "end\n"
            for scope in reversed(open_scopes(mask(program[cut:]).text))
            if scope != "\0mutual"
        )
        trailer = (
            f"{ends}theorem _root_.{check_name} : type_of% @_root_.{expected} := @_root_.{signature.name}\n"
            f"#print axioms _root_.{check_name}\n"
        )
    block_text = "\n".join(block) + "\n"
    head = program[:cut]
    if head and not head.endswith("\n"):
        head += "\n"
    rest = program[cut:]
    before_trailer = head + block_text + rest
    if trailer and not before_trailer.endswith("\n"):
        before_trailer += "\n"
    trailer_line = before_trailer.count("\n") + 1 if trailer else 0
    return Submission(
        program=before_trailer + trailer,
        candidate=program,
        header_lines=head.count("\n"),
        block_lines=block_text.count("\n"),
        trailer_line=trailer_line,
        check_name=check_name,
        check_line=trailer_line + trailer.count("\n") - 2 if trailer else 0,
        axioms_line=trailer_line + trailer.count("\n") - 1 if trailer else 0,
    )
