"""docs/paper_protocols.yaml against the designs' own texts (../shared/seeds/) and the paper configs:
every paper value is quoted from its seed (the quote is there, holds the value, and sits in the
section named), every "not given" names the terms searched for and the seed states no value near
them, every paper config resolves (as its stage resolves it) to the value listed, every code row's
worked example runs the code, every paper config is listed, and docs/paper_protocols.md is the
YAML's rendering. A wrong number, section or "not given" planted in a copy of the YAML fails."""

from __future__ import annotations

import copy
import importlib.util
import re
import sys

import pytest

from leanloop.paths import REPO_ROOT

_spec = importlib.util.spec_from_file_location("paper_protocols", REPO_ROOT / "docs" / "protocols.py")
protocols = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("paper_protocols", protocols)
_spec.loader.exec_module(protocols)

DOCUMENT = protocols.load_document()
STAGES = DOCUMENT["stages"]
ENTRIES = [(stage, entry) for stage, entries in STAGES.items() for entry in entries]


def _id(item) -> str:
    stage, entry = item
    return f"{stage}:{entry['setting'][:60]}"


def _find(stage: str, prefix: str) -> dict:
    return next(e for e in STAGES[stage] if e["setting"].startswith(prefix))


@pytest.mark.parametrize("item", ENTRIES, ids=[_id(item) for item in ENTRIES])
def test_entry_is_well_formed(item):
    _, entry = item
    assert {"setting", "paper", "status", "seed"} <= set(entry), entry
    assert entry["seed"] in DOCUMENT["seeds"], f"seed {entry['seed']} is not in the seeds table"
    assert entry["status"] in protocols.STATUSES
    if entry["paper"] == "not given":
        assert entry["status"] == "ours" and "value" in entry and entry.get("ours"), (
            "a number the design does not give is ours: give the config's value and why"
        )
        assert entry.get("searched", {}).get("terms"), "a `not given` row names the terms searched for"
        assert "quote" not in entry and "section" not in entry
    else:
        assert entry.get("section") and entry.get("quote"), "a paper value is quoted from its seed with its section"
    if entry["status"] in ("ours", "option", "open"):
        assert entry.get("ours"), f"status {entry['status']} needs `ours` saying why / what is missing"
    if entry["status"] == "matches" and "value" in entry:
        assert entry["value"] == entry["paper"], "status matches but the config's value differs from the paper's"
    assert "config" in entry or "code" in entry or entry["status"] == "open", "where is it implemented?"
    if "code" in entry and "config" not in entry:
        assert entry.get("example") in EXAMPLES, "a code row names its worked example (EXAMPLES below)"


@pytest.mark.parametrize("item", ENTRIES, ids=[_id(item) for item in ENTRIES])
def test_row_is_what_its_seed_says(item):
    _, entry = item
    assert protocols.quote_problems(DOCUMENT, entry) == []


CONFIG_ENTRIES = [item for item in ENTRIES if "config" in item[1]]


@pytest.mark.parametrize("item", CONFIG_ENTRIES, ids=[_id(item) for item in CONFIG_ENTRIES])
def test_paper_config_agrees_with_the_protocol(item, artifacts):
    _, entry = item
    paths = entry["config"] if isinstance(entry["config"], list) else [entry["config"]]
    assert all((REPO_ROOT / p).is_file() for p in paths), paths
    got = protocols.config_value(entry, REPO_ROOT)
    want = protocols.expected(entry)
    assert got == want, (
        f"{entry['config']} {entry['key']} resolves to {got!r}; docs/paper_protocols.yaml says "
        f"{want!r} ({entry.get('section') or 'ours'})"
    )


def test_every_paper_config_is_listed():
    listed = {
        p
        for _, entry in CONFIG_ENTRIES
        for p in (entry["config"] if isinstance(entry["config"], list) else [entry["config"]])
    }
    papers = {str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "configs").rglob("paper*.yaml")}
    assert papers, "no paper config found"
    assert papers <= listed, f"paper configs missing from docs/paper_protocols.yaml: {sorted(papers - listed)}"


def test_the_rendered_markdown_is_up_to_date():
    assert (REPO_ROOT / "docs" / "paper_protocols.md").read_text() == protocols.render(DOCUMENT), (
        "docs/paper_protocols.md is stale: run python docs/protocols.py"
    )


def test_lookup_reads_dotted_keys_and_list_indices():
    document = {"a": {"b": [{"c": 3}, {"c": 4}]}, "x": 2}
    assert protocols.lookup(document, "a.b.1.c") == 4
    with pytest.raises(KeyError, match="no 'z'"):
        protocols.lookup(document, "a.z")


def test_configs_are_read_as_the_stage_resolves_them(artifacts):
    """A key the paper config does not write resolves to the stage's default (dataclass defaults, a
    Lightning dry run), and a layered list of files is read in order, later wins."""
    lora = protocols.resolved_config("configs/autoformalizer/paper.yaml")["model"]["policy"]["adapters"]
    assert "attention_rank" not in (REPO_ROOT / "configs/autoformalizer/paper.yaml").read_text()
    assert (lora["attention_rank"], lora["expert_rank"]) == (64, 8)  # the adapter config's defaults
    assert protocols.resolved_config("configs/feedback_model/eval/paper.yaml")["cascade"]["gate_dtype"] == "auto"
    layered = protocols.resolved_config(["configs/rl/paper.yaml", "configs/rl/reward_lean_matched.yaml"])
    assert layered["model"]["reward"]["protocol"] == "lean_matched" and layered["model"]["lean"]["timeout"] == 60.0


# -- the checker catches what it is for ----------------------------------------------------------------
def _problems(entry: dict) -> list[str]:
    return protocols.quote_problems(DOCUMENT, entry)


def test_a_planted_wrong_number_fails():
    entry = copy.deepcopy(_find("cascade", "bootstrap resamples"))
    assert _problems(entry) == []
    entry["paper"] = 500
    assert any("does not state [500.0]" in p for p in _problems(entry))
    quoted = copy.deepcopy(_find("rl", "timeout audit budget"))
    quoted["quote"] = quoted["quote"].replace("600 s", "300 s")
    assert any("not in" in p for p in _problems(quoted))  # a quote the seed does not hold


def test_a_planted_wrong_section_fails():
    entry = copy.deepcopy(_find("sft", "attempts per statement"))
    assert entry["section"] == "App. B" and _problems(entry) == []
    entry["section"] = "3.1"
    assert any("sits in section ['App. B'], not '3.1'" in p for p in _problems(entry))
    draft = copy.deepcopy(_find("cascade", "speculative draft tokens"))
    draft["section"] = "5"  # the parent section: the quote sits in 5.3
    assert _problems(draft)


def test_a_planted_wrong_not_given_fails():
    """The draft-token count is stated in Section 5.3: calling it "not given" fails, naming the
    sentence; the same row passes only if that sentence is listed as another setting's."""
    entry = copy.deepcopy(_find("cascade", "speculative draft tokens"))
    for key in ("section", "quote"):
        entry.pop(key)
    entry.update(paper="not given", value=8, status="ours", searched={"terms": ["draft"]})
    problems = _problems(entry)
    assert problems and any("drafting eight tokens at a time" in p for p in problems)
    sentence = re.search(r"'([^']*drafting eight tokens[^']*)'", "\n".join(problems)).group(1)
    assert sentence
    heartbeats = copy.deepcopy(_find("data", "heartbeat budget"))
    for key in ("section", "quote"):
        heartbeats.pop(key)
    heartbeats.update(paper="not given", searched={"terms": ["heartbeats"], "within": ["App. B"]})
    assert any("800,000" in p for p in _problems(heartbeats))


def test_a_planted_wrong_config_value_fails(artifacts):
    entry = copy.deepcopy(_find("autoformalizer", "Stage 1 micro-batch"))
    assert protocols.config_value(entry) == protocols.expected(entry) == 2
    entry["paper"] = 4  # the value the project had before; the seed says 2
    assert protocols.config_value(entry) != protocols.expected(entry)
    assert any("does not state [4.0]" in p for p in _problems(entry))


def test_the_inventory_quotes_its_seeds():
    """Every item found in a seed is a verbatim span of it, in the section it is filed under."""
    assert DOCUMENT.get("inventory") and protocols.inventory_problems(DOCUMENT) == []


def test_every_seed_section_with_an_item_has_its_rows():
    """The coverage line: each item of the inventory is quoted by a row (a row may say `open`)."""
    missing = [(section, items) for _, section, _, _, items in protocols.coverage(DOCUMENT) if items]
    assert not missing, f"items without a row: {missing}"
    assert set(DOCUMENT["inventory"]) == set(DOCUMENT["seeds"])  # every seed enumerated


def test_a_planted_wrong_inventory_item_fails():
    planted = copy.deepcopy(DOCUMENT)
    sections = planted["inventory"]["004_d83ffb36c7ddb154.txt"]
    sections["How do provers hack the checker?"].append("res = lean.run(src, timeout_s=600)")
    assert any("does not say" in p for p in protocols.inventory_problems(planted))
    sections["How do provers hack the checker?"][-1] = (
        "the only benign axioms are propext, Classical.choice and Quot.sound"
    )
    assert any("not 'How do provers hack the checker?'" in p for p in protocols.inventory_problems(planted))
    stages = planted["stages"]
    stages["lean"] = [e for e in stages["lean"] if "ALLOWED" not in str(e.get("quote"))]
    assert not protocols.covered(
        planted, "004_d83ffb36c7ddb154.txt", 'ALLOWED = {"propext", "Classical.choice", "Quot.sound"}'
    )


def test_numbers_are_read_as_the_seeds_write_them():
    assert protocols.numbers_in("a budget of 800,000 Lean heartbeats") == [800000.0]
    assert 0.05 in protocols.numbers_in("with 5% warmup") and 3e-5 in [
        round(n, 12) for n in protocols.numbers_in("learning rate 3\\times 10^{-5}")
    ]
    assert 8.0 in protocols.numbers_in("drafting eight tokens") and 258000.0 in protocols.numbers_in("258k steps")
    assert protocols.numbers_in("the encoder (ModernBERT) and BF16") == []


# -- worked examples of the code rows ------------------------------------------------------------------
def _collection_llf_heartbeats():
    from leanloop.lean.acceptance import AcceptancePolicy
    from leanloop.lean.types import VerifyRequest

    statement = "theorem t (h₀ : 1 = 1) : True := by\n"
    submission = AcceptancePolicy("collection_llf", header="").prepare(
        VerifyRequest(program=statement + "  trivial", name="t", statement=statement)
    )
    assert submission.program.splitlines()[0] == "set_option maxHeartbeats 800000"
    assert AcceptancePolicy("collection_llf").profile.heartbeats == 800_000


def _collection_llf_compares_printed_signatures():
    from leanloop.lean.acceptance.policy import signature_verdict
    from leanloop.lean.types import VerifyRequest

    statement = "theorem t (x y : ℕ) (h₀ : x = 2) : x + x = 4 := by\n"
    request = VerifyRequest(program="", name="t", statement=statement)
    spelled = "theorem t (x : ℕ) (y : ℕ)\n    (h₀ : (x) = 2) :\n  x+x = 4 := by\n  omega"
    assert signature_verdict(request, spelled)[0] == "same"  # grouping, parentheses, spacing: as printed
    renamed = signature_verdict(request, "theorem t (x y : ℕ) (h : x = 2) : x + x = 4 := by\n  omega")
    assert renamed[0] == "different" and "signature_text" in renamed[1]  # a binder renaming, as App. B says
    assert signature_verdict(request, "theorem t (x y : ℕ) (h₀ : x = 2) : 2 * x = 4 := by omega")[0] == "undecided"
    assert signature_verdict(request, "theorem u (x : ℕ) : x = x := rfl")[0] == "different"  # no declaration of t


def _statement_rule_is_recorded_per_row():
    from leanloop.lean.acceptance import AcceptancePolicy

    rules = {name: AcceptancePolicy(name).profile.statement_rule for name in ("collection", "collection_llf", "rl")}
    assert rules == {"collection": "none", "collection_llf": "signature_text", "rl": "check_theorem"}


def _unlabelled_outcomes_get_no_label():
    from data.build import corpus_label
    from leanloop.lean.types import Category

    assert corpus_label(Category.VALID) is True and corpus_label(Category.INVALID) is False
    for category in (Category.TIMEOUT, Category.INFRA_ERROR, Category.PRECHECK_REJECTED):
        assert corpus_label(category) is None


def _one_token_head_and_tail():
    from classifiers.model_io import program_budget
    from classifiers.truncation import head_tail_sizes, truncate_head_tail

    assert program_budget(8196, 4, 8192, "the suffix") == 8192  # the 4-token suffix on top
    assert head_tail_sizes(8192) == (2048, 6144)
    kept = truncate_head_tail(list(range(10_000)), 8192)
    assert kept[:2048] == list(range(2048)) and kept[2048:] == list(range(10_000 - 6144, 10_000))


def _packed_rows_score_each_program():
    import torch

    from classifiers.model_io import OneTokenInputs

    batch = OneTokenInputs.collate_packed(None, [[5, 6, 7], [8, 9]])
    assert batch["position_ids"].tolist() == [[0, 1, 2, 0, 1]]  # positions restart: each program alone
    assert torch.equal(batch["verdict_positions"], torch.tensor([2, 4]))


def _calibrated_gate_row():
    from feedback_model.cascade_report import EVALUATORS

    assert "cascade" in EVALUATORS and "cascade (calibrated gate)" in EVALUATORS


def _bootstrap_groups():
    from feedback_model.cascade_report import bootstrap_group

    assert bootstrap_group({"benchmark": "minif2f", "group": "amc12_p1"}) != bootstrap_group(
        {"benchmark": "proofnet", "group": "amc12_p1"}
    )


def _block_normalization():
    from leanloop.traces.parse import extract_blocks

    (block,) = extract_blocks("x\n/- <feedback>\n  -- proof state:\n  h :   P\n\n  ⊢ Q  \n</feedback> -/\n")
    assert block.key == "-- proof state: h : P ⊢ Q"


def _coverage_over_pools_with_a_valid_candidate():
    from leanloop.metrics.budget import build_pools, coverage_at_budget

    # pool a: its valid candidate ranked first; pool b: no valid candidate (left out of the mean)
    pools = build_pools([1, 0, 0, 0], [0.9, 0.1, 0.8, 0.7], ["a", "a", "b", "b"])
    assert coverage_at_budget(pools, 1) == 1.0 and coverage_at_budget(pools, 1, "random") == 0.5


def _cascade_ranking_ties():
    from leanloop.metrics.budget import build_pools, coverage_at_budget

    # accepted first, ties broken by the one-token score: the accepted 0.6 before the rejected 0.9
    pools = build_pools([1, 0], [0.6, 0.9], ["p", "p"], verdicts=[1, 0])
    assert coverage_at_budget(pools, 1) == 1.0
    assert coverage_at_budget(build_pools([1, 0], [0.6, 0.9], ["p", "p"]), 1) == 0.0  # by score alone


def _matched_targets():
    import numpy as np

    from leanloop.metrics.report import Predictions, matched_targets

    rows = [{"split": "validation"}] * 4 + [{"split": "test"}] * 2
    cascade = Predictions(
        "cascade",
        np.array([1, 1, 0, 0, 1, 0]),
        np.array([0.9, 0.2, 0.8, 0.1, 0.9, 0.9]),
        ["g"] * 6,
        np.array([1, 0, 1, 0, 1, 1]),
        rows,
    )
    assert matched_targets([cascade], "cascade", 0.5) == (0.5, 0.5)  # its validation rows only


def _paired_bootstrap():
    from leanloop.metrics.bootstrap import paired_bootstrap

    labels, groups = [1, 0, 1, 0, 1, 0], ["a", "a", "b", "b", "c", "c"]
    gain = paired_bootstrap(
        labels, groups, predictions_a=labels, predictions_b=[1, 1, 1, 1, 1, 1], metrics=("accuracy",), n_resamples=200
    )["accuracy"]
    assert gain.point == pytest.approx(0.5) and gain.low == gain.high == pytest.approx(0.5)  # same resamples


def _eq13_cost_includes_other():
    from feedback_model.cascade_report import mean_cost

    # LLF App. G's measured pipeline, per candidate: 0.123 gate, q = 0.648 of 0.236 trace, and
    # (3.4 + 25.4 load / transition + 8.9 other) / N with N = 3,413 (2,212 gate positives / 0.648)
    n, q = 3413, 0.648
    records = [
        {"cost": {"gate_s": 0.123, "load_s": 28.8 / n, "feedback_s": 0.236 if i < q * n else 0.0, "other_s": 8.9 / n}}
        for i in range(n)
    ]
    cost = mean_cost(records)
    assert cost["other_s"] == pytest.approx(8.9 / n)
    assert cost["total_s"] == pytest.approx(0.287, abs=0.002)  # the recorded 979.7 s / 3,413


def _residency_one_load_one_transition():
    from feedback_model.cascade import CascadeEvaluator
    from leanloop.evaluator import Prediction

    loads = []

    class Fixed:
        def __init__(self, verdict):
            self.verdict = verdict

        def score(self, programs, deadline=None):
            return [Prediction(self.verdict, float(self.verdict), None, 0.0) for _ in programs]

    cascade = CascadeEvaluator(
        lambda: (loads.append("gate"), Fixed(True))[1], lambda: (loads.append("feedback"), Fixed(True))[1], "sequential"
    )
    predictions = cascade.score(["a", "b", "c", "d", "e"], batch_size=2)
    assert loads == ["gate", "feedback"] and cascade.loaded == {}  # one load, one transition per call
    assert all(p.verdict for p in predictions) and cascade.last_timing.gate_positive == 5


def _speculative_config_for_sampling():
    from feedback_model.config import TraceGenerationConfig
    from feedback_model.speculative import vllm_speculative_config

    config = vllm_speculative_config(TraceGenerationConfig(draft_tokens=8))
    assert config["num_speculative_tokens"] == 8 and config["method"] == "ngram"  # drafts copied from the input
    assert vllm_speculative_config(TraceGenerationConfig(draft_tokens=0)) is None


def _first_returned_record_per_line():
    from leanloop.lean.types import Position, TacticRecord
    from leanloop.traces.annotate import annotate

    program = "theorem t : True ∧ True := by\n  constructor <;> trivial"
    # ASSUMED REPLY: two tactic records starting on line 2, the inner (right) one returned first
    inner = TacticRecord("trivial", "⊢ True", Position(2, 18), Position(2, 25))
    outer = TacticRecord("constructor <;> trivial", "⊢ True ∧ True", Position(2, 2), Position(2, 25))
    first = annotate(program, [], [inner, outer])
    assert "⊢ True\n" in first and "⊢ True ∧ True" not in first
    assert "⊢ True ∧ True" in annotate(program, [], [inner, outer], same_line="leftmost")
    empty_first = TacticRecord("constructor", "", Position(2, 2))  # retained: nothing printed, inner not used
    assert "proof state" not in annotate(program, [], [empty_first, inner])


def _lean_share_counts_every_rollout():
    from rl.hybrid import StepScores
    from rl.reward import Protocol, RolloutReward, Source

    # App. F: "the fraction of rollouts whose Lean verdict arrives before the evaluator finishes"; 10
    # rollouts: 3 Lean verdicts before the cutoff at 90 s, 1 after (awaited), 3 evaluator, 2 prechecks, 1 no code
    lean = [RolloutReward(0.0, Source.LEAN, "invalid", lean_time_s=t) for t in (10.0, 40.0, 80.0, 120.0)]
    rest = (
        [RolloutReward(1.0, Source.EVALUATOR, "cancelled")] * 3
        + [RolloutReward(0.0, Source.PRECHECK, "precheck_rejected")] * 2
        + [RolloutReward(0.0, Source.EXTRACTION, "no_code")]
    )
    stats = StepScores(lean + rest, Protocol("hybrid"), scoring_s=130.0, cutoff_s=90.0).stats()
    assert stats["reward/lean_share"] == pytest.approx(3 / 10)
    assert stats["reward/lean_share_checked"] == pytest.approx(4 / 7)  # ours, beside it


def _head_tail_at_the_encoder_context():
    from classifiers.truncation import head_tail_sizes

    assert head_tail_sizes(8192) == (2048, 6144)  # the seed's split of 8,192 program tokens
    assert head_tail_sizes(8192 - 2) == (2047, 6143)  # ModernBERT's [CLS] and [SEP] inside its 8,192 positions


def _leanprm_exact_is_whole_proof_match():
    from prm.metrics import step_metrics

    truth = [[True, True, False, False], [True, True]]
    predicted = [[True, True, True, False], [True, True]]  # one label off in the first proof
    m = step_metrics(predicted, truth)
    assert m["exact"] == 0.5 and m["step_accuracy"] == pytest.approx(5 / 6)


def _goal_exact_match_over_elaborated_goals():
    from autoformalizer.metrics import goal_exact_match

    # three problems: one candidate goal matches, one differs, one never elaborated (no goal)
    value, pairs = goal_exact_match(["⊢ x = 2", "⊢ x = 3", None], ["⊢ x  = 2", "⊢ x = 2", "⊢ y = 1"])
    assert (value, pairs) == (0.5, 2)


def _pass_at_k_counts_missing_attempts_as_failures():
    from leanloop.prover.passk import StatementResult, pass_at_k_report

    results = [
        StatementResult("a", 2, 2, 1, {"valid": 1, "invalid": 1}),
        StatementResult("b", 2, 1, 0, {"timeout": 1, "invalid": 1}),
        StatementResult("c", 1, 1, 1, {"valid": 1}),
    ]  # one attempt short of k = 2
    row = pass_at_k_report(results, [2])["2"]
    assert row["pass_at_k"] == pytest.approx(2 / 3) and row["statements"] == 3  # Eq. 10: all problems


def _std_across_repeats():
    from leanloop.prover.passk import repeat_summary

    summary = repeat_summary([0.724, 0.728, 0.720])  # three pass@32 evaluations of one checkpoint
    assert summary["mean"] == pytest.approx(0.724) and summary["std"] == pytest.approx(0.004)


def _drift_pairs():
    from rl.drift import DriftConfig, DriftMonitor

    monitor = DriftMonitor(DriftConfig(steps=[25, 125, 250], min_pairs=1))
    monitor.observe(True, True, "in_step")  # a rollout Lean labelled within the step
    monitor.observe(True, False, "audit")  # a timeout the audit resolved afterwards
    monitor.observe(None, True, "in_step")  # no evaluator verdict: no pair
    assert monitor.due(25) and not monitor.due(26)
    report = monitor.report(25)
    assert report.pairs == 2 and report.fpr == 1.0 and report.accuracy == 0.5


def _trivial_never_readmitted():
    from rl.curriculum import TRIVIAL, Curriculum, CurriculumConfig

    curriculum = Curriculum(["p", "q"], CurriculumConfig(retire_after=1, readmit_after_steps=0))
    curriculum.set_status("p", TRIVIAL, 1, "closes by simp")
    curriculum.record("q", 1, 1, 1)  # always solved: retired, then re-admitted
    assert curriculum.readmit(5) == ["q"] and curriculum.states["p"].status == TRIVIAL


def _typecheck_is_no_error():
    from dataclasses import replace

    from leanloop.lean.acceptance import AcceptancePolicy
    from leanloop.lean.acceptance.submission import verbatim
    from leanloop.lean.acceptance.policy import PROFILES
    from leanloop.lean.types import Category, LeanMessage, LeanResponse, Position, ResponseStatus, VerifyRequest

    program = "theorem t : 1 = 1 := by sorry"
    request = VerifyRequest(program=program)
    allowed = AcceptancePolicy(replace(PROFILES["statement"], only_sorry_warning=False), header="")
    # ASSUMED REPLY: Lean's sorry warning plus an unused-variable linter warning, then an error
    sorry = LeanMessage("warning", "declaration uses 'sorry'", Position(1, 8))
    linter = LeanMessage("warning", "unused variable `x`", Position(1, 8))
    error = LeanMessage("error", "type mismatch", Position(1, 22))
    judge = lambda messages: allowed.judge(
        request, verbatim(program), LeanResponse(ResponseStatus.OK, messages=messages)
    )
    assert judge([sorry, linter]).category is Category.VALID  # no error: it type-checks
    assert judge([sorry, error]).category is Category.INVALID


def _compile_at_k_over_all_statements():
    from autoformalizer.metrics import compile_at_k

    curve = compile_at_k([["passed"], ["failed", "passed"], ["failed", "failed"], ["timeout", "failed"]], ks=(1, 2))
    assert curve.values == {1: 0.25, 2: 0.5}  # shares of all four statements


def _pass_at_cap_over_all_statements():
    from autoformalizer.metrics import compile_at_k

    cap = 5
    curve = compile_at_k([["failed"] * 4 + ["passed"], ["unavailable"], ["failed"] * 5], ks=range(1, cap + 1))
    assert curve.values[cap] == pytest.approx(1 / 3) and curve.undetermined[cap] == 1


def _failure_modes_of_unsolved():
    from autoformalizer.metrics import failure_modes
    from autoformalizer.typecheck import CheckStatus, StatementCheck
    from leanloop.lean.types import LeanMessage

    from autoformalizer.metrics import ERROR_CATEGORIES

    assert ERROR_CATEGORIES == tuple(_find("autoformalizer", "error breakdown")["paper"])
    unknown = StatementCheck(CheckStatus.FAILED, "", [LeanMessage("error", "unknown identifier 'Nat.foo'")])
    counts = failure_modes([unknown, None, StatementCheck(CheckStatus.TIMEOUT, "")])
    assert counts["unknown_ident"] == 1 and counts["malformed"] == 1 and counts["no_verdict"] == 1
    assert sum(counts[c] for c in ERROR_CATEGORIES) == 1  # the seed's five count Lean's errors only


def _tokens_per_second_excludes_lean():
    import time

    from autoformalizer.evaluate import LeanClock
    from autoformalizer.metrics import tokens_per_sec

    class SlowLean:
        def check_many(self, statements, headers):
            time.sleep(0.05)
            return []

    clock = LeanClock(SlowLean())
    began = time.perf_counter()
    clock.check_many(["s"], [None])
    wall = time.perf_counter() - began
    assert clock.seconds >= 0.05 and tokens_per_sec(100, wall - clock.seconds + 1.0) > 100 / (wall + 1.0)


def _search_config_cites_its_constants():
    import ast

    tree = ast.parse((REPO_ROOT / "search/config.py").read_text())
    config = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SearchConfig")
    body = config.body
    documented = 0
    for i, node in enumerate(body):
        if isinstance(node, ast.AnnAssign) and i + 1 < len(body) and isinstance(body[i + 1], ast.Expr):
            text = body[i + 1].value.value.lower()
            if re.search(r"paper|reference|ours|not given|seed", text):
                documented += 1
    assert documented >= 5


def _allowed_axioms_are_the_three_standard_ones():
    from leanloop.lean.acceptance import ALLOWED_AXIOMS, AcceptancePolicy

    assert ALLOWED_AXIOMS == {"propext", "Classical.choice", "Quot.sound"}
    assert AcceptancePolicy("rl").profile.allowed_axioms == ALLOWED_AXIOMS


def _rl_harness_elaborates_the_trusted_statement():
    from leanloop.lean.acceptance import AcceptancePolicy
    from leanloop.lean.types import VerifyRequest

    trusted = "theorem t (x : ℕ) (h₀ : x = 2) : x + x = 4 := by\n"
    weakened = "theorem t (x : ℕ) (h₀ : x = 2) : True := by\n  trivial"  # the policy's own statement
    submission = AcceptancePolicy("rl", header="").prepare(VerifyRequest(program=weakened, name="t", statement=trusted))
    lines = submission.program.split("\n")
    assert "x + x = 4" in "\n".join(lines[: submission.block_lines])  # the trusted claim, elaborated first
    check = lines[submission.check_line - 1]  # the candidate's `t` must have the trusted claim's type
    assert "type_of% @_root_.LeanloopHarness.expected" in check and check.endswith(":= @_root_.t")
    assert lines[submission.axioms_line - 1].startswith("#print axioms")


def _rl_prechecks_ban_the_seeds_tokens():
    from leanloop.lean.acceptance import AcceptancePolicy

    policy = AcceptancePolicy("rl", header="")
    base = "theorem t : 1 + 1 = 2 := by\n  "
    for body in (
        "sorry",
        "admit",
        "native_decide",
        "exact ax\naxiom ax : 1 + 1 = 2",
        "rfl\n@[implemented_by f] def g : Nat := 0",
        'rfl\n@[extern "c"] def h : Nat := 0',
    ):
        assert not policy.precheck(base + body, name="t").ok, body
    assert policy.precheck(base + "rfl", name="t").ok


def _timeouts_and_errors_score_zero():
    from leanloop.lean.types import Category, Outcome
    from leanloop.prover.statements import Statement
    from rl.reward import combine
    from rl.reward_harness import Candidate, Stage

    problem = Statement("t", "t", "", "", "theorem t : True := by")
    ready = Candidate(problem, "x", Stage.READY, program="theorem t : True := by trivial")
    rewards = {
        c: combine("lean", ready, Outcome(c), None).reward for c in (Category.VALID, Category.INVALID, Category.TIMEOUT)
    }
    assert rewards == {Category.VALID: 1.0, Category.INVALID: 0.0, Category.TIMEOUT: 0.0}


def _axioms_come_from_the_trailer_message_only():
    from leanloop.lean.acceptance.axioms import parse_axioms_reply

    reply = parse_axioms_reply("'t' depends on axioms: [propext, Classical.choice, Quot.sound]")
    assert reply is not None and set(reply.axioms) == {"propext", "Classical.choice", "Quot.sound"}
    assert parse_axioms_reply("EXIT_CODE:0") is None  # a printed marker is not a reply


def _statement_filters_run_the_guides_checks():
    from rl.filters import CHECKS, FilterConfig, decide, filter_programs
    from leanloop.prover.statements import Statement

    assert CHECKS == ("compile", "hypotheses", "negation", "triviality")
    statement = Statement("s", "s", "import Mathlib\n", "", "theorem s (n : ℕ) (h : 0 < n) : n - 1 < n := by")
    programs = {p.check: p for p in filter_programs(statement, FilterConfig())}
    assert programs["compile"].request.program.rstrip().endswith("sorry")  # compiles with sorry
    assert ": False := by" in programs["hypotheses"].request.statement  # False from the hypotheses
    assert "¬" in programs["negation"].request.statement
    flags = {"nat_subtraction": True, "nat_division": False, "answer_in_hypothesis": False}
    assert decide({"checks": {}, "flags": flags}, FilterConfig())[0] == "review"  # high-risk: to an expert
    unfaithful = {"checks": {}, "flags": {}, "judge": {"faithful": False}}
    assert decide(unfaithful, FilterConfig()) == ("drop", ["judge_unfaithful"])


def _verifier_reads_prose_steps_only():
    from leanloop.training.models import ModelSpec, load_tokenizer
    from prm.paired import PairedStep
    from prm.verifier_io import encode_proof

    tokenizer = load_tokenizer(ModelSpec(name="qwen3-tiny"))
    steps = [PairedStep("Fix x and y.", "intro x y"), PairedStep("Then x + y = y + x.", "exact add_comm x y")]
    for layout in ("after_each_step", "after_proof"):
        proof = encode_proof("x + y = y + x for all naturals", [s.prose for s in steps], None, tokenizer, layout)
        text = tokenizer.decode(proof.ids)
        assert "1. Fix x and y." in text and "intro x y" not in text and "add_comm" not in text


def _step_labels_propagate_from_the_first_failure():
    from prm.labels_from_lean import propagate

    labels = [ok for ok, _ in propagate(6, 4, "linarith failed")]  # the seed's example: step 5 fails
    assert labels == [True, True, True, True, False, False]
    assert all(ok for ok, _ in propagate(3, None, ""))  # every step passes: the proof is correct


def _best_of_n_against_a_random_pick():
    from prm.metrics import best_of_n

    groups = ["p"] * 4 + ["q"] * 4
    predicted = [[True, False], [True, True], [False], [True, False]] + [[True], [False], [False], [False]]
    correct = [False, True, False, False] + [True, False, False, False]
    result = best_of_n(groups, predicted, correct)
    assert result["problems"] == 2 and result["verifier_pick"] == 1.0 and result["random_pick"] == pytest.approx(0.25)


def _search_rewards_proofs_by_depth():
    from search.env import EnvGoal
    from search.goals import parse_goal
    from search.mcts import GoalNode, TacticEdge

    def node(text: str) -> GoalNode:
        return GoalNode(EnvGoal((parse_goal(text),)))

    leaf = node("⊢ True")
    leaf.solved_depth = 0  # closed
    two = node("x : ℕ\n⊢ x = x")
    two.edges = [TacticEdge("trivial", 1.0, [leaf])]
    two.refresh_solved()
    root = node("⊢ ∀ x : ℕ, x = x")
    root.edges = [TacticEdge("intro x", 0.5, [two]), TacticEdge("simp", 0.5, [node("⊢ False")])]  # OR: either tactic
    root.refresh_solved()
    assert (two.solved_depth, root.solved_depth, root.value) == (1, 2, -2.0)  # the value: minus the tactics left
    assert root.edges[1].solved_depth is None  # AND: an edge is solved only when all its goals are


def _cycle_keys_ignore_order_names_and_spacing():
    from search.goals import parse_goal

    a = parse_goal("x y : ℕ\nh : x < y\n⊢ x + 1 ≤ y")
    b = parse_goal("h :  a < b\na b : ℕ\n⊢ a + 1 ≤ b")  # reshuffled, renamed, respaced
    assert a.cycle_key == b.cycle_key and a.exact_key != b.exact_key
    assert parse_goal("x y : ℕ\nh : y < x\n⊢ x + 1 ≤ y").cycle_key != a.cycle_key


def _first_tokens_are_capped():
    import torch

    from search.sampling import first_token_plan

    logits = torch.tensor([5.0, 4.0, 3.0, 2.0, float("-inf")])
    plan = first_token_plan(logits, samples=6, cap=2, generator=torch.Generator().manual_seed(0))
    assert len(plan) == 6 and max(plan.count(t) for t in set(plan)) <= 2 and 4 not in plan


def _search_data_holds_out_by_file():
    from search.build_data import theorem_split

    splits = [theorem_split(f"Mathlib/File{i}.lean", "thm", 0.05, 0.10) for i in range(2000)]
    assert abs(splits.count("test") / 2000 - 0.10) < 0.03 and abs(splits.count("valid") / 2000 - 0.05) < 0.02
    assert splits == [theorem_split(f"Mathlib/File{i}.lean", "thm", 0.05, 0.10) for i in range(2000)]  # stable


def _experts_are_unfused_into_linear_layers():
    from torch import nn

    from leanloop.training.moe import UNFUSED_MODEL_TYPE, tiny_qwen3_moe

    model = tiny_qwen3_moe(unfused=True)
    assert model.config.model_type == UNFUSED_MODEL_TYPE == "qwen3_moe_unfused"
    names = {n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, nn.Linear) and ".experts." in n}
    assert names == {"gate_proj", "up_proj", "down_proj"}  # one nn.Linear per projection per expert


def _prompt_asks_for_a_sorry_statement():
    from autoformalizer.prompts import formalize_prompt
    from leanloop.training.packing import completion_example

    prompt = formalize_prompt("Show that 2 + 2 = 4.")
    assert "`:= by sorry`" in prompt and "Show that 2 + 2 = 4." in prompt

    class Chars:  # one token per character
        eos_token_id = None

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [ord(c) for c in text]}

    example = completion_example(Chars(), prompt, "theorem t : 2 + 2 = 4 := by sorry", add_eos=False)
    assert example["labels"][: len(prompt)] == [-100] * len(prompt) and -100 not in example["labels"][len(prompt) :]


def _group_advantage_is_the_seeds_formula():
    import torch

    from leanloop.grpo.objective import group_advantages

    rewards = torch.tensor([0.1, 0.3 + 0.7 * 0.5, 0.0, 0.1])  # one group of G = 4
    got = group_advantages(rewards, 4).advantages
    want = (rewards - rewards.mean()) / (rewards.std() + 1e-4)  # A_i = (R - mean R) / (std R + δ)
    assert torch.allclose(got, want, atol=1e-5)


def _well_formed_and_faithfulness_as_the_seed_defines():
    from autoformalizer.metrics import faithfulness_code, well_formed_rate
    from autoformalizer.statements import faithfulness, well_formed

    reference = "theorem ref (x : ℝ) (h : 2 * x = 4) : x = 2 := by sorry"
    assert faithfulness("theorem mine (x : ℝ) (h : 2 * x = 4) : x = 2 := by\n  linarith", reference) == 1.0
    assert 0 < faithfulness("theorem mine (x : ℝ) : x = 2 := by sorry", reference) < 1
    assert well_formed(reference).ok and not well_formed("theorem t (x : ℝ : x = 2 := by sorry").ok
    assert not well_formed("x = 2").ok  # no declaration keyword, no signature
    assert well_formed_rate([reference, "x = 2"]) == 0.5 and faithfulness_code([reference], [reference]) == 1.0


def _mean_iters_over_solved_problems():
    from autoformalizer.metrics import ResourceMonitor, mean_iters_solved

    assert mean_iters_solved([1, 3, 5], [True, True, False]) == 2.0  # the unsolved one is left out
    with ResourceMonitor() as monitor:
        sum(range(10_000))
    assert monitor.result["peak_memory_bytes"] > 0 and "utilization" in monitor.result


def _one_token_score_normalises_two_tokens():
    import torch

    from classifiers.model_io import onetoken_scores

    logits = torch.tensor([[0.0, 2.0, 0.0, 5.0]])  # vocabulary of 4: true = 1, false = 3; the others are ignored
    score = onetoken_scores(logits, true_id=1, false_id=3)
    assert torch.allclose(score, torch.tensor([1 / (1 + torch.e**3)]), atol=1e-6)


def _trace_verdict_rule():
    from leanloop.traces.parse import trace_verdict

    ok = "theorem t : True := by\n  /- <feedback>\n  -- proof state:\n  ⊢ True\n  </feedback> -/\n  trivial"
    assert trace_verdict(ok).valid
    assert trace_verdict(ok, truncated=True).reason == "output_limit"  # cut off at the output-token limit
    error = ok + "\n  /- <feedback>\n  -- type: error, msg: unsolved goals\n  </feedback> -/"
    assert trace_verdict(error).reason == "error_message"
    dangling = "theorem t : True := by\n  /- <feedback>\n  -- proof state:\n  ⊢ True\n  </feedback> -/\n"
    assert trace_verdict(dangling).reason == "ends_in_proof_state"


def _verdict_metrics_as_defined():
    from leanloop.metrics.verdicts import THRESHOLD_GRID, auroc, classification_metrics, ppv_at_prior

    m = classification_metrics([1, 1, 0, 0], [1, 0, 0, 0])
    assert m["accuracy"] == 0.75 and m["macro_f1"] == pytest.approx((2 / 3 + 0.8) / 2)
    assert m["mcc"] == pytest.approx(1 / 3**0.5)
    assert auroc([1, 0], [0.5, 0.5]) == 0.5 and auroc([1, 0, 1], [0.9, 0.4, 0.4]) == 0.75  # ties: half credit
    assert ppv_at_prior(0.9, 0.2, 0.4) == pytest.approx(0.36 / (0.36 + 0.12))  # Eq. 12
    assert THRESHOLD_GRID[1] - THRESHOLD_GRID[0] == pytest.approx(0.01) and THRESHOLD_GRID[-1] == 1.0


def _bootstrap_percentile_interval():
    import numpy as np

    from leanloop.metrics.bootstrap import N_RESAMPLES, SEED, grouped_bootstrap

    assert (N_RESAMPLES, SEED) == (5000, 42)
    labels = [1, 0, 1, 1, 0, 0, 1, 0]
    groups = ["a", "a", "b", "b", "c", "c", "d", "d"]
    interval = grouped_bootstrap(
        labels, groups, predictions=[1, 0, 1, 0, 0, 1, 1, 0], metrics=["accuracy"], n_resamples=400
    )["accuracy"]
    assert interval.low <= interval.point <= interval.high and interval.point == 0.75


def _feedback_metrics_app_d():
    from leanloop.metrics.feedback import feedback_metrics, has_error, multiset_f1, trace_tokens

    assert multiset_f1([], []) == 1.0 and multiset_f1(["a"], []) == 0.0  # the empty-multiset convention
    assert multiset_f1(["a", "a", "b"], ["a", "b", "b"]) == pytest.approx(2 * 2 / 6)  # Eq. 1-2, multiplicities
    block = "/- <feedback>\n-- type: error, msg: x_1+y\n</feedback> -/"
    assert trace_tokens(block) == ["-", "-", "type", ":", "error", ",", "msg", ":", "x_1", "+", "y"]  # \w+|[^\w\s]
    assert has_error("-- TYPE : Error") and not has_error("-- type: errors")
    scores = feedback_metrics([block, block], [block, ""])
    assert scores["block_f1"] == 0.5  # Eq. 7: the mean of per-program F1


def _hybrid_verdict_eq8():
    from leanloop.evaluator import Prediction
    from leanloop.lean.types import Category, Outcome
    from leanloop.prover.statements import Statement
    from rl.reward import Source, combine
    from rl.reward_harness import Candidate, Stage

    problem = Statement("t", "t", "", "", "theorem t : True := by")
    ready = Candidate(problem, "x", Stage.READY, program="theorem t : True := by trivial")
    accept = Prediction(verdict=True, score=0.9, trace=None, time_s=0.1)
    lean = combine("hybrid", ready, Outcome(Category.INVALID), accept)  # a Lean verdict by T_eval: Lean's
    late = combine("hybrid", ready, None, accept, cancelled=True)  # none by T_eval: the cascade's
    rejected = Candidate(problem, "x", Stage.PRECHECK, outcome=Outcome(Category.PRECHECK_REJECTED))
    assert (lean.reward, lean.source) == (0.0, Source.LEAN) and (late.reward, late.source) == (1.0, Source.EVALUATOR)
    assert combine("hybrid", rejected, None, accept).reward == 0.0  # d_i = 1: deterministic precheck failure


def _annotation_format_app_c():
    from leanloop.lean.types import LeanMessage, Position, TacticRecord
    from leanloop.traces.annotate import annotate

    program = (
        "theorem t (x : Nat) (h : x = 2) : x + x = 4 := by\n  have h2 : x = 2 := h\n  subst h\n  rfl\n  done\n  done"
    )
    states = [
        TacticRecord("have", "x : Nat\nh : x = 2\n⊢ x + x = 4", Position(2, 2)),
        TacticRecord("subst h", "x : Nat\nh : x = 3\nh2 : x = 2\n⊢ x + x = 4", Position(3, 2)),
    ]
    errors = [
        LeanMessage("error", "no goals to be proved", Position(5, 2), Position(5, 6)),
        LeanMessage("error", "second", Position(6, 2), Position(6, 6)),
    ]
    out = annotate(program, errors, states)  # ASSUMED REPLY: states and errors written for the example
    assert "  /- <feedback>\n  -- proof state:\n  x : Nat\n  h : x = 2\n  ⊢ x + x = 4\n  </feedback> -/" in out
    assert "h : x = 3 (was x = 2)\n  h2 : x = 2" in out and out.count("  x : Nat\n") == 1  # unchanged: omitted
    assert "-- type: error, msg: no goals to be proved" in out and "second" not in out  # stops at the first error


def _cascade_accepts_when_both_stages_do():
    from feedback_model.cascade import CascadeEvaluator
    from leanloop.evaluator import Prediction

    class Fixed:
        def __init__(self, verdicts, scores):
            self.answers = dict(zip(["a", "b", "c"], zip(verdicts, scores)))

        def score(self, programs, deadline=None):
            return [Prediction(*self.answers[p], trace=None, time_s=0.0) for p in programs]

        def close(self):
            pass

    gate = Fixed([True, False, True], [0.9, 0.2, 0.7])
    feedback = Fixed([False, True, True], [0.0, 1.0, 1.0])
    cascade = CascadeEvaluator(lambda: gate, lambda: feedback, threshold=0.5)
    assert [p.verdict for p in cascade.score(["a", "b", "c"])] == [False, False, True]


def _collection_prechecks_as_app_b():
    from leanloop.lean.acceptance import MAX_CHARS, AcceptancePolicy

    policy = AcceptancePolicy("collection", header="import Mathlib\n")
    ok = "import Mathlib\ntheorem t : 1 + 1 = 2 := by\n  norm_num"
    assert MAX_CHARS == 262_144 and policy.precheck(ok).ok
    for word in ("sorry", "admit", "axiom", "constant", "opaque", "unsafe"):
        assert not policy.precheck(ok + f"\n-- fine in a comment: {word}").ok is False  # masked comments pass
        assert not policy.precheck(ok.replace("norm_num", "norm_num\n" + word + " x : Nat")).ok, word
    assert not policy.precheck("import Mathlib\nimport Aesop\ntheorem t : True := trivial").ok  # another import block
    assert not policy.precheck("import Mathlib\ndef x : Nat := 1").ok  # no theorem
    assert policy.precheck(ok.replace("norm_num", "native_decide")).ok  # not blocked (App. B), nor macro_rules / elab
    assert policy.precheck("import Mathlib\nmacro_rules | `(tactic| foo) => `(tactic| rfl)\n" + ok.split("\n", 1)[1]).ok
    assert not policy.precheck(ok + " " * MAX_CHARS).ok


def _inline_proof_gets_its_own_line():
    from leanloop.lean.types import Position, TacticRecord
    from leanloop.traces.annotate import annotate
    from leanloop.traces.source import normalize_program

    out = annotate("theorem t : True := by trivial", [], [TacticRecord("trivial", "⊢ True", Position(1, 23))])
    assert out.splitlines()[0] == "theorem t : True := by" and out.splitlines()[-1] == "  trivial"
    assert "  -- proof state:" in out  # the first tactic's state has its own insertion point
    annotated = "theorem t : True := by\n  /- <feedback>\n  -- proof state:\n  ⊢ True\n  </feedback> -/\n  trivial"
    assert "feedback" not in normalize_program(annotated).text  # existing blocks are removed before annotating


def _anchored_block_f1_needs_the_same_anchor():
    from leanloop.metrics.feedback import anchored_block_keys, feedback_scores

    state = "  /- <feedback>\n  -- proof state:\n  ⊢ True\n  </feedback> -/\n"
    reference = "theorem t : True := by\n" + state + "  trivial"
    moved = "theorem t : True := by\n  skip\n" + state + "  trivial"  # same block, one source line later
    assert anchored_block_keys(reference) == [(1, "-- proof state: ⊢ True")]  # non-empty lines before it
    assert anchored_block_keys(moved)[0][0] == 2
    scores = feedback_scores(reference, moved)
    assert (scores.block_f1, scores.anchored_block_f1, scores.error_agreement) == (
        1.0,
        0.0,
        1.0,
    )  # no error either side


def _block_extraction_as_app_d():
    from leanloop.metrics.feedback import block_keys, has_error

    assert block_keys("x\n/-  <FEEDBACK>  A  b </feedback> -/\n/- <feedback> open") == ["A b"]  # unclosed: dropped
    assert block_keys("/- <feedback> a b </feedback> -/") == ["a b"]  # content keeps its case
    assert has_error("theorem t : True := by\n-- type: error, msg: x")  # outside any block: the full text


def _diagnostics_filtered_as_app_c():
    from leanloop.lean.types import LeanMessage, Position, TacticRecord
    from leanloop.traces.annotate import annotate

    program = "theorem t (x y : Nat) : x = x := by\n  skip\n  rfl"
    states = [
        TacticRecord("skip", "x y : Nat\n⊢ x = x", Position(2, 2)),
        TacticRecord("rfl", "x y : Nat\n⊢ x = x", Position(3, 2)),
    ]
    note = "note: this linter can be disabled with `set_option linter.x false`"
    warned = annotate(program, [LeanMessage("warning", "unused\n" + note, Position(2, 2), Position(2, 6))], states)
    assert "  x : Nat\n  y : Nat\n" in warned and warned.count("⊢ x = x") == 2  # names expanded; goals repeat
    assert "warning" not in warned  # warnings skipped by default
    error = annotate(program, [LeanMessage("error", "bad\n" + note, Position(2, 2), Position(2, 6))], states)
    assert "-- type: error, msg: bad\n  </feedback> -/" in error and "linter" not in error
    only_note = annotate(program, [LeanMessage("error", note, Position(2, 2), Position(2, 6))], states)
    assert "type: error" not in only_note and only_note.endswith("rfl")  # nothing left: no block


def _random_order_coverage_is_exact():
    from math import comb

    from leanloop.metrics.budget import miss_probability

    assert miss_probability(5, 2, 2) == pytest.approx(comb(3, 2) / comb(5, 2))  # 1 - coverage = C(n-v,k)/C(n,k)
    assert miss_probability(4, 1, 2) == pytest.approx(0.5)


def _blocks_merge_and_names_persist_as_app_c():
    from leanloop.lean.types import LeanMessage, Position, TacticRecord
    from leanloop.traces.annotate import annotate

    program = "theorem t (h : 1 = 1) : True := by\n  skip\n  skip\n  skip\n  trivial"
    states = [
        TacticRecord("skip", "h : 1 = 1\n⊢ True", Position(2, 2)),
        TacticRecord("skip", "⊢ True", Position(3, 2)),
        TacticRecord("skip", "h : 1 = 1\n⊢ True", Position(4, 2)),
        TacticRecord("trivial", "h : 1 = 1\n⊢ True", Position(5, 2)),
    ]
    warned = annotate(
        program, [LeanMessage("warning", "unused", Position(2, 2), Position(2, 6))], states, include_warnings=True
    )
    assert "-- type: warning, msg: unused\n  -- proof state:\n  ⊢ True\n  </feedback> -/" in warned  # one block
    assert warned.count("  h : 1 = 1\n") == 1  # h left the third state; back unchanged, it is still not repeated
    error = annotate(program, [LeanMessage("error", "h : 1 = 1 fails", Position(3, 2), Position(3, 6))], states)
    assert "-- type: error, msg: h : 1 = 1 fails" in error  # messages are not deduplicated
    assert annotate(program, [], states) == annotate(program, [], states)  # a fresh dictionary per program


EXAMPLES = {
    name.lstrip("_"): fn
    for name, fn in list(globals().items())
    if name.startswith("_") and callable(fn) and fn.__module__ == __name__ and name not in ("_id", "_find", "_problems")
}
CODE_ENTRIES = [item for item in ENTRIES if "example" in item[1]]


@pytest.mark.parametrize("item", CODE_ENTRIES, ids=[_id(item) for item in CODE_ENTRIES])
def test_code_row_worked_example(item):
    EXAMPLES[item[1]["example"]]()


def test_every_example_belongs_to_a_row():
    assert set(EXAMPLES) == {entry["example"] for _, entry in CODE_ENTRIES}
