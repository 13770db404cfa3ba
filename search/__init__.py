"""Factorized proof search (NanoProof): LeanTree proof trees, an environment of Lean goals,
AND-OR MCTS with an actor-critic transformer. See search/README.md."""
