"""GRPO shared by every policy-gradient stage (rl, autoformalizer Stage 2, prm): the objective (TRL's
definitions, tested equal to TRL's loss), rollouts (transformers / vLLM) and the update the modules hold."""
