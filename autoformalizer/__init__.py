"""Autoformalizer: informal statement -> Lean theorem statement (unfused NF4 Qwen3-MoE policy with
QLoRA/QDoRA, gated compiler reward, retrieval and repair). See README "Autoformalizer"."""
