"""The cascade ("Learning Lean Feedback", Section 5.3): a one-token gate screens every program, the
feedback model judges only the gate's positives, and a program is accepted only if both accept.
"""

from __future__ import annotations

import gc
import os
import time
import weakref
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

from feedback_model.config import CascadeConfig, SelfConsistencyConfig, TraceGenerationConfig
from feedback_model.evaluator import FeedbackPrediction, unscored
from leanloop.artifacts import locate_run, resolve_model
from leanloop.evaluator import Evaluator, Prediction, deadline_passed

Loader = Callable[[], Evaluator]


@dataclass
class CascadeTiming:
    programs: int = 0
    gate_positive: int = 0
    gate_s: float = 0.0
    load_s: float = 0.0
    traces_s: float = 0.0
    other_s: float = 0.0
    total_s: float = 0.0

    def add(self, other: "CascadeTiming") -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def _weak_refs(evaluator: Any) -> list[weakref.ref]:
    """A weak reference to an evaluator, to tell whether dropping it freed it (and with it the model
    it alone held; a model the caller still holds elsewhere is not the cascade's to free)."""
    try:
        return [weakref.ref(evaluator)]
    except TypeError:  # a type without weak references: nothing to watch, so collect to be sure
        return []


def _release_memory(released: list[weakref.ref] | None = None) -> None:
    """Return released models' memory. Dropping the last reference frees their tensors at once; a
    full ``gc.collect`` (over a second with torch and transformers imported) runs only when a
    released evaluator is still alive (held by a reference cycle), or when none could be watched.
    Then the CUDA allocator's cache is emptied."""
    if not released or any(ref() is not None for ref in released):
        gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:  # pragma: no cover - torch is a dependency
        pass


class CascadeEvaluator:
    def __init__(
        self,
        gate: Loader,
        feedback: Loader,
        residency: Literal["sequential", "together"] = "sequential",
        threshold: float | None = None,
    ) -> None:
        """``gate`` / ``feedback``: loaders of the two evaluators. ``threshold``: gate positives are
        those scoring at least this; None takes the gate's own verdicts (its threshold)."""
        if residency not in ("sequential", "together"):
            raise ValueError(
                f"residency must be 'sequential' or 'together' (resolve 'auto' with build_cascade), got {residency!r}"
            )
        self.loaders = {"gate": gate, "feedback": feedback}
        self.residency = residency
        self.threshold = threshold
        self.loaded: dict[str, Evaluator] = {}
        self.last_timing = CascadeTiming()
        self.total_timing = CascadeTiming()
        self.sources: dict[str, Path] = {}  # role -> final/ folder, where built from runs (build_cascade)
        self.stage_two = "feedback"

    def describe(self) -> dict[str, Any]:
        """What a caller records about this cascade (the RL stage's manifest: both runs are inputs)."""

        def run(role: str) -> str | None:
            folder = self.sources.get(role)
            found = locate_run(folder) if folder is not None else None
            return str(found) if found is not None else None

        return {
            "evaluator": "CascadeEvaluator",
            "stage_two": self.stage_two,
            "residency": self.residency,
            "threshold": self.threshold,
            "path": str(self.sources.get("feedback") or "") or None,
            "run": run("feedback"),
            "gate_path": str(self.sources.get("gate") or "") or None,
            "gate_run": run("gate"),
            "timing": self.total_timing.to_dict(),
        }

    def _acquire(self, role: str, timing: CascadeTiming) -> Evaluator:
        if role not in self.loaded:
            began = time.perf_counter()
            self.loaded[role] = self.loaders[role]()
            timing.load_s += time.perf_counter() - began
        return self.loaded[role]

    def _release(self, role: str, timing: CascadeTiming) -> None:
        if self.residency == "together" or role not in self.loaded:
            return
        began = time.perf_counter()
        released = _weak_refs(self.loaded.pop(role))
        _release_memory(released)
        timing.load_s += time.perf_counter() - began

    def _passes(self, gate: Prediction) -> bool:
        if self.threshold is None:
            return bool(gate.verdict)
        return gate.score is not None and gate.score >= self.threshold

    def score(
        self, programs: Sequence[str], deadline: float | None = None, batch_size: int | None = None
    ) -> list[FeedbackPrediction]:
        """Every program through the gate, then the positives through stage two, each model fed
        ``batch_size`` programs at a time (None: all at once) while it is loaded."""
        began = time.perf_counter()
        timing = CascadeTiming(programs=len(programs))
        size = batch_size or max(len(programs), 1)
        # no local name holds a model past its release (a sequential cascade frees it right there)
        start = time.perf_counter()
        gate_predictions: list[Prediction] = []
        for first in range(0, len(programs), size):
            gate_predictions += self._acquire("gate", timing).score(programs[first : first + size], deadline)
        timing.gate_s = time.perf_counter() - start - timing.load_s
        self._release("gate", timing)

        positives = [i for i, p in enumerate(gate_predictions) if p.verdict is not None and self._passes(p)]
        passed = set(positives)
        timing.gate_positive = len(positives)
        stage_two: dict[int, Prediction] = {}
        if positives and not deadline_passed(deadline):
            start, loading = time.perf_counter(), timing.load_s
            for first in range(0, len(positives), size):
                chunk = positives[first : first + size]
                scored = self._acquire("feedback", timing).score([programs[i] for i in chunk], deadline)
                stage_two.update(zip(chunk, scored))
            timing.traces_s = time.perf_counter() - start - (timing.load_s - loading)
            self._release("feedback", timing)

        load_share = timing.load_s / max(len(programs), 1)
        out: list[FeedbackPrediction] = []
        for index, gate_prediction in enumerate(gate_predictions):
            spent = gate_prediction.time_s + load_share
            second_s = stage_two[index].time_s if index in stage_two else 0.0
            cost = {"gate_s": gate_prediction.time_s, "load_s": load_share, "feedback_s": second_s}
            if gate_prediction.verdict is None:
                prediction = unscored("gate: not scored before the deadline", spent)
            elif index not in passed:
                prediction = FeedbackPrediction(
                    False, 0.0, None, spent, f"gate rejected (score {gate_prediction.score:.3f})"
                )
            elif index not in stage_two:
                prediction = unscored("deadline: passed the gate, no time left for the feedback model", spent)
            else:
                second = stage_two[index]
                reason = getattr(second, "reason", None)
                if second.verdict is None:
                    prediction = unscored(f"passed the gate; feedback model: {reason}", spent + second.time_s)
                else:
                    prediction = FeedbackPrediction(
                        second.verdict,
                        second.score,
                        second.trace,
                        spent + second.time_s,
                        f"gate passed (score {gate_prediction.score:.3f}); feedback: {reason}",
                        getattr(second, "truncated", False),
                        getattr(second, "new_tokens", 0),
                        getattr(second, "votes", None),
                    )
            out.append(replace(prediction, cost=cost))
        timing.total_s = time.perf_counter() - began
        timing.other_s = max(timing.total_s - timing.gate_s - timing.load_s - timing.traces_s, 0.0)
        # Eq. 13 spreads the driver's other work over the N programs like the load / transition
        other_share = timing.other_s / max(len(programs), 1)
        for prediction in out:
            prediction.cost["other_s"] = other_share
        self.last_timing = timing
        self.total_timing.add(timing)
        return out

    def close(self) -> None:
        if not self.loaded:  # sequential: released after every batch already
            return
        released = [ref for evaluator in self.loaded.values() for ref in _weak_refs(evaluator)]
        self.loaded.clear()
        _release_memory(released)


# -- building one from configs ---------------------------------------------------------------
def _weights_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.suffix in (".safetensors", ".bin", ".pt"))


def free_memory_bytes(device: str) -> int:
    """Free memory where the models would live: the GPU's for a CUDA device, else the host's."""
    if device.startswith("cuda"):
        import torch

        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def resolve_residency(
    config: CascadeConfig, gate_dir: Path, feedback_dir: Path, generation: TraceGenerationConfig
) -> str:
    """``auto``: together when both models' weights (with 50% headroom for activations and the KV
    cache) fit in free memory; vLLM reserves its own share of the GPU, so the gate then sits beside it
    only if it fits in what vLLM leaves."""
    if config.residency != "auto":
        return config.residency
    need = 1.5 * (_weights_bytes(gate_dir) + _weights_bytes(feedback_dir))
    free = free_memory_bytes(generation.device)
    if generation.backend == "vllm":
        free = int(free * (1.0 - generation.gpu_memory_utilization))
        need = 1.5 * _weights_bytes(gate_dir)
    return "together" if need <= free else "sequential"


def gate_dtype(config: CascadeConfig, device: str) -> str:
    """The gate's weight dtype: the configured one, or (``auto``) bf16 on a GPU as in LLF, fp32 on
    the CPU (where bf16 matmuls are slower than fp32 without AMX)."""
    if config.gate_dtype != "auto":
        return config.gate_dtype
    return "bfloat16" if str(device).startswith("cuda") else "float32"


def load_gate(gate_dir: Path, config: CascadeConfig, device: str) -> Any:
    """The gate classifier from its final/ folder, as ``ClassifierEvaluator.load`` builds it but with
    the folder's tokenizer cached per process: a sequential cascade reloads the weights on every
    batch, and re-reading a 151k-token vocabulary each time would cost seconds for nothing."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    from classifiers.evaluator import ClassifierEvaluator, ClassifierSpec
    from feedback_model.evaluator import folder_tokenizer

    spec = ClassifierSpec.read(gate_dir)
    auto = AutoModelForSequenceClassification if spec.kind == "encoder" else AutoModelForCausalLM
    model = auto.from_pretrained(str(gate_dir), dtype=getattr(torch, gate_dtype(config, device)))
    return ClassifierEvaluator(
        spec,
        model,
        folder_tokenizer(gate_dir),
        batch_size=config.gate_batch_size,
        device=device,
        threshold=config.threshold,
    )


def build_cascade(
    config: CascadeConfig,
    feedback: str | Path,
    generation: TraceGenerationConfig,
    self_consistency: SelfConsistencyConfig | None = None,
) -> CascadeEvaluator:
    """A cascade from a gate run and a feedback run; ``self_consistency`` turns on voting in stage two."""
    from feedback_model.consistency import SelfConsistencyEvaluator
    from feedback_model.evaluator import FeedbackEvaluator

    if not config.gate:
        raise ValueError(
            "the cascade's gate is not set: name its classifier run in cascade.gate "
            "(e.g. artifacts://classifiers/paper), or use mode: feedback for no gate"
        )
    try:
        gate_dir = resolve_model(config.gate, "classifiers")
    except FileNotFoundError as error:
        raise FileNotFoundError(f"cascade.gate {config.gate}: {error}") from None
    feedback_dir = resolve_model(feedback, "feedback_model")
    gate_device = generation.device if generation.backend == "transformers" else "cuda"

    def gate() -> Any:
        return load_gate(gate_dir, config, gate_device)

    def stage_two() -> Any:
        if self_consistency is not None:
            return SelfConsistencyEvaluator.load(feedback_dir, generation, self_consistency=self_consistency)
        return FeedbackEvaluator.load(feedback_dir, generation)

    cascade = CascadeEvaluator(gate, stage_two, resolve_residency(config, gate_dir, feedback_dir, generation))
    cascade.sources = {"gate": gate_dir, "feedback": feedback_dir}
    cascade.stage_two = "feedback self-consistency" if self_consistency is not None else "feedback greedy"
    return cascade
