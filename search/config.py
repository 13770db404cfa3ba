"""Typed configuration of the search stage. Numbers the NanoProof paper gives cite its section;
"not given" marks the ones it does not (there the public reference code's default is named, or
ours is a CPU-sized choice)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass
class SearchConfig:
    """AND-OR MCTS (NanoProof Section 3)."""

    simulations: int = 64
    """Search budget in iterations (one expansion each). Paper: pass@k reported at a budget of
    iterations (Section 5); the per-attempt number for the embedded default is ours (CPU)."""
    samples_per_expansion: int = 8
    """Tactics sampled per expansion (Section 3.7 samples several and dedupes; the count: not given)."""
    first_token_cap: int = 2
    """At most this many sampled tactics may open with the same first token (Section 3.7; value not given)."""
    pb_c_base: float = 3200.0
    """PUCT exploration base (not given in the paper; the reference code's default)."""
    pb_c_init: float = 1.25
    """PUCT exploration constant (not given; AlphaZero's 1.25 — the reference code uses 0.001 with
    its own prior scale)."""
    value_discount: float = 0.99
    """Values are negative remaining tactics; the selection maps a value v to discount**(-v) in (0, 1]
    (not given in the paper; the reference code's default)."""
    prior_temperature: float = 1.0
    """Softmax temperature over the sampled tactics' log-probabilities (not given)."""
    no_tactic_value: float = -40.0
    """Value of a goal where no sampled tactic applied (not given; the reference code's default)."""
    widening_c: float = 1.5
    widening_alpha: float = 0.5
    """Progressive widening: re-sample tactics at an OR node while its expansions <=
    widening_c * visits**widening_alpha (Section 3; constants not given: c = 1.5 is ours, tuned on the
    synthetic-policy benchmark's train theorems with ``candidate_order``, ``edge_prior`` and
    ``and_sibling``; c = 0.5 re-sampled a goal only at 16 and 36 visits)."""
    widening: Literal["fixed", "evidence"] = "evidence"
    """``fixed``: widening_c as given; ``evidence``: widening_c times 2 (1 - r), r the share of goals
    whose first expansion applied a tactic so far (``search.mcts.RuleEvidence``): a policy whose
    first choices apply (and so are likely right) re-samples its goals less, one whose first choices
    fail more (r = 1/2: widening_c). Ours: with a perfect policy, fixed widening spent calls
    re-sampling goals already on their way (93 vs sampling's 100 of 100 train theorems at 32 calls,
    repeats, dead ends; evidence: 100). Where under half of the first choices apply it widens more
    than widening_c, which cost some margin without dead ends (docs/results/search_synthetic.md)."""
    first_expansion_samples: int | None = 1
    """Tactics run at a goal's first expansion; its n-th re-expansion (progressive widening) runs
    ``first_expansion_samples * expansion_growth**n``, rounded up, at most ``samples_per_expansion``
    (None: ``samples_per_expansion`` every time). Few at first spend the environment calls on the
    policy's top choices, as sampling does; a goal the search keeps coming back to gets a wider
    look. Ours, tuned on the synthetic-policy benchmark."""
    expansion_growth: float = 1.0
    """See ``first_expansion_samples`` (ours)."""
    first_play_urgency: float | None = 0.0
    """Value of an edge not visited yet, relative to its parent goal's value: ``parent.value - fpu``
    (None: an unvisited edge's value term is 0, the lowest there is, so a visited dead end always
    looks better than a fresh sibling). Not given in the paper; ours, tuned on the synthetic-policy
    benchmark (``make bench-search ARGS="--policy noisy"``)."""
    dead_end_decay: float = 0.0
    """Each visit to an unsolved goal lowers its value by this many tactics, so a goal whose
    tactics keep failing or leading to goals that go nowhere falls in value and the search moves to
    its siblings or re-samples its parent (0: the value is the plain mean). Ours, tuned there."""
    candidate_order: Literal["rank", "frequency", "evidence"] = "evidence"
    """Which untried tactics an expansion runs: the current proposal's best-ranked (``rank``), or
    those the policy proposed most often over all proposals at this goal so far, ties by
    log-probability (``frequency``: the samples' empirical distribution, so a tactic the policy
    keeps proposing is tried before one it proposed once), or by ``evidence``: times proposed and
    times proposed first, each weighted by how often that reading's pick has applied so far
    (``search.mcts.RuleEvidence``; ties by log-probability: where the most frequent proposal is
    a repeated wrong tactic, the policy's first choice wins, and where the first choice is
    unreliable, the counts do). Ours."""
    edge_prior: Literal["expansion", "frequency", "evidence"] = "evidence"
    """An edge's prior in PUCT: its tactic's softmax share among those its expansion ran
    (``expansion``), or how many of the goal's proposals held it (``frequency``: the samples'
    empirical distribution, so the visits follow the tactics the policy keeps proposing; with one
    tactic run per expansion every ``expansion`` prior is 1), or its ``evidence`` score (see
    ``candidate_order``). Ours, tuned there."""
    evidence_scope: Literal["search", "batch"] = "batch"
    """Whose outcomes weigh the ``evidence`` rules: each search's own, or those of every search
    advanced together with the same policy (ours: one search sees few goals where the two
    readings disagree)."""
    evidence_sharpness: float = 4.0
    """The ``evidence`` score weighs each reading by (its hit rate / the best one's) to this power
    (1: in proportion; large: the better reading alone, the other breaking ties). Ours: 4 over 1
    and 16 on the benchmark's train theorems."""
    path_proposals: Literal["leaf", "root", "path"] = "path"
    """Which goals of a selected path the policy is asked about, in the leaf's model call: the leaf
    alone, whose proposal its expansion runs (``leaf``), or also the root (``root``) or every goal
    above the leaf (``path``), whose proposals are only counted (``candidate_order`` and
    ``edge_prior`` read the counts), so a goal's evidence grows with its visits, not only with its
    few expansions. No environment calls; a model call's batch holds one goal per level of each
    path. Ours: where a constant critic cannot tell a dead end from progress, what separates a
    goal's right tactic from its dead ends is how often the policy proposes it first, and a root
    re-expanded about 9 times in 32 calls reads too few proposals (docs/results/search_synthetic.md)."""
    and_sibling: Literal["hardest", "least_visited"] = "least_visited"
    """At an AND node, which unsolved child to descend into: the lowest value (the hardest decides
    the proof) or the least visited (budget spread evenly over the goals still open). Unvisited
    children go first either way. Ours: with a critic that cannot tell a dead end from progress
    (the synthetic benchmark's), spreading the calls won there."""
    tactic_timeout: float = 10.0
    """Seconds per tactic application (not given)."""
    max_depth: int = 64
    """Selection stops descending below this depth (guards long transposition chains; ours)."""
