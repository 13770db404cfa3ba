"""LeanPRM: Lean-grounded step labels for prose proofs and a step verifier trained on them.

paired.py (prose + tactic proof format), steps.py (top-level tactic steps of a Lean proof),
labels_from_lean.py (step labels from Lean: incremental / prefix / recorded first error, reviewer and
correspondence hooks), labelled_proofs.py (the labelled proofs on disk: parquet + manifest),
verifier_io.py (the step verifier's prompt, answer grammar and reward), generate.py / label.py (make prm-generate /
prm-label), config.py / data.py / module.py / train.py (the verifier: SFT then GRPO), evaluate.py
(make prm-eval), external.py (ProcessBench / PRMBench / PRM800K readers). See prm/README.md.
"""
