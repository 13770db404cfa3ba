"""Text prechecks: deterministic rejections decided before Lean runs.

Every rule reads the *masked* program (comments and string/char literals blanked, see
``masking``), so a forbidden word in a docstring is fine and one in code is not. Matching is on
Lean word boundaries: a word preceded by an identifier character or a ``.`` (``Nat.sorry_lemma``,
``h_sorry``) or followed by one (``sorryAx``) is a different identifier. Each profile's keywords
are found with ONE literal alternation per rule set and a table from keyword to reason code, which
keeps a precheck well under 200 µs (``make bench-data`` measures it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from leanloop.lean.acceptance import reasons as R
from leanloop.lean.acceptance.lexing import CLASSIC
from leanloop.lean.acceptance.masking import mask
from leanloop.lean.acceptance.tokens import TokenTable, chunk_start, shipped, token_start

# Word boundaries are Lean's, not Python's `\w` (a modifier letter such as Mathlib's postfix `ᶜ`
# is a word character to Python and a symbol to Lean: `hᶜsorry` is `h`, `ᶜ`, `sorry`). The
# identifier characters are the ones every supported Lean version agrees on (lexing.CLASSIC), so
# a letter only newer Lean reads as one ends a word here: a refusal too many, never one too few.
_REST = CLASSIC.rest
_E = f"(?![{_REST}])"  # no identifier character just after

# Speed: patterns start with a literal alternation (no lookbehind in front), so sre skips ahead on
# the first character; the "no identifier character before" half of the word boundary is checked
# in Python for the few matches there are (_words). A lookbehind in front made prechecks 10x slower.
_THEOREM = re.compile(r"(?:theorem|lemma)" + _E)
_FORBIDDEN_WORDS = ("sorry", "admit", "axiom", "constant", "opaque", "unsafe")
_FORBIDDEN = re.compile("(?:" + "|".join(_FORBIDDEN_WORDS) + ")" + _E)
_IMPORT_WORD = re.compile(r"import" + _E)
_HEADER_ITEM = re.compile(r"\s*(?:(prelude)" + _E + r"|(?:(?:public|private|meta)\s+)*import\s+(?:all\s+)?([^\s]+))")

# rl keywords -> reason code. One literal alternation finds them all (longest first, so
# `macro_rules` wins over `macro`); `set_option`, `attribute`/`@[` and `native` need a closer look.
_RL_KEYWORDS: dict[str, str] = {
    **dict.fromkeys(["native_decide"], R.NATIVE_DECIDE),
    **dict.fromkeys(
        ["ofReduceBool", "ofReduceNat", "reduceBool", "reduceNat", "trustCompiler", "bv_decide"], R.TRUSTS_COMPILER
    ),
    # `stop` is `repeat sorry`; `apply?` admits the goal when no lemma closes it
    **dict.fromkeys(["sorryAx", "stop", "apply?"], R.SORRY_DISGUISE),
    **dict.fromkeys(["implemented_by", "extern", "csimp"], R.COMPILER_OVERRIDE),
    **dict.fromkeys(
        [
            "macro_rules",
            "macro",
            "syntax",
            "declare_syntax_cat",
            "notation3",
            "notation",
            "infixl",
            "infixr",
            "infix",
            "prefix",
            "postfix",
            "binder_predicate",
        ],
        R.SYNTAX_EXTENSION,
    ),
    **dict.fromkeys(
        [
            "elab_rules",
            "elab",
            "run_cmd",
            "run_elab",
            "run_meta",
            "run_tac",
            "#eval",
            "#eval!",
            "builtin_initialize",
            "initialize",
            "simproc_decl",
            "simproc",
            "dsimproc",
        ],
        R.METAPROGRAM,
    ),
    # elaboration-time code without a command keyword: term/tactic-level metaprograms,
    # the monads and APIs any payload needs (unchecked declarations, environment and attribute
    # edits, IO refs that outlive the command), code carried by tactic configuration
    **dict.fromkeys(
        [
            "by_elab",
            "run_conv",
            "dbg_trace",
            "dbgTrace",
            "dbgTraceIfShared",
            "discharger",
            "TacticM",
            "MetaM",
            "TermElabM",
            "CommandElabM",
            "CoreM",
            "MacroM",
            "Elab",
            "Meta",
            "Syntax",
            "Expr",
            "Environment",
            "Attribute",
            "IO",
            "EIO",
            "BaseIO",
            "mkRef",
            "unsafeIO",
            "unsafeBaseIO",
            "unsafeEIO",
            "evalExpr",
            "evalTactic",
            "addDecl",
            "addDeclWithoutChecking",
            "addAndCompile",
            "skipKernelTC",
            "modifyEnv",
            "setEnv",
            # threads a tactic configuration can start (busy work outside the heartbeat budget),
            # and code a linarith configuration runs
            "Task",
            "asTask",
            "mapTask",
            "bindTask",
            "preprocessors",
        ],
        R.METAPROGRAM,
    ),
    "#exit": R.EXIT_COMMAND,
    "#guard_msgs": R.MESSAGE_SUPPRESSION,
    "count_heartbeats": R.CANDIDATE_HEARTBEATS,
    "instance": R.INSTANCE_DECLARATION,
    "LeanloopHarness": R.HARNESS_NAME,
    # a variable that every later declaration takes (include) could stand in for the target in
    # the harness's check line; `variable?` (Mathlib) adds variables the candidate did not write
    **dict.fromkeys(["include", "omit", "variable?"], R.SCOPE_CAPTURE),
}
_SPECIAL = ("native", "set_option", "attribute")
_RL_WORD = re.compile(
    "(?:" + "|".join(re.escape(w) for w in sorted([*_RL_KEYWORDS, *_SPECIAL], key=len, reverse=True)) + ")" + _E
)
# substrings of which one must occur for any _RL_WORD match (keywords that contain another one,
# e.g. macro_rules / macro, are covered by the shorter)
_RL_LITERALS = tuple(
    w for w in [*_RL_KEYWORDS, *_SPECIAL] if not any(o != w and o in w for o in [*_RL_KEYWORDS, *_SPECIAL])
)
# qualified uses count for these (Lean.ofReduceBool, _root_.sorryAx)
_DOT_OK = frozenset(
    {
        "ofReduceBool",
        "ofReduceNat",
        "reduceBool",
        "reduceNat",
        "trustCompiler",
        "sorryAx",
        "native_decide",
        "TacticM",
        "MetaM",
        "TermElabM",
        "CommandElabM",
        "CoreM",
        "MacroM",
        "Elab",
        "Meta",
        "Syntax",
        "Expr",
        "Environment",
        "Attribute",
        "IO",
        "EIO",
        "BaseIO",
        "mkRef",
        "evalExpr",
        "evalTactic",
        "addDecl",
        "addDeclWithoutChecking",
        "addAndCompile",
        "skipKernelTC",
        "modifyEnv",
        "setEnv",
        "unsafeIO",
        "unsafeBaseIO",
        "unsafeEIO",
        "Task",
        "asTask",
        "mapTask",
        "bindTask",
    }
)
# `register_option`, `register_simp_attr`, `register_linter_set`...: commands that create options,
# attributes or linters (a linter runs after every later command, the harness's included)
_REGISTER = re.compile(f"register_[{_REST}]*")
_OPTION_NAME = re.compile(r"\s+([^\s]+)(?:\s+([0-9_]+)(?![\w.]))?")
_NATIVE_AS_OPTION = re.compile(r"\s*:=")
_ATTRIBUTE_LIST = re.compile(r"\s*\[([^\]]*)\]")
_NAME_CHAR = re.compile(r"[\w'!?.]")

# Options a candidate may set under rl. Everything else is refused: options can switch off
# checks (debug.*), change the budget the harness sets (maxHeartbeats, synthInstance.maxHeartbeats)
# or change how later commands elaborate or print.
RL_ALLOWED_OPTIONS = frozenset({"maxRecDepth", "push_neg.use_distrib", "simprocs"})
# Options that bound a resource (work Lean does before it gives up): a candidate may lower them,
# never lift them above Lean's default (``register_builtin_option``'s ``defValue`` in Lean core):
# a lifted `exponentiation.threshold` lets `2 ^ 10 ^ 9` be computed while elaborating.
RL_BOUNDED_OPTIONS = {"exponentiation.threshold": 256, "synthInstance.maxSize": 128}
RL_ALLOWED_OPTION_PREFIXES = ("linter.",)

# attribute names (first word of an attribute item) that rl refuses, with why
_ATTRIBUTE_CODES = {
    "implemented_by": R.COMPILER_OVERRIDE,
    "extern": R.COMPILER_OVERRIDE,
    "csimp": R.COMPILER_OVERRIDE,
    "export": R.COMPILER_OVERRIDE,
    "never_extract": R.COMPILER_OVERRIDE,
    "instance": R.INSTANCE_DECLARATION,
    "default_instance": R.INSTANCE_DECLARATION,
    "tactic": R.METAPROGRAM,
    "command_elab": R.METAPROGRAM,
    "term_elab": R.METAPROGRAM,
    "macro": R.METAPROGRAM,
    "delab": R.METAPROGRAM,
    "app_unexpander": R.METAPROGRAM,
    "init": R.METAPROGRAM,
    "builtin_init": R.METAPROGRAM,
    "env_linter": R.METAPROGRAM,
    "command_parser": R.METAPROGRAM,
    "term_parser": R.METAPROGRAM,
    "tactic_parser": R.METAPROGRAM,
    "simproc": R.METAPROGRAM,
    # attributes that register the declaration as code some tactic runs (an extension on a plain
    # `def`): aesop rules (a rule may be a tactic), positivity / norm_num extensions, linters
    "aesop": R.METAPROGRAM,
    "positivity": R.METAPROGRAM,
    "norm_num": R.METAPROGRAM,
    "linter": R.METAPROGRAM,
    "env_linter": R.METAPROGRAM,
    "tactic_alt": R.METAPROGRAM,
}
_DECL_BEFORE = re.compile(
    f"(?<![{_REST}.])"
    r"(theorem|lemma|def|abbrev|instance|opaque|axiom|constant|structure"
    r"|inductive|class|alias)\s+(?:_root_\.)?\Z"
)


@dataclass(frozen=True)
class HeaderBlock:
    """The module header of a program: ``prelude`` and the imported modules, and where it ends."""

    prelude: bool
    modules: tuple[str, ...]
    end: int  # offset just after the last header item

    def same_imports(self, other: "HeaderBlock") -> bool:
        # An import block loads the union of its modules; their order does not change which
        # declarations exist, so `import Aesop\nimport Mathlib` equals `import Mathlib\nimport Aesop`.
        return self.prelude == other.prelude and set(self.modules) == set(other.modules)


def header_block(masked_text: str) -> HeaderBlock:
    prelude, modules, pos = False, [], 0
    while True:
        m = _HEADER_ITEM.match(masked_text, pos)
        if m is None:
            return HeaderBlock(prelude, tuple(modules), pos)
        if m.group(1):
            if modules or prelude:  # `prelude` is only valid first
                return HeaderBlock(prelude, tuple(modules), pos)
            prelude = True
        else:
            modules.append(m.group(2))
        pos = m.end()


def continues_name(text: str, at: int, tokens: TokenTable | None = None) -> bool:
    """Is the word at ``at`` the tail of a longer identifier or token, as Lean's tokenizer reads the
    run before it with the token table (``h'sorry``, ``x!sorry`` are one identifier; ``!sorry``,
    ``hᶜsorry``, ``[MODsorry`` end a token before ``sorry``)? Where the table cannot settle it, no:
    the word stays visible to the rules (a refusal too many, never one too few)."""
    floor = chunk_start(text, at)
    return floor < at and token_start(text, at, floor, CLASSIC, tokens or shipped()) is False


def _words(
    pattern: re.Pattern, text: str, start: int = 0, literals: tuple[str, ...] = (), tokens: TokenTable | None = None
):
    """Matches of ``pattern`` not preceded by an identifier or a namespace dot.
    ``literals``: words of which one must occur for a match (a C-speed substring test skips the
    regex scan for the common program that has none of them)."""
    if literals and not any(w in text for w in literals):
        return
    for m in pattern.finditer(text, start):
        at = m.start()
        if at == 0 or not (text[at - 1] == "." or continues_name(text, at, tokens)):
            yield m


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def collection_reasons(
    program: str,
    masked_text: str,
    header: HeaderBlock | None,
    allow_sorry: bool = False,
    tokens: TokenTable | None = None,
) -> list[str]:
    """The seed's prechecks (Learning Lean Feedback, App. B), in its order. ``allow_sorry``: a
    statement check (``statement`` profile), where ``:= by sorry`` is the expected proof."""
    out: list[str] = []
    if next(_words(_THEOREM, masked_text, 0, ("theorem", "lemma"), tokens), None) is None:
        out.append(R.reason(R.NO_THEOREM, "no `theorem` or `lemma` declaration outside comments"))
    seen: set[str] = set()
    for m in _words(_FORBIDDEN, masked_text, 0, _FORBIDDEN_WORDS, tokens):
        word = m.group()
        if allow_sorry and word == "sorry":
            continue
        if word not in seen:
            seen.add(word)
            out.append(R.reason(R.FORBIDDEN, f"`{word}` at line {_line(masked_text, m.start())}"))
    block = header_block(masked_text)
    if header is not None and not block.same_imports(header):
        out.append(
            R.reason(
                R.HEADER_MISMATCH,
                f"imports {sorted(block.modules)} but the benchmark header imports {sorted(header.modules)}",
            )
        )
    late = next(_words(_IMPORT_WORD, masked_text, block.end, ("import",), tokens), None)
    if late:
        out.append(R.reason(R.LATE_IMPORT, f"`import` at line {_line(masked_text, late.start())}"))
    return out


def _option_reason(option: str, value: str | None = None, budget: int | None = None) -> str | None:
    if option == "maxHeartbeats" and value is not None and budget is not None:
        # lowering the budget (`set_option maxHeartbeats 400000 in`, common in prover output) cannot
        # starve anyone; 0 lifts Lean's guard and more than the harness's budget raises it
        if 0 < int(value.replace("_", "")) <= budget:
            return None
    if "maxHeartbeats" in option:
        return R.reason(
            R.CANDIDATE_HEARTBEATS,
            f"set_option {option}{' ' + value if value else ''}: the harness sets the budget ({budget:,} at most)"
            if budget
            else f"set_option {option}: the harness sets the budget",
        )
    if option.startswith("debug."):
        return R.reason(R.KERNEL_CHECK_OPTION, f"set_option {option}")
    if option in RL_BOUNDED_OPTIONS:
        bound = RL_BOUNDED_OPTIONS[option]
        if value is not None and int(value.replace("_", "")) <= bound:
            return None
        return R.reason(
            R.OPTION_NOT_ALLOWED,
            f"set_option {option}{' ' + value if value else ''}: lifts a resource "
            f"bound (at most Lean's default {bound})",
        )
    if option in RL_ALLOWED_OPTIONS or option.startswith(RL_ALLOWED_OPTION_PREFIXES):
        return None
    return R.reason(R.OPTION_NOT_ALLOWED, f"set_option {option}")


def _attribute_reasons(body: str) -> list[tuple[str, str]]:
    found = []
    for item in body.split(","):
        words = item.replace("-", " ").split()
        while words and words[0] in ("local", "scoped"):
            words = words[1:]
        if not words:
            continue
        first = words[0]
        code = _ATTRIBUTE_CODES.get(first) or (R.METAPROGRAM if first.startswith("builtin_") else None)
        if code:
            found.append((code, f"attribute [{first}]"))
    return found


def _declared_kinds(masked_text: str, name: str) -> list[str]:
    """Keywords of the declarations of ``name`` (``theorem name``, ``def _root_.name``, ...)."""
    kinds = []
    i = masked_text.find(name)
    while i >= 0:
        after = i + len(name)
        if not (after < len(masked_text) and _NAME_CHAR.match(masked_text, after)):
            m = _DECL_BEFORE.search(masked_text, max(0, i - 48), i)
            if m:
                kinds.append(m.group(1))
        i = masked_text.find(name, after)
    return kinds


def rl_reasons(
    program: str,
    masked_text: str,
    unterminated: str | None,
    name: str | None,
    header_text: str | None,
    ambiguous: str | None = None,
    heartbeat_budget: int | None = None,
    tokens: TokenTable | None = None,
) -> list[str]:
    """The rl profile's extra rules (everything the collection profile checks, plus these).

    They apply to the candidate's part of the program: after the trusted header when the program
    starts with it verbatim (the header may set options, e.g. the benchmark's maxHeartbeats 0,
    which the harness then overrides), else to all of it."""
    out: list[str] = []
    start = 0
    verbatim_header = True
    if header_text is not None:
        head = header_text.rstrip()
        verbatim_header = not head or (program.startswith(head) and program[len(head) : len(head) + 1] in ("", "\n"))
        start = len(head) if verbatim_header else 0
    seen: set[str] = set()

    def add(code: str, detail: str, offset: int) -> None:
        line = _line(masked_text, offset)
        key = f"{code}|{line}"  # one reason per rule and line (`@[extern]` is both a word and an attribute)
        if key not in seen:
            seen.add(key)
            out.append(R.reason(code, f"{detail} at line {line}"))

    candidate = masked_text[start:] if start else masked_text
    hits = _RL_WORD.finditer(masked_text, start) if any(w in candidate for w in _RL_LITERALS) else ()
    for m in hits:
        word, at = m.group(), m.start()
        if at and masked_text[at - 1] == ".":
            if word not in _DOT_OK:
                continue  # a qualified name (Nat.stop); Lean.ofReduceBool still counts
        elif at and continues_name(masked_text, at, tokens):
            continue  # part of a longer identifier (h_instance, h'sorry)
        if word == "set_option":
            option = _OPTION_NAME.match(masked_text, m.end())
            why = _option_reason(option.group(1), option.group(2), heartbeat_budget) if option else None
            if why:
                code, detail = why.split(": ", 1)
                add(code, detail, at)
        elif word == "attribute":
            items = _ATTRIBUTE_LIST.match(masked_text, m.end())
            for code, detail in _attribute_reasons(items.group(1) if items else ""):
                add(code, detail, at)
        elif word == "native":  # `decide +native`, `decide (config := { native := true })`
            if masked_text[at - 1 : at] == "+" or _NATIVE_AS_OPTION.match(masked_text, m.end()):
                add(R.NATIVE_DECIDE, "`native` decide option", at)
        else:
            add(_RL_KEYWORDS[word], f"`{word}`", at)
    at = masked_text.find("@[", start)
    while at >= 0:
        close = masked_text.find("]", at)
        for code, detail in _attribute_reasons(masked_text[at + 2 : close if close >= 0 else len(masked_text)]):
            add(code, detail, at)
        at = masked_text.find("@[", at + 2)
    if "register_" in candidate:
        for m in _words(_REGISTER, masked_text, start, (), tokens):
            add(R.METAPROGRAM, f"`{m.group()}`", m.start())
    if unterminated:
        out.append(R.reason(R.UNTERMINATED, f"{unterminated} runs to the end of the program"))
    if ambiguous:
        out.append(R.reason(R.AMBIGUOUS_LEXING, ambiguous))
    if not verbatim_header:
        out.append(R.reason(R.HEADER_NOT_VERBATIM, "the harness inserts its checks after the trusted header"))
    if name:
        kinds = _declared_kinds(masked_text, name)
        if not kinds:
            out.append(R.reason(R.TARGET_MISSING, f"no declaration of `{name}`"))
        elif len(kinds) > 1:
            out.append(R.reason(R.TARGET_REDECLARED, f"`{name}` declared {len(kinds)} times"))
        if kinds and kinds[0] not in ("theorem", "lemma"):
            out.append(R.reason(R.TARGET_NOT_THEOREM, f"`{name}` is declared with `{kinds[0]}`"))
    return out


@lru_cache(maxsize=64)
def _header_info(header: str) -> HeaderBlock:
    return header_block(mask(header).text)


def run_prechecks(
    program: str,
    *,
    hardened: bool,
    max_chars: int,
    header: str | None,
    name: str | None,
    allow_sorry: bool = False,
    lean_version: str | None = None,
    heartbeat_budget: int | None = None,
    tokens: TokenTable | None = None,
) -> list[str]:
    """All precheck reasons for ``program`` (empty list: passes). ``tokens``: Lean's token table
    (default: the shipped one)."""
    if len(program) > max_chars:
        # Do not even scan it: the limit exists to bound the cost of everything downstream.
        return [R.reason(R.TOO_LONG, f"{len(program):,} characters > {max_chars:,}")]
    # hardened: code inside interpolated strings (`s!"{...}"`, `dbg_trace "{...}"`) runs at
    # elaboration time, so the rules must see it
    masked = mask(program, keep_interpolations=hardened, lean_version=lean_version, tokens=tokens)
    header_info = _header_info(header) if header is not None else None
    out = collection_reasons(program, masked.text, header_info, allow_sorry, tokens)
    if hardened:
        out += rl_reasons(
            program, masked.text, masked.unterminated, name, header, masked.ambiguous, heartbeat_budget, tokens
        )
    return out
