"""The whole-proof prover's shared pieces: prompt, completion extraction, statement sets, pass@k,
sampling (generation, resumable shards). Used by sft (training, sampling, evaluation), rl, the
autoformalizer, search and prm."""
