"""leanloop: the shared package. It imports no stage; stages meet only through it and manifests.

- ``leanloop.artifacts``: the artifact contract (``Manifest``) and the one resolver of references
  (``resolve_artifact`` / ``resolve_run`` / ``resolve_model`` for ``artifacts://<stage>/<run>``);
- ``leanloop.corpus``: the labelled corpus's schema, split names (train / valid / test) and reader;
- ``leanloop.jsonl``: JSON Lines read and written one way (``.gz`` aware, atomic writes);
- ``leanloop.tool``: ``parse_config`` and ``run_tool``, the non-training entry points' contract
  (``leanloop.training.cli.run_stage`` is the training stages');
- ``leanloop.lean``: the Lean library (backends and their one ``BackendConfig``, the stages' ``lean:``
  block ``LeanConfig``, verifier, policy);
- ``leanloop.prover``: prompts, extraction, statement sets, pass@k; ``leanloop.grpo``: GRPO;
- ``leanloop.training``: models (presets, MoE), packing, optimizers; ``leanloop.metrics``,
  ``leanloop.traces``; ``leanloop.evaluator``: the Evaluator protocol stages' loaders implement.
"""

__version__ = "0.1.0"
