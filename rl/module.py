"""GRPO as a LightningModule (manual optimization: one batch of problems -> rollouts -> rewards ->
``num_iterations`` optimizer steps over micro-batches).
"""

from __future__ import annotations

import logging
import random
import sys
import time
from collections import Counter
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import lightning as L

from leanloop.evaluator import HistoryAwareEvaluator
from leanloop.jsonl import append_jsonl
from leanloop.lean.verifier import Verifier
from leanloop.training.inputs import model_identity
from leanloop.training.models import load_tokenizer
from leanloop.training.module import set_torch_threads
from leanloop.training.optim import configure_optimizers
from leanloop.training.resume import keep_rows_before
from rl.audit import TimeoutAudit, check_infra_share
from rl.config import (
    RENAMED_KEYS,
    RL_LEAN,
    AuditConfig,
    DriftConfig,
    EvaluationConfig,
    EvaluatorConfig,
    GRPOConfig,
    LeanConfig,
    OptimConfig,
    PolicyConfig,
    RefreshConfig,
    RewardChecksConfig,
    RewardConfig,
    RolloutGenerationConfig,
)
from rl.curriculum import CurriculumEvents, ReplayBuffer, StoredProof, rng_state, set_rng_state
from rl.drift import DriftMonitor
from rl.reward_harness import HarnessCounts, RewardHarness
from rl.hybrid import RewardScorer, StepScores
from rl.policy import build_policy, export_policy, resolve_base, unwrap
from rl.refresh import EvaluatorRefresher, LabelBuffer
from rl.reward import Protocol, RewardRule, RolloutReward, Source
from leanloop.grpo.update import GRPOUpdate, finite_stats
from leanloop.prover.prompt import PromptConfig, render_prompt, stop_token

log = logging.getLogger(__name__)

STEPS_FILE = "steps.jsonl"
DRIFT_FILE = "drift.jsonl"
AUDIT_FILE = "audit.jsonl"
JUDGE_FILE = "judge_audit.jsonl"  # one row per accepted reward the judge re-checked
REFRESH_FILE = "refresh.jsonl"


def isolated_backend(config, allow_shared_repl: bool = False):
    """``(backend config, shared)`` for the rl reward checks. Isolation: one REPL process
    per candidate, so nothing a candidate runs at elaboration time survives into another
    candidate's check: ``local`` gets ``fresh_process`` unless its config sets it; shared REPLs
    (``kimina``, ``local.fresh_process: false``) are refused unless ``allow_shared_repl``."""
    if config.kind == "local" and config.local.fresh_process is None:
        config = replace(config, local=replace(config.local, fresh_process=True))
    shared = config.kind == "kimina" or (config.kind == "local" and not config.local.fresh_process)
    if shared and not allow_shared_repl:
        raise ValueError(
            f"lean.backend (kind: {config.kind}) checks candidates on shared REPL processes: code a "
            "candidate runs at elaboration time would survive into other candidates' checks. Use "
            "kind: local with local.fresh_process: true, or set reward_checks.allow_shared_repl: true to "
            "accept that (docs/threat_model.md)"
        )
    if shared:
        log.warning(
            "rl reward checks run on SHARED REPL processes (reward_checks.allow_shared_repl: true): a "
            "candidate's elaboration-time code can survive into other candidates' checks"
        )
    return config, shared


class GRPOModule(L.LightningModule):
    RENAMED_KEYS = RENAMED_KEYS

    def __init__(
        self,
        policy: PolicyConfig | None = None,
        optim: OptimConfig | None = None,
        grpo: GRPOConfig | None = None,
        generation: RolloutGenerationConfig | None = None,
        reward: RewardConfig | None = None,
        lean: LeanConfig = RL_LEAN,
        reward_checks: RewardChecksConfig | None = None,
        evaluator: EvaluatorConfig | None = None,
        drift: DriftConfig | None = None,
        refresh: RefreshConfig | None = None,
        audit: AuditConfig | None = None,
        evaluation: EvaluationConfig | None = None,
        threads: int | None = None,
    ) -> None:
        """GRPO on a prover. ``policy``: starting checkpoint (named; fallbacks named too), adapter;
        ``grpo``: the objective (TRL's names); ``reward`` + ``lean`` + ``evaluator``: the protocol
        and its two judges (``reward_checks``: latency simulation, isolation, circuit breaker);
        ``drift`` / ``refresh`` / ``audit``: the monitors; ``evaluation``: pass@k after training on
        ``data.eval_statements``. ``threads``: torch intra-op threads (1 suits tiny models on a busy
        CPU, where more threads spin against each other); None keeps torch's default."""
        super().__init__()
        set_torch_threads(threads)
        self.automatic_optimization = False
        self.policy_config = policy or PolicyConfig()
        self.optim = optim or OptimConfig()
        self.grpo = grpo or GRPOConfig()
        self.generation = generation or RolloutGenerationConfig()
        self.update = GRPOUpdate(self.grpo, self.generation)
        self.reward_config = reward or RewardConfig()
        lean.require_profile("rl", "rl checks rewards under the hardened rl profile")
        self.lean = lean
        self.checks = reward_checks or RewardChecksConfig()
        self.evaluator_config = evaluator or EvaluatorConfig()
        self.drift_config = drift or DriftConfig()
        self.refresh_config = refresh or RefreshConfig()
        self.audit_config = audit or AuditConfig()
        self.evaluation = evaluation or EvaluationConfig()
        self.protocol = Protocol(self.reward_config.protocol)
        if self.protocol is Protocol.LEAN_MATCHED and not self.reward_config.matched_timeout:
            raise ValueError("reward.protocol lean_matched needs reward.matched_timeout (the hybrid cutoff in seconds)")
        self.save_hyperparameters()

        self.base, self.used_fallback = resolve_base(self.policy_config)
        if self.used_fallback:
            print(
                f"[rl] {self.policy_config.base.name} does not exist; starting from the configured fallback "
                f"{self.base.name}",
                file=sys.stderr,
            )
        self.tokenizer = load_tokenizer(self.base)
        self.prompt = self._resolve_prompt()
        built = build_policy(self.base, self.tokenizer, self.policy_config, self.grpo.beta)
        self._policy = built
        self.model = built.model
        self.reference = built.reference
        stops = [stop_token(self.prompt, self.tokenizer), self.tokenizer.eos_token]
        if self.generation.backend == "vllm":
            from leanloop.grpo.rollout import VLLMRollout

            self.rollout = VLLMRollout(self.tokenizer, self.generation, stops)
        else:
            from leanloop.grpo.rollout import TransformersRollout

            self.rollout = TransformersRollout(self.tokenizer, self.generation, stops)
        extraction = self.reward_config.extraction or ("code_block" if self.prompt.style == "chat" else "auto")
        self.harness = RewardHarness(
            self.lean.policy(lean_version=getattr(self.lean.backend.options, "lean_version", None)), extraction
        )
        self.replay = ReplayBuffer()
        self.replay_rng = random.Random(0)  # which buffered proof is injected (never the curriculum's draws)
        self.labels = LabelBuffer()
        self.observed: list[list] = []  # (statement, Lean label, program) a history-aware evaluator observed
        self.drift_monitor = DriftMonitor(self.drift_config)
        self.scorer: RewardScorer | None = None
        self.evaluator = None
        self.refresher: EvaluatorRefresher | None = None
        self.evaluator_info: dict[str, Any] = {}
        self.totals: Counter = Counter()
        self.history: list[dict[str, Any]] = []
        self.audits: list[dict] = []
        self.refreshes: list[dict] = []
        self.results: dict[str, Any] = {}

    # -- set-up -----------------------------------------------------------------------------------
    def _resolve_prompt(self) -> PromptConfig:
        from leanloop.prover.prompt import trained_prompt

        return trained_prompt(self.base, self.policy_config.prompt)

    def _backend(self):
        from leanloop.lean.backends import make_backend

        config, shared = isolated_backend(self.lean.backend, self.checks.allow_shared_repl)
        if shared:
            self.results["shared_repl"] = True
        backend = make_backend(config)
        if self.checks.latency == "recorded":
            from rl.latency import TimedBackend

            backend = TimedBackend(
                backend, scale=self.checks.latency_scale, unrecorded_delay=self.checks.unrecorded_delay
            )
        return backend

    def _check_sandbox(self, backend) -> None:
        """A local pool's candidates must run in a strong sandbox within the machine's budget
        (``reward_checks.sandbox``); probed now, before any candidate, and recorded in the manifest."""
        from leanloop.lean.sandbox import budget_error

        choose = getattr(backend, "sandbox", None)
        config = getattr(backend, "config", None)
        if choose is None or not getattr(config, "fresh_process", False):
            return
        weak_ok = self.checks.sandbox == "weak"
        why = budget_error(config.sandbox, config.workers)
        if why is not None and not weak_ok:
            raise ValueError(f"lean.backend.local: {why} (or set reward_checks.sandbox: weak)")
        sandbox = choose()
        if not sandbox.strong and not weak_ok:
            raise ValueError(
                f"the candidate REPLs' sandbox is {sandbox.kind!r}, weaker than rl needs (private /tmp, "
                "/var/tmp, /dev/shm and HOME, an environment allow-list, a PID namespace): install "
                "bubblewrap (apt-get install bubblewrap) or allow unprivileged user namespaces, or set "
                "reward_checks.sandbox: weak"
            )
        weak = not sandbox.strong or why is not None
        if weak:
            log.warning("rl reward checks run in a WEAK sandbox (reward_checks.sandbox: weak): %s", why or sandbox.kind)
        self.results["sandbox"] = {**sandbox.manifest(), "weak": weak}

    def _read_token_table(self, backend, policy) -> None:
        """The masker lexes with the header environment's own token table, read before any candidate
        code runs (a backend that cannot read it: the shipped table); the manifest records which."""
        from leanloop.lean.acceptance.tokens import shipped

        read = getattr(backend, "token_table", None)
        live = read(policy.header) if read is not None and policy.header else None
        if live is not None:
            policy.tokens = live
        self.results["token_table"] = (policy.tokens or shipped()).manifest()

    def build_rewards(self) -> None:
        """Lean verifiers (reward, matched, audit), the evaluator, the scorer and the monitors."""
        if self.scorer is not None:
            return
        from rl.reward_evaluator import build_evaluator

        self.evaluator, self.evaluator_info = build_evaluator(self.evaluator_config)
        backend = self._backend()
        self.backend = backend
        inner = getattr(backend, "inner", backend)
        if hasattr(inner, "index"):
            inner.index  # load the replay recordings now, not inside the first step's race
        policy = self.harness.policy
        self._check_sandbox(inner)
        self._read_token_table(inner, policy)
        timeout = self.reward_config.matched_timeout if self.protocol is Protocol.LEAN_MATCHED else self.lean.timeout
        verifier = self.lean.verifier(backend, policy, timeout) if self.protocol.uses_lean else None
        self.verifier = verifier or self.lean.verifier(backend, policy)
        self.scorer = RewardScorer(
            verifier,
            self.evaluator,
            self.protocol,
            RewardRule(self.reward_config.evaluator_reward),
            self.reward_config.shadow_evaluator,
            self.reward_config.evaluator_deadline_s,
        )
        self.auditor = None
        if self.audit_config.enabled and self.protocol.uses_lean:
            self.auditor = TimeoutAudit(
                self.lean.verifier(backend, policy, self.audit_config.timeout), self.audit_config
            )
        self.judge_audit = None
        if self.audit_config.judge.enabled:
            from leanloop.lean.judge import ComparatorJudge
            from rl.audit import JudgeAudit

            self.judge_audit = JudgeAudit(ComparatorJudge(self.audit_config.judge.judge), self.audit_config.judge)
        self.refresher = None
        if self.refresh_config.enabled:
            # a history-aware evaluator refreshes its learned part (its stacker stays as saved)
            learned = self.evaluator.base if isinstance(self.evaluator, HistoryAwareEvaluator) else self.evaluator
            self.refresher = EvaluatorRefresher(learned, self.refresh_config)
        self.provenance = self._provenance()
        print(f"[rl] {self.provenance}", file=sys.stderr)

    def _provenance(self) -> str:
        """One honest sentence on where this run's rewards can come from."""
        parts = [f"protocol {self.protocol.value}"]
        if self.lean.backend.kind == "replay":
            parts.append(
                "Lean backend: replay of recorded Lean output (no Lean toolchain here). Under the rl policy "
                "replay can never accept a proof (recordings lack the harness trailer): it contributes only "
                "recorded rejections, and everything else is decided by the prechecks and the evaluator"
            )
        else:
            parts.append(f"Lean backend: {self.lean.backend.kind}")
        ev = self.evaluator_info
        if ev.get("kind") == "none":
            parts.append("no evaluator")
        elif not ev.get("trained", True):
            parts.append(
                "evaluator: UNTRAINED one-token classifier (random weights; its verdicts are noise, debug only)"
            )
        else:
            parts.append(f"evaluator: {ev.get('kind')} {ev.get('path') or ev.get('factory')}")
        return "; ".join(parts)

    def setup(self, stage: str) -> None:
        self.build_rewards()
        if hasattr(self.rollout, "bind"):  # vLLM follows this trainer's ranks
            self.rollout.bind(self.trainer)
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        if datamodule is not None:  # the configured buffer (curriculum.replay), off included
            self.replay = ReplayBuffer(datamodule.curriculum_config.replay)
            self.replay_rng = random.Random(f"{datamodule.seed}:{self.trainer.global_rank}")
        limit = self.generation.max_prompt_length
        if datamodule is not None and limit:
            long = [
                s.name
                for s in datamodule.statements
                if len(self.tokenizer(self.render(s), add_special_tokens=False)["input_ids"]) > limit
            ]
            if long:
                datamodule.drop(long, f"prompt longer than generation.max_prompt_length={limit}")
                self.totals["dropped_long_prompts"] = len(long)

    def render(self, problem) -> str:
        return render_prompt(problem.prompt, self.prompt, self.tokenizer)

    def configure_optimizers(self):
        return configure_optimizers(self, self.optim)

    @property
    def run_dir(self) -> Path | None:
        return Path(self.trainer.default_root_dir) if self._trainer is not None else None

    # -- one GRPO step -----------------------------------------------------------------------------
    def training_step(self, batch, batch_idx: int):
        problems = list(batch)
        datamodule = getattr(self.trainer, "datamodule", None)
        if datamodule is not None and hasattr(datamodule, "consumed"):
            datamodule.consumed(problems)  # no longer a pending draw (rl.data.StepStream)
        G = self.grpo.num_generations
        step = int(self.global_step)
        timings: dict[str, float] = {}
        began, began_cpu = time.perf_counter(), time.process_time()
        rollouts = self.rollout.generate(self.model, [self.render(p) for p in problems], G)
        timings["time/generation_s"] = time.perf_counter() - began

        mark = time.perf_counter()
        candidates = [
            self.harness.build(problems[i // G], text, f"{step}:{i}") for i, text in enumerate(rollouts.texts)
        ]
        scores = self.scorer.score(candidates)
        timings["time/scoring_s"] = time.perf_counter() - mark
        rewards = list(scores.rewards)
        # circuit breaker: a step whose Lean checks mostly failed on the infrastructure stops the run
        infra_share = check_infra_share(step, scores, self.checks.max_infra_error_share)
        rewards = self._judge_gate(step, candidates, rewards)  # judge.mode gate: pay what the judge confirms
        injected = self._inject_replay(problems, rollouts, rewards)

        mark = time.perf_counter()
        update = self.update.step(self, self.model, self.reference, rollouts, rewards)
        timings["time/update_s"] = time.perf_counter() - mark

        mark = time.perf_counter()
        post = self._after_step(int(self.global_step), problems, candidates, scores, rollouts, rewards)
        timings["time/post_s"] = time.perf_counter() - mark
        timings["time/step_s"] = time.perf_counter() - began
        timings["time/step_cpu_s"] = time.process_time() - began_cpu  # all threads of this process

        values = [r.reward for r in rewards]
        scored = [v for v in values if v is not None]
        harness = HarnessCounts.of(candidates)
        stats = {
            **scores.stats(),
            **update,
            **post,
            **timings,
            "lean/infra_error_share": infra_share,
            "train/reward": sum(scored) / len(scored) if scored else float("nan"),
            "train/completion_tokens": float(rollouts.completion_mask.sum(dim=1).float().mean()),
            "train/truncated": float(sum(rollouts.truncated)) / len(rollouts),
            "harness/no_code": float(harness.no_code),
            "harness/precheck_rejected": float(harness.precheck_rejected),
            "harness/ready": float(harness.ready),
            "replay/injected": float(injected),
            "replay/buffered": float(len(self.replay)),
        }
        stats.update({f"precheck/{k}": float(v) for k, v in harness.precheck_reasons.items()})
        for r in rewards:
            self.totals[f"source:{r.source.value}"] += 1
            self.totals[f"lean:{r.lean}"] += 1
        self.log_dict(finite_stats(stats), on_step=True, on_epoch=False, batch_size=len(rollouts))
        self.history.append({"step": step, **finite_stats(stats)})
        self._append(STEPS_FILE, self.history[-1])

    def _inject_replay(self, problems, rollouts, rewards: list[RolloutReward]) -> int:
        """A buffered successful proof replaces the last rollout of a group with no success."""
        config = self.replay.config
        if not (config.enabled and config.inject and len(self.replay)):
            return 0
        G, width, injected = self.grpo.num_generations, rollouts.completion_ids.size(1), 0
        for g, problem in enumerate(problems):
            group = rewards[g * G : (g + 1) * G]
            if any(r.reward != 0.0 for r in group):
                continue
            stored = self.replay.get(problem.name, self.replay_rng)
            if stored is None or len(stored.completion_ids) > width:
                continue
            row = g * G + G - 1
            rollouts.replace(row, stored.completion_ids, stored.completion)
            rewards[row] = RolloutReward(1.0, Source.REPLAY, "replayed")
            injected += 1
        return injected

    # -- after the update: curriculum, buffers, audit, drift, refresh --------------------------------
    def _after_step(
        self, step: int, problems, candidates, scores: StepScores, rollouts, rewards: list[RolloutReward]
    ) -> dict[str, float]:
        G = self.grpo.num_generations
        datamodule = self.trainer.datamodule
        solved_sources = set(datamodule.curriculum.config.solved_sources)
        out: dict[str, float] = {}
        events = CurriculumEvents()  # every rank's, applied on every rank below
        held = self._judge_pending(step, candidates, rewards)  # async judge: no credit until it agrees
        for g, problem in enumerate(problems):
            group = rewards[g * G : (g + 1) * G]
            solved = sum(
                1
                for k, r in enumerate(group, g * G)
                if r.reward == 1.0 and r.source.value in solved_sources and k not in held
            )
            events.record(problem.name, G, solved, step)
        for i, (candidate, r) in enumerate(zip(candidates, rewards)):
            if r.reward == 1.0 and r.source in (Source.LEAN, Source.EVALUATOR):
                ids = rollouts.completion_ids[i][rollouts.completion_mask[i].bool()].tolist()
                proof = StoredProof(candidate.completion, ids, r.source.value, step)
                if i in held:
                    held[i].proof = proof
                else:
                    self.replay.add(candidate.problem.name, proof)
            if r.outcome is not None and r.source is not Source.PRECHECK:
                self.labels.add(candidate.program, r.outcome.label, candidate.problem.name)
                self._observe(candidate.problem.name, r.outcome.label, candidate.program)
        if self.judge_audit is not None:
            self.judge_audit.submit(list(held.values()))
            self._judge_results(self.judge_audit.collect(), step, events)
            out.update(self.judge_audit.metrics())
        CurriculumEvents.apply(datamodule.curriculum, self._all_ranks(events.events))
        out.update(datamodule.curriculum.counts())
        self.drift_monitor.observe_step(scores)
        if self.auditor is not None:
            report, rechecks = self.auditor.run(step, candidates, scores)
            for recheck in rechecks:
                self.drift_monitor.observe(recheck.verdict, recheck.outcome.label, "audit")
                self.labels.add(
                    candidates[recheck.index].program, recheck.outcome.label, candidates[recheck.index].problem.name
                )
                self._observe(candidates[recheck.index].problem.name, recheck.outcome.label)
            if report.unfinished:
                self.audits.append(report.to_dict())
                self._append(AUDIT_FILE, report.to_dict())
            out.update(report.metrics())
        if self.drift_monitor.due(step):
            report = self.drift_monitor.report(step)
            out.update(report.metrics())
            self._append(DRIFT_FILE, report.to_dict())
            if report.alarm:
                print(f"[rl] DRIFT ALARM at step {step}: {'; '.join(report.reasons)}", file=sys.stderr)
        if self.refresher is not None and self.refresher.due(step):
            report = self.refresher.refresh(step, self.labels)
            self.refreshes.append(report.to_dict())
            self._append(REFRESH_FILE, report.to_dict())
            out.update(report.metrics())
        return out

    def _observe(self, name: str, label: bool | None, program: str | None = None) -> None:
        """A Lean label joins a history-aware evaluator's history (later steps see it); the
        observations are kept, so a resumed run's evaluator sees them too."""
        if isinstance(self.evaluator, HistoryAwareEvaluator):
            self.evaluator.observe([name], [label], [program] if program is not None else None)
            self.observed.append([name, label, program])

    def _judge_items(self, step: int, candidates, rewards: list[RolloutReward]) -> dict[int, Any]:
        """Rollout index -> JudgeItem for the accepted rewards the judge audit selects."""
        from rl.audit import JudgeItem

        items = {
            i: JudgeItem(step, c.problem.name, c.completion, c.request, r.source.value)
            for i, (c, r) in enumerate(zip(candidates, rewards))
            if r.reward == 1.0 and c.request is not None and r.source in (Source.LEAN, Source.EVALUATOR)
        }
        wanted = {id(item) for item in self.judge_audit.wanted(list(items.values()))}
        return {i: item for i, item in items.items() if id(item) in wanted}

    def _judge_gate(self, step: int, candidates, rewards: list[RolloutReward]) -> list[RolloutReward]:
        """``judge.mode: gate``: an accepted reward is paid only if the judge agrees within the
        step's deadline; anything else (rejected, timed out, no verdict) pays 0 (rl.audit)."""
        audit = getattr(self, "judge_audit", None)
        if audit is None or audit.config.mode != "gate":
            return rewards
        items = self._judge_items(step, candidates, rewards)
        results = audit.gate(list(items.values()))
        for i, result in zip(items, results):
            result.item.credited = result.agreed is True  # paid and credited as usual in _after_step
            if result.agreed is not True:
                rewards[i] = replace(rewards[i], reward=0.0, lean=f"judge_{result.outcome.category.value}")
            self._append(JUDGE_FILE, result.to_dict())
        return rewards

    def _judge_pending(self, step: int, candidates, rewards: list[RolloutReward]) -> dict[int, Any]:
        """``judge.mode: async``: the accepted rewards sent to the judge now, whose replay entry and
        curriculum credit wait for its agreement."""
        audit = getattr(self, "judge_audit", None)
        if audit is None or audit.config.mode != "async":
            return {}
        return self._judge_items(step, candidates, rewards)

    def _judge_results(self, results, step: int, curriculum=None) -> None:
        """Judge verdicts that arrived: an agreed proof gets its held-back replay entry and
        curriculum credit (into ``curriculum``: the step's events, or after fit the curriculum
        itself); a rejected one (or a judge timeout on a fast-path-valid candidate) is alarmed and
        loses whatever it had earned (rl.audit.JudgeAudit)."""
        from rl.audit import credit_agreed, revoke_rejected

        curriculum = self.trainer.datamodule.curriculum if curriculum is None else curriculum
        credit_agreed(results, self.replay, curriculum, step)
        revoke_rejected(results, self.replay, curriculum, step)
        for result in results:
            self._append(JUDGE_FILE, result.to_dict())

    def _all_ranks(self, mine: list) -> list[list]:
        """``mine`` from every rank, in rank order (just ``[mine]`` outside a distributed job)."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            return [mine]
        gathered: list[list] = [[] for _ in range(dist.get_world_size())]
        dist.all_gather_object(gathered, mine)
        return gathered

    def _append(self, name: str, row: dict) -> None:
        if self.run_dir is None or not self.trainer.is_global_zero:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.run_dir / name, "a", encoding="utf-8") as handle:
            append_jsonl(handle, row)

    # -- after fit: evaluation and report --------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["leanloop.rl.totals"] = dict(self.totals)  # the report and manifest count the whole run
        checkpoint["leanloop.rl.state"] = self.run_state()

    def run_state(self) -> dict[str, Any]:
        """Everything besides the weights, the optimizer and the curriculum (the datamodule's) that
        decides later steps: the replay buffer and its sampler, the refresher's labels (and the
        refreshed evaluator), the drift monitor's pairs, a history-aware evaluator's observations."""
        return {
            "replay": self.replay.state_dict(),
            "replay_rng": rng_state(self.replay_rng),
            "labels": self.labels.state_dict(),
            "drift": self.drift_monitor.state_dict(),
            "observed": [list(o) for o in self.observed],
            "refresher": self.refresher.state_dict() if self.refresher is not None else None,
        }

    def load_run_state(self, state: dict[str, Any]) -> None:
        self.replay.load_state_dict(state["replay"])
        set_rng_state(self.replay_rng, state["replay_rng"])
        self.labels.load_state_dict(state["labels"])
        self.drift_monitor.load_state_dict(state["drift"])
        self.observed = []
        for name, label, program in state["observed"]:
            self._observe(name, label, program)
        if state["refresher"] is not None and self.refresher is not None:
            self.refresher.load_state_dict(state["refresher"])

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """A resumed fit continues where the checkpoint's step left it: the run state
        (:meth:`run_state`), its step logs (the rows a killed run wrote after it are written
        again), and its report and counts, which cover the whole run."""
        self.totals = Counter(checkpoint.get("leanloop.rl.totals", {}))
        if "leanloop.rl.state" in checkpoint:
            self.load_run_state(checkpoint["leanloop.rl.state"])
        self._continue_logs(int(checkpoint.get("global_step", 0)))

    def on_fit_start(self) -> None:
        if not self.trainer.ckpt_path:
            self._continue_logs(0)  # a fresh fit starts its step logs over

    def _continue_logs(self, step: int) -> None:
        if self.run_dir is not None and self.trainer.is_global_zero:
            # the monitors' rows carry the step count after their step's update (_after_step): the
            # checkpoint at ``step`` holds the rows up to ``step`` itself
            after = step + 1 if step else 0
            keep_rows_before(self.run_dir / DRIFT_FILE, after)
            self.audits = keep_rows_before(self.run_dir / AUDIT_FILE, after)  # the report sums the whole run's
            self.refreshes = keep_rows_before(self.run_dir / REFRESH_FILE, after)
            keep_rows_before(self.run_dir / JUDGE_FILE, step)  # gate rows: the step they were paid in
            self.history = keep_rows_before(self.run_dir / STEPS_FILE, step)

    def on_fit_end(self) -> None:
        if not self.trainer.is_global_zero:
            return
        from rl.report import write_report

        datamodule = self.trainer.datamodule
        if getattr(self, "judge_audit", None) is not None:
            # the report's agreement rate covers every accepted reward sent, not only the fast ones
            self._judge_results(
                self.judge_audit.collect(wait=True, timeout=self.audit_config.judge.drain_timeout),
                int(self.global_step),
            )
            self.judge_audit.close()
        if self.drift_monitor.pairs:
            report = self.drift_monitor.report(int(self.global_step))
            self._append(DRIFT_FILE, report.to_dict())
        if self.evaluation.enabled and datamodule.eval_statements:
            from rl.passk_eval import evaluate_policy

            self.results["evaluation"] = evaluate_policy(
                self.model,
                self.rollout,
                self.render,
                datamodule.eval_statements,
                self.harness,
                self.evaluation_verifier(),
                self.evaluator,
                self.evaluation,
                judge=self.judge_audit.judge if getattr(self, "judge_audit", None) is not None else None,
            )
        if self.refresher is not None and any(r["losses"] for r in self.refreshes) and self.run_dir is not None:
            self.refresher.save(self.run_dir / "evaluator_refreshed")
        if self.run_dir is not None:
            datamodule.curriculum.write(self.run_dir / "curriculum.json")
            write_report(self, datamodule)

    def evaluation_verifier(self) -> Verifier:
        """Lean for pass@k under the evaluation budget (``evaluation.timeout``, else ``lean.timeout``),
        never the reward's matched timeout: every protocol is evaluated the same way."""
        timeout = self.evaluation.timeout or self.lean.timeout
        return self.lean.verifier(self.backend, self.harness.policy, timeout)

    def export(self, final_dir: Path) -> None:
        self.export_info = export_policy(self._policy, self.tokenizer, final_dir)

    def manifest_model(self) -> dict[str, Any]:
        return {
            **model_identity(unwrap(self.model), self.tokenizer, self.base.base_name()),
            "prompt": asdict(self.prompt),
            "start": self.base.name,
            "start_is_fallback": self.used_fallback,
            "adapter": self.policy_config.adapter.kind,
        }

    def manifest_inputs(self) -> dict[str, Path]:
        out = {}
        run = self.base.run_dir()
        if run is not None:
            out["base_model"] = run
        if self.evaluator_info.get("run"):
            out["evaluator"] = Path(self.evaluator_info["run"])
        if self.evaluator_info.get("gate_run"):  # a cascade (feedback_model.factory): its gate is an input too
            out["evaluator_gate"] = Path(self.evaluator_info["gate_run"])
        return out

    def manifest_counts(self) -> dict[str, Any]:
        evaluation = self.results.get("evaluation")
        return {
            "reward_provenance": getattr(self, "provenance", None),
            "evaluator": self.evaluator_info,
            "shared_repl": bool(self.results.get("shared_repl")),  # reward_checks.allow_shared_repl was used
            "token_table": self.results.get("token_table"),
            "sandbox": self.results.get("sandbox"),
            "judge": {
                "enabled": self.audit_config.judge.enabled,
                "mode": self.audit_config.judge.mode,
                "sources": list(self.audit_config.judge.sources),
            },
            "rollouts": {k: v for k, v in self.totals.items()},
            "evaluation": {
                k: evaluation[k]
                for k in (
                    "statements",
                    "attempts",
                    "categories",
                    "verified",
                    "lean_pass_at_k",
                    "evaluator_estimate_pass_at_k",
                )
            }
            if evaluation
            else None,
        }
