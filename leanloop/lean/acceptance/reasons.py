"""Named reasons. Every rejection, and every difference between a recorded verdict and ours, is
explained by one of these codes (a reason string is ``"<code>: <detail>"``)."""

from __future__ import annotations

# precheck reasons, collection profile (the seed's list, Learning Lean Feedback App. B)
TOO_LONG = "too_long"
NO_THEOREM = "no_theorem"
FORBIDDEN = "forbidden_keyword"
HEADER_MISMATCH = "header_mismatch"
LATE_IMPORT = "late_import"

# precheck reasons added by the rl profile (hardened against policy gaming)
NATIVE_DECIDE = "native_decide"
TRUSTS_COMPILER = "trusts_compiler"
SORRY_DISGUISE = "sorry_in_disguise"
COMPILER_OVERRIDE = "compiler_override"
KERNEL_CHECK_OPTION = "kernel_check_option"
CANDIDATE_HEARTBEATS = "candidate_sets_heartbeats"
OPTION_NOT_ALLOWED = "set_option_not_allowed"
SYNTAX_EXTENSION = "syntax_extension"
METAPROGRAM = "metaprogram"
EXIT_COMMAND = "exit_command"
MESSAGE_SUPPRESSION = "message_suppression"
INSTANCE_DECLARATION = "instance_declaration"
TARGET_REDECLARED = "target_redeclared"
TARGET_MISSING = "target_missing"
TARGET_NOT_THEOREM = "target_not_theorem"
HARNESS_NAME = "harness_name"
UNTERMINATED = "unterminated_literal"
AMBIGUOUS_LEXING = "ambiguous_lexing"
HEADER_NOT_VERBATIM = "header_not_verbatim"
SCOPE_CAPTURE = "scope_capture"

# judgement reasons (after Lean answered)
LEAN_ERROR = "lean_error"
SORRY_WARNING = "sorry_warning"
WARNING_NOT_ALLOWED = "warning_not_allowed"
AXIOM_NOT_ALLOWED = "axiom_not_allowed"
STATEMENT_MISMATCH = "statement_mismatch"
SIGNATURE_UNDECIDED = "signature_undecided"
TRAILER_REPLY_MISSING = "trailer_reply_missing"
NO_TRAILER_REPLY = "no_trailer_reply"
NO_RECORDING = "no_recording"
LEAN_TIMEOUT = "lean_timeout"
INFRA_FAILURE = "infra_failure"
TRUSTED_STATEMENT_ERROR = "trusted_statement_error"
CANDIDATE_FAILURE = "candidate_failure"
HARNESS_LINE_ERROR = "harness_line_error"
UNMATCHED_REPLY = "unmatched_reply"
JUDGE_REJECTED = "judge_rejected"
BAD_REQUEST = "bad_request"

DESCRIPTIONS: dict[str, str] = {
    TOO_LONG: "program longer than the policy's character limit (262,144)",
    NO_THEOREM: "no theorem (or lemma) is declared",
    FORBIDDEN: "uses sorry / admit / axiom / constant / opaque / unsafe outside comments and strings",
    HEADER_MISMATCH: "the import block differs from the benchmark header's",
    LATE_IMPORT: "an import after the header",
    NATIVE_DECIDE: "native_decide (or decide +native): the kernel does not check the computation",
    TRUSTS_COMPILER: "relies on Lean.ofReduceBool / trustCompiler (bv_decide and friends)",
    SORRY_DISGUISE: "sorryAx, `stop` (repeat sorry) or `apply?` (admits the goal it cannot close)",
    COMPILER_OVERRIDE: "@[implemented_by] / @[extern] / @[csimp]: replaces code that native evaluation trusts",
    KERNEL_CHECK_OPTION: "set_option debug.* (e.g. debug.skipKernelTC skips the kernel check)",
    CANDIDATE_HEARTBEATS: "the candidate raises or lifts the heartbeat budget the harness sets (maxHeartbeats N is "
    "allowed for 0 < N <= the harness's budget)",
    OPTION_NOT_ALLOWED: "set_option outside the rl allow-list (options can change elaboration or printing)",
    SYNTAX_EXTENSION: "notation / macro / syntax / infix declarations can reinterpret the trusted statement",
    METAPROGRAM: "elab / #eval / run_cmd / initialize / elaborator attributes run arbitrary meta code "
    "(they can log fake messages at any position or rewrite commands)",
    EXIT_COMMAND: "#exit stops elaboration before the harness's checks",
    MESSAGE_SUPPRESSION: "#guard_msgs swallows Lean's errors for the enclosed command",
    INSTANCE_DECLARATION: "declares or (de)activates an instance: changes how later terms elaborate",
    TARGET_REDECLARED: "the target theorem's name is declared more than once",
    TARGET_MISSING: "the target theorem is not declared",
    TARGET_NOT_THEOREM: "the target name is declared with a keyword other than theorem/lemma",
    HARNESS_NAME: "mentions the harness's reserved namespace",
    UNTERMINATED: "an unterminated comment or string would swallow the harness's trailer",
    AMBIGUOUS_LEXING: "the masker cannot be sure what Lean's lexer reads (a literal glued to a `#word`, a backslash "
    "or a non-ASCII symbol; a raw string; an escape or numeral not every version reads alike; a "
    "letter whose class the Lean version does not pin): the text rules cannot know which text "
    "is code",
    HEADER_NOT_VERBATIM: "the program does not start with the trusted header verbatim",
    SCOPE_CAPTURE: "include / omit / variable?: a variable every later declaration takes could stand in for the "
    "target in the harness's check line",
    LEAN_ERROR: "Lean reported an error",
    SORRY_WARNING: "Lean warned that a declaration uses sorry",
    WARNING_NOT_ALLOWED: "a warning other than the sorry warning (statement profile: only that one is allowed)",
    AXIOM_NOT_ALLOWED: "#print axioms lists an axiom outside propext / Classical.choice / Quot.sound",
    STATEMENT_MISMATCH: "the compiled declaration does not prove the trusted statement",
    SIGNATURE_UNDECIDED: "the declared signature is spelled differently from the trusted one in a way only Lean's "
    "printed signature can settle (none recorded): neither accepted nor rejected",
    TRAILER_REPLY_MISSING: "Lean answered but printed no #print axioms reply for the harness check",
    NO_TRAILER_REPLY: "the backend has no answer for the harness trailer (e.g. replay recordings)",
    NO_RECORDING: "the replay backend has no recorded Lean answer for this program",
    LEAN_TIMEOUT: "Lean did not finish within the per-item timeout",
    INFRA_FAILURE: "the Lean process or server failed",
    TRUSTED_STATEMENT_ERROR: "the trusted statement itself does not parse or elaborate",
    CANDIDATE_FAILURE: "the Lean process died or garbled its reply after the candidate's program was sent "
    "(hardened profiles: the candidate's doing, scored 0)",
    HARNESS_LINE_ERROR: "an error on the harness's own lines while the trusted statement elaborates cleanly "
    "without the candidate: placed there by the candidate",
    UNMATCHED_REPLY: "a message positioned outside the program Lean was sent: not Lean's reply to this request",
    JUDGE_REJECTED: "comparator (the judge) rejected the solution: a different statement, an axiom outside "
    "permitted_axioms, or the kernel's replay of the solution failed",
    BAD_REQUEST: "the request is malformed (empty program, missing name or statement)",
}


def reason(code: str, detail: str = "") -> str:
    return f"{code}: {detail}" if detail else code


def code_of(reason_text: str) -> str:
    return reason_text.split(":", 1)[0].strip()
